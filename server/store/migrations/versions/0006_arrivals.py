"""Issue 20: results wait in `arrivals` until their search is told of them, off the request.

A result request records the measurement and one arrival row; the search's engine is told,
and proposes, afterwards (server.services.arrivals). A database from before has told every
result it recorded, so the table starts empty.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26 03:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "arrivals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("search_id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["search_id"], ["searches.id"]),
        sa.ForeignKeyConstraint(["job_id"], ["candidates.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id"),
    )
    op.create_index("ix_arrivals_search_id", "arrivals", ["search_id"])


def downgrade() -> None:
    # Results still waiting would be lost to their engines: an older server cannot tell them.
    op.drop_index("ix_arrivals_search_id", table_name="arrivals")
    op.drop_table("arrivals")
