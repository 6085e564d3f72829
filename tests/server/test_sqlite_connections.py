"""A pooled SQLite connection goes back with its cursors closed: a read left unread must not
keep the next write transaction on that connection from beginning."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from server.settings import Settings
from server.store.rows import SearchRow
from server.store.schema import migrate
from server.store.store import Store


@pytest.fixture
def store(tmp_path):
    store = Store(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}", auth=False))
    migrate(store.db)
    yield store
    store.close()


def _search() -> SearchRow:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    return SearchRow(
        name="c", status="running", device_class="cpu", request={}, runtime="eager",
        device="cpu", created_at=created, revision=0,
    )  # fmt: skip


def test_a_read_left_unread_does_not_lock_out_the_next_write(store, tmp_path):
    with store.write() as session:
        session.add_all([_search() for _ in range(3)])
    with store.read() as session:
        # A Core select reads its rows as they are asked for (an ORM one reads them all).
        ids = session.execute(select(SearchRow.__table__.c.id))
        next(iter(ids))  # as `all(...)` stops at its first False, the rest unread
    # The result is still held (its frame has not ended), and another connection writes.
    assert store.db.pool.checkedin() == 1  # the next session gets this very connection
    other = sqlite3.connect(tmp_path / "c.db")
    with other:
        other.execute("UPDATE searches SET revision = revision + 1")
    other.close()
    # Without the cursor closed on checkin: "database is locked" at BEGIN IMMEDIATE, at once.
    with store.write() as session:
        session.add(_search())
    with store.read() as session:
        assert session.scalar(select(func.count(SearchRow.id))) == 4
    with pytest.raises(Exception, match="closed"):
        ids.all()  # read after its session ended: an error, not a stale snapshot
