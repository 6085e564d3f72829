"""The schema hwnas 0.1 created with create_all, before migrations existed.

A database made by that version has these tables and no alembic_version: `server.store.schema`
stamps it with this revision and upgrades it from here.

Revision ID: 0001
Revises:
Create Date: 2026-11-24 01:39:44.345375
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=True),
        sa.Column("device_class", sa.String(length=100), nullable=False),
        sa.Column("fingerprint", sa.JSON(), nullable=False),
        sa.Column("fingerprint_key", sa.String(length=64), nullable=False),
        sa.Column("registered_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=False),
        sa.Column("jobs_done", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_agents_device_class"), ["device_class"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_agents_fingerprint_key"), ["fingerprint_key"], unique=False
        )

    op.create_table(
        "architectures",
        sa.Column("arch_id", sa.String(length=32), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("decoder_params", sa.Integer(), nullable=False),
        sa.Column("total_params", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("arch_id"),
    )
    op.create_table(
        "searches",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("device_class", sa.String(length=100), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("runtime", sa.String(length=32), nullable=False),
        sa.Column("device", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("finish_reason", sa.String(length=32), nullable=True),
        sa.Column("normalisation", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("searches", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_searches_device_class"), ["device_class"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_searches_status"), ["status"], unique=False)

    op.create_table(
        "measurements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("arch_id", sa.String(length=32), nullable=False),
        sa.Column("settings_key", sa.Text(), nullable=False),
        sa.Column("fingerprint_key", sa.String(length=64), nullable=False),
        sa.Column("runtime", sa.String(length=32), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("search_id", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("peak_memory_mb", sa.Float(), nullable=False),
        sa.Column("busy", sa.Boolean(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["arch_id"],
            ["architectures.arch_id"],
        ),
        sa.ForeignKeyConstraint(
            ["search_id"],
            ["searches.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("measurements", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_measurements_arch_id"), ["arch_id"], unique=False)

    op.create_table(
        "candidates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("search_id", sa.Integer(), nullable=False),
        sa.Column("arch_id", sa.String(length=32), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("lease_id", sa.String(length=64), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(), nullable=True),
        sa.Column("agent_id", sa.String(length=64), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("failure_kind", sa.String(length=32), nullable=True),
        sa.Column("failure_message", sa.Text(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("measurement_id", sa.Integer(), nullable=True),
        sa.Column("reused", sa.Boolean(), nullable=False),
        sa.Column("prediction", sa.JSON(), nullable=True),
        sa.Column("result_seq", sa.Integer(), nullable=True),
        sa.Column("hypervolume", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["arch_id"],
            ["architectures.arch_id"],
        ),
        sa.ForeignKeyConstraint(
            ["measurement_id"],
            ["measurements.id"],
        ),
        sa.ForeignKeyConstraint(
            ["search_id"],
            ["searches.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("search_id", "arch_id", name="one_arch_per_search"),
    )
    with op.batch_alter_table("candidates", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_candidates_search_id"), ["search_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_candidates_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("candidates", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_candidates_status"))
        batch_op.drop_index(batch_op.f("ix_candidates_search_id"))

    op.drop_table("candidates")
    with op.batch_alter_table("measurements", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_measurements_arch_id"))

    op.drop_table("measurements")
    with op.batch_alter_table("searches", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_searches_status"))
        batch_op.drop_index(batch_op.f("ix_searches_device_class"))

    op.drop_table("searches")
    op.drop_table("architectures")
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_agents_fingerprint_key"))
        batch_op.drop_index(batch_op.f("ix_agents_device_class"))

    op.drop_table("agents")
