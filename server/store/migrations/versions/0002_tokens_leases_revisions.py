"""Issue 8: API tokens, agent credentials, the lease log, result idempotency, search revisions.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24 01:39:57.827351
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_table(
        "leases",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("issued_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["candidates.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_leases_job_id"), ["job_id"], unique=False)

    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("credential_hash", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("enrolled_by", sa.Integer(), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_agents_credential_hash"), ["credential_hash"], unique=False
        )
        batch_op.create_foreign_key("fk_agents_enrolled_by", "tokens", ["enrolled_by"], ["id"])

    with op.batch_alter_table("candidates", schema=None) as batch_op:
        batch_op.add_column(sa.Column("result_lease_id", sa.String(length=64), nullable=True))

    with op.batch_alter_table("searches", schema=None) as batch_op:
        batch_op.add_column(sa.Column("revision", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("searches", schema=None) as batch_op:
        batch_op.drop_column("revision")

    with op.batch_alter_table("candidates", schema=None) as batch_op:
        batch_op.drop_column("result_lease_id")

    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_constraint("fk_agents_enrolled_by", type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_agents_credential_hash"))
        batch_op.drop_column("enrolled_by")
        batch_op.drop_column("credential_hash")

    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_leases_job_id"))

    op.drop_table("leases")
    op.drop_table("tokens")
