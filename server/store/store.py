"""The store: the session factory and the write lock, shared by the services.

What a process computes from the rows and keeps (the live engines: server.services.engines)
is not the store's: such a cache registers with `Store.observe` to hear how each write
transaction ended, so that it forgets what a rolled-back transaction told it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Protocol

from sqlalchemy import Table, Update, bindparam, insert, inspect, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.attributes import set_committed_value

from server.errors import NotFound
from server.settings import Settings
from server.store.database import READ, WRITE, checkpoint, make_engine
from server.store.rows import SearchRow


class TransactionObserver(Protocol):
    """Told how each write transaction (`Store.write`) ended, and before it commits."""

    def committing(self, session: Session) -> None: ...

    def committed(self) -> None: ...

    def rolled_back(self) -> None: ...


class Store:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.db = make_engine(settings.database_url)
        self._sessions = sessionmaker(self.db.execution_options(**READ), expire_on_commit=False)
        self._write_sessions = sessionmaker(
            self.db.execution_options(**WRITE), expire_on_commit=False
        )
        # One writer at a time in this process: the engines the services cache are not
        # thread-safe (a proposal round run outside this lock holds the search's engine lock
        # instead: server.services.arrivals). Other processes are kept out by the database:
        # SQLite has one writer, and on PostgreSQL a write that touches a search locks the
        # search's row (`get_search`).
        self.write_lock = threading.RLock()
        self.row_locks = self.db.dialect.name == "postgresql"
        self._observers: list[TransactionObserver] = []
        self._row_observers: list[TransactionObserver] = []

    def observe(self, observer: TransactionObserver, rows: bool = False) -> None:
        """Tell `observer` how every later write transaction ends; with `rows`, also those
        of `write_rows` (which run beside the others on PostgreSQL, in threads of their own)."""
        self._observers.append(observer)
        if rows:
            self._row_observers.append(observer)

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._sessions() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A transaction under the write lock; commits on success, rolls back on any error."""
        with self.write_lock:
            with _observed(self._observers, self._write_sessions) as session:
                yield session

    @contextmanager
    def write_rows(self) -> Iterator[Session]:
        """A write transaction that touches no engine (claims, heartbeats): on PostgreSQL it
        runs beside other writes, kept apart by row locks; on SQLite it is a plain write."""
        if not self.row_locks:
            with self.write() as session:
                yield session
            return
        with _observed(self._row_observers, self._write_sessions) as session:
            yield session

    def now(self):
        return self.settings.clock()

    def checkpoint(self) -> None:
        """Copy SQLite's write-ahead log into the database (`database.checkpoint`): off the
        write lock, then, for a long log, what was written meanwhile under it, so that the
        copy is whole and the log starts again. A log only ever copied beside writers never
        starts again: under a steady stream of writes it grew to the length at which a commit
        checkpoints it under the write lock (`AUTOCHECKPOINT_PAGES`), 26-40 ms, every half
        second while the largest generation was written (docs/benchmarks.md, "A log that
        starts again")."""
        if checkpoint(self.db):
            with self.write_lock:
                checkpoint(self.db)

    def close(self) -> None:
        self.db.dispose()


@contextmanager
def _observed(
    observers: list[TransactionObserver], sessions: sessionmaker[Session]
) -> Iterator[Session]:
    """A transaction that tells `observers` before it commits and how it ended."""
    try:
        with sessions() as session, session.begin():
            yield session
            write_deferred(session)
            for observer in observers:
                observer.committing(session)
    except BaseException:
        # A cache may hold what the rollback undid (an engine this transaction told
        # something): its observer forgets it, and it is rebuilt from the rows.
        for observer in observers:
            observer.rolled_back()
        raise
    for observer in observers:
        observer.committed()


# A search's row is locked FOR NO KEY UPDATE: writers of the search take turns, while rows
# that refer to it (a measurement, an arrival) are still inserted meanwhile (their foreign
# key check takes FOR KEY SHARE, which FOR UPDATE would block).
SEARCH_LOCK = {"key_share": True}
SKIP_LOCKED = {"skip_locked": True}


def get_search(session: Session, search_id: int, lock: bool = False) -> SearchRow:
    """The search; with `lock`, its row is locked until the transaction ends (PostgreSQL;
    SQLite's write transactions exclude each other already), so that writes to one search
    from several server processes take turns and each sees the last one's rows."""
    locking = SEARCH_LOCK if lock else None
    search = session.get(SearchRow, search_id, with_for_update=locking, populate_existing=lock)
    if search is None:
        raise NotFound("search", search_id)
    return search


def take_search(session: Session, search_id: int) -> SearchRow | None:
    """The search with its row locked until the transaction ends, or None at once when
    another transaction holds that lock (PostgreSQL; elsewhere it is `get_search` with
    `lock`). A thread must not wait for the lock inside a write transaction: it would hold
    its process's write lock meanwhile, and every write of the process would queue behind
    another process's transaction."""
    if session.get_bind().dialect.name != "postgresql":
        return get_search(session, search_id, lock=True)
    search = session.get(
        SearchRow, search_id, with_for_update=SEARCH_LOCK | SKIP_LOCKED, populate_existing=True
    )
    if search is None and session.get(SearchRow, search_id) is None:
        raise NotFound("search", search_id)
    return search


def write_columns(session: Session, row: Any, **values: Any) -> None:
    """Set columns of a row `session` holds and write them at once, by its primary key (one
    statement built once per table and columns), rather than at the session's next flush: the
    unit of work's flush of a row or two costs several times the statement (issue 20). The
    row reads as if it had been loaded with them. A row not in the database yet gets them as
    attributes, written with its insert. Columns `defer_columns` left unwritten on the row are
    written in the same statement."""
    state = inspect(row)
    deferred = session.info.get(_DEFERRED)
    if deferred and state in deferred:
        values = {**deferred.pop(state)[1], **values}
    if not values:
        return
    if not state.persistent:
        for name, value in values.items():
            setattr(row, name, value)
        return
    session.execute(_update(row.__table__, values), {"_row": state.identity[0], **values})
    for name, value in values.items():
        set_committed_value(row, name, value)


def write_columns_of(session: Session, rows: list[Any], values: list[dict[str, Any]]) -> None:
    """`write_columns` for several rows of one table in the database, `values[i]` for
    `rows[i]`, each setting the same columns: one statement run for all of them."""
    if not rows:
        return
    states = [inspect(row) for row in rows]
    deferred = session.info.get(_DEFERRED)
    if any(not s.persistent or (deferred and s in deferred) for s in states):
        for row, columns in zip(rows, values, strict=True):  # rare: each its own way
            write_columns(session, row, **columns)
        return
    session.execute(
        _update(rows[0].__table__, values[0]),
        [{"_row": s.identity[0], **v} for s, v in zip(states, values, strict=True)],
    )
    for row, columns in zip(rows, values, strict=True):
        for name, value in columns.items():
            set_committed_value(row, name, value)


def _update(table: Any, values: dict[str, Any]) -> Update:
    """UPDATE of `values`' columns of one row by its primary key (`_row`), built once."""
    key = (table.name, tuple(values))
    statement = _UPDATES.get(key)
    if statement is None:
        (primary,) = table.primary_key.columns
        statement = _UPDATES[key] = (
            update(table)
            .where(primary == bindparam("_row"))
            .values({name: bindparam(name) for name in values})
        )
    return statement


_UPDATES: dict[tuple[str, tuple[str, ...]], Update] = {}


# What one `insert_rows` statement writes at most: a round's part (searches.ROUND_CHUNK) in one.
ROWS_PER_INSERT = 50


def insert_rows(
    session: Session, table: Table, rows: list[dict[str, Any]], skip_existing: str | None = None
) -> None:
    """Insert `rows` (each with the same columns) into `table`, up to `ROWS_PER_INSERT` of
    them by one statement of many VALUES, built and compiled once per table, columns and
    count; with `skip_existing`, a row whose column of that name (unique) is taken already is
    left out.

    Not one statement run for each row (`executemany`): the driver lets the interpreter go
    at each row and must win it back, and while another thread runs Python each win waits
    out its turn: a part of 50 proposals took 239 ms at the median beside a busy thread, 20
    ms this way (4.1 and 3.6 ms quiet; docs/benchmarks.md, "Where a registration waits during
    the largest next generation"). SQLAlchemy's own many-VALUES insert makes a parameter
    object per value on each run: nine times slower. The values are converted as SQLAlchemy
    would (its bind processors), and the statement run as its driver text."""
    if not rows:
        return
    connection = session.connection()
    dialect = connection.dialect
    columns = tuple(column.name for column in table.columns if column.name in rows[0])
    if len(columns) != len(rows[0]):  # as SQLAlchemy's own insert, a value is never dropped
        unknown = ", ".join(sorted(set(rows[0]) - set(columns)))
        raise ValueError(f"insert_rows into {table.name}: no column {unknown}")
    for start in range(0, len(rows), ROWS_PER_INSERT):
        part = rows[start : start + ROWS_PER_INSERT]
        text, convert, positional = _many_values(dialect, table, columns, len(part), skip_existing)
        values = [
            value if to is None else to(value)  # None too: a JSON column's None is 'null'
            for row in part
            for to, value in zip(convert, (row[name] for name in columns), strict=True)
        ]
        if positional:
            connection.exec_driver_sql(text, tuple(values))
        else:
            names = [f"{name}__{i}" for i in range(len(part)) for name in columns]
            connection.exec_driver_sql(text, dict(zip(names, values, strict=True)))


# Bounded: a process that opens many stores (the test suite) holds each one's dialect here.
@lru_cache(maxsize=256)
def _many_values(
    dialect: Dialect, table: Table, columns: tuple[str, ...], count: int, skip_existing: str | None
) -> tuple[str, list[Any], bool]:
    """`insert_rows`' statement for `count` rows: its driver text, each column's bind
    processor (None: passed as is), and whether its parameters are positional."""
    # SQLAlchemy's own defaults would come as parameters of their own, not the rows'
    unset = [c.name for c in table.columns if c.default is not None and c.name not in columns]
    if unset:
        raise ValueError(f"insert_rows into {table.name}: give {', '.join(unset)} (defaulted)")
    insert_for = {"postgresql": pg_insert, "sqlite": sqlite_insert}.get(dialect.name, insert)
    statement = insert_for(table).values(
        [
            {name: bindparam(f"{name}__{i}", type_=table.c[name].type) for name in columns}
            for i in range(count)
        ]
    )
    if skip_existing is not None:
        statement = statement.on_conflict_do_nothing(index_elements=[skip_existing])
    compiled = statement.compile(dialect=dialect)
    # The parameters go in row by row, each in the table's order of columns.
    if compiled.positional and list(compiled.positiontup) != [
        f"{name}__{i}" for i in range(count) for name in columns
    ]:
        raise RuntimeError(f"{dialect.name} places the parameters of {table.name} otherwise")
    convert = [table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in columns]
    return str(compiled), convert, compiled.positional


_DEFERRED = "hwnas_deferred_columns"


def defer_columns(session: Session, row: Any, **values: Any) -> None:
    """Set columns of a row `session` holds as `write_columns` does, but leave them to be
    written with the row's next `write_columns`, in one statement (a result's job finished,
    then numbered as its search is told: each statement of a result held the process's write
    lock about half a millisecond under load). Until then a read of the table by a statement
    does not see them: whoever reads such rows first calls `write_deferred`, and the
    transaction does before it commits (`Store.write`)."""
    for name, value in values.items():
        set_committed_value(row, name, value)
    # The row itself is kept: the session holds its unchanged rows weakly.
    _, unwritten = session.info.setdefault(_DEFERRED, {}).setdefault(inspect(row), (row, {}))
    unwritten.update(values)


def write_deferred(session: Session) -> None:
    """Write every column `defer_columns` left unwritten in this session."""
    deferred = session.info.get(_DEFERRED)
    while deferred:
        row, _ = next(iter(deferred.values()))
        write_columns(session, row)
