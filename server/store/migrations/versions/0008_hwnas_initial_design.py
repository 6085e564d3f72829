"""Issue 22: hwnas's initial design is a setting of the request (`initial_design`), and its
default is no longer random.

A search's engine is rebuilt from its stored request, and a request without the setting now
means the new default. The hwnas searches stored before this version drew their initial
design at random, so they get `initial_design: random` written in, and a restart resumes
them as they ran.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29 01:00:00
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

searches = sa.table("searches", sa.column("id", sa.Integer()), sa.column("request", sa.JSON()))


def _rewrite(change: Callable[[dict], dict | None]) -> None:
    """Apply `change` to every stored request; it returns the new request, or None to keep."""
    bind = op.get_bind()
    for row in bind.execute(sa.select(searches.c.id, searches.c.request)).all():
        changed = change(dict(row.request))
        if changed is not None:
            bind.execute(searches.update().where(searches.c.id == row.id).values(request=changed))


def upgrade() -> None:
    def as_it_ran(request: dict) -> dict | None:
        if request.get("strategy") != "hwnas" or "initial_design" in request:
            return None
        return {**request, "initial_design": "random"}

    _rewrite(as_it_ran)


def downgrade() -> None:
    # An older server refuses a request with a setting it does not know, and it can only
    # draw an initial design at random.
    def without(request: dict) -> dict | None:
        if "initial_design" not in request:
            return None
        return {k: v for k, v in request.items() if k != "initial_design"}

    _rewrite(without)
