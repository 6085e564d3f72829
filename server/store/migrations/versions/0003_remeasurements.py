"""Issue 17: re-measurement jobs (candidates.round), one row per (search, arch, round).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 15:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("candidates", schema=None) as batch_op:
        batch_op.add_column(sa.Column("round", sa.Integer(), server_default="0", nullable=False))
        batch_op.drop_constraint("one_arch_per_search", type_="unique")
        batch_op.create_unique_constraint("one_arch_per_search", ["search_id", "arch_id", "round"])


def downgrade() -> None:
    # Re-measurements go with the column that tells them apart (their leases first).
    op.execute("DELETE FROM leases WHERE job_id IN (SELECT id FROM candidates WHERE round > 0)")
    op.execute("DELETE FROM candidates WHERE round > 0")
    with op.batch_alter_table("candidates", schema=None) as batch_op:
        batch_op.drop_constraint("one_arch_per_search", type_="unique")
        batch_op.create_unique_constraint("one_arch_per_search", ["search_id", "arch_id"])
        batch_op.drop_column("round")
