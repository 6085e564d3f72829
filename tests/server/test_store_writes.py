"""The store's writes: `write_columns` (a row's columns written at once, leaving nothing for the
session's flush), `insert_rows` (many rows by one statement), and a write transaction that a
read left unread does not lock out."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest
from sqlalchemy import String, cast, event, func, insert, select
from sqlalchemy.exc import ProgrammingError

from server.settings import Settings
from server.store.rows import ArchitectureRow, CandidateRow, SearchRow
from server.store.schema import migrate
from server.store.store import (
    ROWS_PER_INSERT,
    Store,
    defer_columns,
    insert_rows,
    write_columns,
    write_columns_of,
)


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


@pytest.fixture
def either_store(database_url):
    """A store on SQLite, then on PostgreSQL (their drivers take parameters differently)."""
    store = Store(Settings(database_url=database_url("rows.db"), auth=False))
    migrate(store.db)
    yield store
    store.close()


def _proposals(search_id: int, tag: str, count: int) -> tuple[list[dict], list[dict]]:
    """Rows of `count` architectures and their jobs, with every kind of column value."""
    architectures = [
        {
            "arch_id": f"{tag}{i:04d}",
            "spec": {"kind": "gpt2", "n_layer": i % 7 + 1, "d_inner": [512] * (i % 3 + 1)},
            "decoder_params": 1000 + i,
            "total_params": 2_000_000_000 + i,
        }
        for i in range(count)
    ]
    jobs = [
        {
            "search_id": search_id,
            "arch_id": a["arch_id"],
            "round": 0,
            "generation": i % 2,
            "status": "queued" if i % 3 else "measured",
            "queued_at": datetime(2026, 1, 1, 12, 0, i % 60, 123456, tzinfo=UTC),
            "attempts": 0,
            "reused": i % 3 == 0,
            "finished_at": None,
            "measurement_id": None,
            "prediction": None if i % 2 else {"latency_ms": [1.5, 2.5], "why": "é"},
        }
        for i, a in enumerate(architectures)
    ]
    return architectures, jobs


def _read_back(session, tag: str) -> list[tuple]:
    """The jobs of `tag` with their architectures, as the ORM reads them (ids aside)."""
    jobs = session.scalars(
        select(CandidateRow).where(CandidateRow.arch_id.like(f"{tag}%")).order_by(CandidateRow.id)
    ).all()
    return [
        (
            job.arch_id[len(tag) :],
            {
                c.name: getattr(job, c.name)
                for c in CandidateRow.__table__.columns
                if c.name not in ("id", "arch_id")
            },
            job.architecture.spec,
            job.architecture.decoder_params,
            job.architecture.total_params,
        )
        for job in jobs
    ]


def test_many_rows_go_in_by_one_statement_per_part_and_read_back_as_run_one_by_one(
    either_store,
):
    store = either_store
    with store.write() as session:
        session.add(_search())
    with store.read() as session:
        search_id = session.scalars(select(SearchRow.id)).one()
    count = 2 * ROWS_PER_INSERT + 3
    by_row = _proposals(search_id, "r", count)
    together = _proposals(search_id, "t", count)
    executed: list[tuple[str, bool]] = []
    event.listen(
        store.db, "before_cursor_execute", lambda *a: executed.append((a[2].split()[0], a[5]))
    )
    with store.write() as session:
        session.execute(insert(ArchitectureRow.__table__), by_row[0])
        session.execute(insert(CandidateRow.__table__), by_row[1])
        del executed[:]
        insert_rows(session, ArchitectureRow.__table__, together[0])
        insert_rows(session, CandidateRow.__table__, together[1])
        # three statements a table (50, 50 and 3 rows), none run once per row
        assert executed == [("INSERT", False)] * 6
    with store.read() as session:
        assert _read_back(session, "t") == _read_back(session, "r")
        assert len(_read_back(session, "t")) == count
        # stored alike, not only read back alike: a JSON None is JSON's null, not SQL's NULL
        stored = {
            tag: session.execute(
                select(cast(CandidateRow.prediction, String), cast(CandidateRow.queued_at, String))
                .where(CandidateRow.arch_id.like(f"{tag}%"))
                .order_by(CandidateRow.id)
            ).all()
            for tag in ("r", "t")
        }
        assert stored["t"] == stored["r"]
        assert ("null",) in {row[:1] for row in stored["t"]}


def test_rows_whose_unique_column_is_taken_are_left_out_and_the_rest_go_in(either_store):
    store = either_store
    first, _ = _proposals(1, "a", 3)
    with store.write() as session:
        insert_rows(session, ArchitectureRow.__table__, first[:2], skip_existing="arch_id")
    again = [{**row, "decoder_params": 7} for row in first]  # two taken, one new
    with store.write() as session:
        insert_rows(session, ArchitectureRow.__table__, again, skip_existing="arch_id")
    with store.read() as session:
        rows = session.execute(
            select(ArchitectureRow.arch_id, ArchitectureRow.decoder_params).order_by(
                ArchitectureRow.arch_id
            )
        ).all()
        assert [tuple(r) for r in rows] == [("a0000", 1000), ("a0001", 1001), ("a0002", 7)]


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


def test_rows_without_a_column_the_table_defaults_are_refused_naming_it(store):
    with store.write() as session:
        session.add(_search())
    _, jobs = _proposals(1, "d", 2)
    for job in jobs:
        del job["attempts"]
    with store.write() as session, pytest.raises(ValueError, match="attempts"):
        insert_rows(session, CandidateRow.__table__, jobs)


def test_rows_with_a_name_the_table_lacks_are_refused_naming_it(store):
    first, _ = _proposals(1, "u", 2)
    first[0]["decoder_parms"] = 3  # misspelt
    with store.write() as session, pytest.raises(ValueError, match="decoder_parms"):
        insert_rows(session, ArchitectureRow.__table__, first)
