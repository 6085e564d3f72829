"""The store: session factory, the write lock and the live engines, shared by the services."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, sessionmaker

from archvocab.search_wire import JobStatus
from search.lts import Candidate
from server.cache import find_cached
from server.db import WRITE, ArchitectureRow, CandidateRow, SearchRow, make_engine
from server.engines import EngineCache, new_candidate_rows
from server.errors import NotFound
from server.results import ResultTables
from server.settings import Settings


class Store:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.db = make_engine(settings.database_url)
        self._sessions = sessionmaker(self.db, expire_on_commit=False)
        self._write_sessions = sessionmaker(
            self.db.execution_options(**WRITE), expire_on_commit=False
        )
        # One writer at a time in this process: the engines it caches are not thread-safe.
        # Other processes are kept out by the database: SQLite has one writer, and on
        # PostgreSQL a write that touches a search locks the search's row (`lock_search`).
        self.write_lock = threading.RLock()
        self.row_locks = self.db.dialect.name == "postgresql"
        self.engines = EngineCache()
        self.results = ResultTables()

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._sessions() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A transaction under the write lock; commits on success, rolls back on any error."""
        with self.write_lock:
            try:
                with self._write_sessions() as session, session.begin():
                    yield session
            except BaseException:
                # An engine this transaction held may have been told something the rollback
                # undid: it is rebuilt from the rows. Other searches' engines are untouched.
                self.engines.rolled_back()
                raise
            self.engines.committed()

    @contextmanager
    def write_rows(self) -> Iterator[Session]:
        """A write transaction that touches no engine (claims, heartbeats): on PostgreSQL it
        runs beside other writes, kept apart by row locks; on SQLite it is a plain write."""
        if not self.row_locks:
            with self.write() as session:
                yield session
            return
        with self._write_sessions() as session, session.begin():
            yield session

    def now(self):
        return self.settings.clock()

    def close(self) -> None:
        self.db.dispose()


def get_search(session: Session, search_id: int, lock: bool = False) -> SearchRow:
    """The search; with `lock`, its row is locked until the transaction ends (PostgreSQL;
    SQLite's write transactions exclude each other already), so that writes to one search
    from several server processes take turns and each sees the last one's rows."""
    search = session.get(SearchRow, search_id, with_for_update=lock, populate_existing=lock)
    if search is None:
        raise NotFound("search", search_id)
    return search


def enqueue(
    session: Session, search: SearchRow, batch: list[Candidate], now: datetime
) -> list[CandidateRow]:
    """Persist a batch of proposals: architectures (shared) first, then their jobs.

    A proposal the cache already has a measurement for is stored as measured (reused) instead
    of queued; returns those rows, for the engine to be told.
    """
    rows = [
        {
            "arch_id": c.arch_id,
            "spec": c.spec.to_dict(),
            # scored by the engine when it admitted the candidate
            "decoder_params": int(c.proxies["decoder_params"]),
            "total_params": int(c.proxies["total_params"]),
        }
        for c in batch
    ]
    if rows:
        # Architectures are shared by searches, which other server processes may be extending
        # at this moment: whoever inserts one first wins, the others find it there.
        insert = (pg_insert if session.bind.dialect.name == "postgresql" else sqlite_insert)(
            ArchitectureRow
        )
        session.execute(insert.values(rows).on_conflict_do_nothing(index_elements=["arch_id"]))
    session.flush()
    cached = find_cached(session, search, [c.arch_id for c in batch])
    rows = new_candidate_rows(search.id, batch)
    for row in rows:
        hit = cached.get(row.arch_id)
        if hit is not None:
            row.status, row.reused, row.finished_at = JobStatus.MEASURED, True, now
            row.measurement = hit
    session.add_all(rows)
    session.flush()
    return [row for row in rows if row.reused]
