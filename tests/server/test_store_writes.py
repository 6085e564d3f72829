"""The store's writes: `write_columns` (a row's columns written at once, leaving nothing for the
session's flush), and a write transaction that a read left unread does not lock out."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.exc import ProgrammingError

from server.settings import Settings
from server.store.rows import SearchRow
from server.store.schema import migrate
from server.store.store import Store, defer_columns, write_columns, write_columns_of


@pytest.fixture
def store(tmp_path):
    store = Store(Settings(database_url=f"sqlite:///{tmp_path / 'w.db'}", auth=False))
    migrate(store.db)
    yield store
    store.close()


def _search(revision: int = 0) -> SearchRow:
    return SearchRow(
        name="w",
        status="running",
        device_class="cpu",
        request={},
        runtime="eager",
        device="cpu",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        revision=revision,
    )


def _statements(store: Store) -> list[str]:
    seen: list[str] = []
    event.listen(store.db, "before_cursor_execute", lambda *a: seen.append(a[2].split()[0]))
    return seen


def test_a_loaded_row_is_written_by_one_update_and_left_clean(store):
    with store.write() as session:
        session.add(_search(revision=3))
    statements = _statements(store)
    with store.write() as session:
        search = session.scalars(select(SearchRow)).one()
        write_columns(session, search, revision=4, finish_reason="budget")
        assert statements.count("UPDATE") == 1  # at once, not at the flush
        assert search.revision == 4 and search.finish_reason == "budget"
        assert not session.dirty  # the flush has nothing left to write
        written = len(statements)
        session.flush()
        assert len(statements) == written
    with store.read() as session:
        again = session.scalars(select(SearchRow)).one()
        assert (again.revision, again.finish_reason) == (4, "budget")


def test_a_row_not_yet_inserted_gets_the_values_with_its_insert(store):
    statements = _statements(store)
    with store.write() as session:
        search = _search()
        session.add(search)
        write_columns(session, search, revision=7)
        assert "UPDATE" not in statements
    with store.read() as session:
        assert session.scalars(select(SearchRow.revision)).one() == 7


def test_several_rows_are_written_by_one_statement_each_with_its_values(store):
    with store.write() as session:
        session.add_all([_search(revision=r) for r in (1, 2, 3)])
    executed: list[tuple[str, bool]] = []
    event.listen(
        store.db, "before_cursor_execute", lambda *a: executed.append((a[2].split()[0], a[5]))
    )
    with store.write() as session:
        searches = session.scalars(select(SearchRow).order_by(SearchRow.id)).all()
        del executed[:]
        values = [{"revision": 10 + i, "finish_reason": f"r{i}"} for i in range(3)]
        write_columns_of(session, searches, values)
        assert executed == [("UPDATE", True)]  # one statement, run for the three rows
        assert [(s.revision, s.finish_reason) for s in searches] == [
            (10, "r0"),
            (11, "r1"),
            (12, "r2"),
        ]
        assert not session.dirty
    with store.read() as session:
        rows = session.execute(select(SearchRow.revision, SearchRow.finish_reason)).all()
        assert sorted(map(tuple, rows)) == [(10, "r0"), (11, "r1"), (12, "r2")]


def test_several_rows_keep_what_was_left_to_be_written_with_them(store):
    with store.write() as session:
        session.add_all([_search(revision=r) for r in (1, 2)])
    with store.write() as session:
        first, second = session.scalars(select(SearchRow).order_by(SearchRow.id)).all()
        defer_columns(session, second, finish_reason="budget")
        write_columns_of(session, [first, second], [{"revision": 5}, {"revision": 6}])
        # the statement's next read sees them all, nothing left for the commit
        rows = session.execute(select(SearchRow.revision, SearchRow.finish_reason)).all()
        assert sorted(map(tuple, rows)) == [(5, None), (6, "budget")]


def test_a_write_rolled_back_with_its_transaction_is_undone(store):
    with store.write() as session:
        session.add(_search(revision=1))
    with pytest.raises(RuntimeError), store.write() as session:
        write_columns(session, session.scalars(select(SearchRow)).one(), revision=2)
        raise RuntimeError("the transaction fails after the write")
    with store.read() as session:
        assert session.scalars(select(SearchRow.revision)).one() == 1


def test_a_read_left_unread_does_not_lock_out_the_next_write(store, tmp_path):
    with store.write() as session:
        session.add_all([_search() for _ in range(3)])
    with store.read() as session:
        # A Core select reads its rows as they are asked for (an ORM one reads them all).
        ids = session.execute(select(SearchRow.__table__.c.id))
        next(iter(ids))  # as `all(...)` stops at its first False, the rest unread
    # The result is still held (its frame has not ended), and another connection writes.
    assert store.db.pool.checkedin() == 1  # the next session gets this very connection
    other = sqlite3.connect(tmp_path / "w.db")
    with other:
        other.execute("UPDATE searches SET revision = revision + 1")
    other.close()
    # Without the cursor closed on checkin: "database is locked" at BEGIN IMMEDIATE, at once
    # (a connection already reading gets no busy timeout: server.store.database).
    with store.write() as session:
        session.add(_search())
    with store.read() as session:
        assert session.scalar(select(func.count(SearchRow.id))) == 4
    with pytest.raises(ProgrammingError, match="closed cursor"):
        ids.all()  # read after its session ended: an error, not a stale snapshot
