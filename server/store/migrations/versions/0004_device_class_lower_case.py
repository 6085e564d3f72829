"""Issue 19: device classes are matched case-insensitively, kept in lower case.

Requests are lowered as they are read (archvocab.wire.base.DeviceClass); the classes already
stored are lowered here, so that an agent registered as `CPU` and a search made for `cpu`
before this version meet. (A search's stored request keeps its spelling: it is lowered again
whenever it is read.)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25 21:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("agents", "searches"):
        op.execute(f"UPDATE {table} SET device_class = lower(device_class)")


def downgrade() -> None:
    # The original spelling is gone, and lower case is a valid class for every version.
    pass
