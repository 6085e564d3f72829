"""Issue 20: a search's results are found by number without scanning its rows.

Every result asks for the search's last result number, and every refresh of a result table
(and the dashboard's poll) for the results after one; with the index on `search_id` alone
both read all of a search's rows (20,000 in a large search) each time.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26 00:10:00
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_candidates_search_result_seq", "candidates", ["search_id", "result_seq"])


def downgrade() -> None:
    op.drop_index("ix_candidates_search_result_seq", table_name="candidates")
