"""Issue 20: when a job went into the queue (`candidates.queued_at`), so that a lease can say
how long its job waited for an agent. A claim that waits for work (`claim?wait=`) is answered
when a job comes, so its own latency includes that wait; the time from queued to leased does
not. Rows from before stay without it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27 19:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("candidates", schema=None) as batch_op:
        batch_op.add_column(sa.Column("queued_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("candidates", schema=None) as batch_op:
        batch_op.drop_column("queued_at")
