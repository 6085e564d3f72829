"""Opening the database: the SQLAlchemy engine, migrated to the newest schema on open."""

from __future__ import annotations

import sqlite3
import time
import weakref

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DisconnectionError

from server.store.schema import check_schema
from server.store.schema import migrate as upgrade


def make_engine(database_url: str, migrate: bool = True) -> Engine:
    """Create the engine and bring the schema up to date (server.store.schema).

    SQLite gets WAL, a busy timeout, and transactions that say up front whether they write:
    a write transaction starts with BEGIN IMMEDIATE, so it waits its turn for the one writer
    (the busy timeout) instead of failing with "database is locked" when a read transaction
    tries to become a write one while another process writes. A connection goes back to the
    pool with its cursors closed (`_close_cursors`). Its write-ahead log is copied into the
    database by `checkpoint`, which a server runs on a schedule, rather than by the commit
    that finds the log long (`AUTOCHECKPOINT_PAGES`).

    PostgreSQL's pooled connections are pinged when taken after a rest (`_ping_if_rested`).
    """
    is_sqlite = database_url.startswith("sqlite")
    sqlite_args = {"check_same_thread": False, "timeout": 30, "factory": _CursorsKnown}
    engine = create_engine(database_url, connect_args=sqlite_args if is_sqlite else {})
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        event.listen(engine.pool, "checkin", _close_cursors)
    else:
        event.listen(engine.pool, "checkin", _rests)
        event.listen(engine.pool, "checkout", _ping_if_rested)
    if migrate:
        upgrade(engine)
    check_schema(engine)
    return engine


WRITE = {"hwnas_write": True}  # execution options of a connection that will write (SQLite)
# ...and of one that only reads: on SQLite a write there would have to upgrade the read
# transaction, and fails with "database is locked" whenever another connection wrote since it
# began, however long the busy timeout. The test suite refuses such writes (tests/conftest.py).
READ = {"hwnas_read": True}


def _sqlite_connect(dbapi_connection, _record) -> None:  # noqa: ANN001 - DBAPI objects
    # The driver's own transaction handling is off: _sqlite_begin says BEGIN and how.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


# SQLite copies its write-ahead log into the database (a checkpoint, which syncs the file) in
# the commit that finds the log longer than this many pages, 1,000 by default: that commit,
# and the process's write lock with it, then took 15-21 ms, about once in 180 commits while
# a search was replayed from the cache (docs/benchmarks.md, "Checkpoints off the write
# lock"). A server checkpoints on its schedule instead (`checkpoint`); a commit still does
# for a process that runs none, once the log is this long (200 MB). At 10,000 pages the
# largest generation's parts, writing about 20,000 pages a second, reached it between two of
# a server's checkpoints (docs/benchmarks.md, "A log that starts again").
AUTOCHECKPOINT_PAGES = 50_000


# A log at least this long that a checkpoint beside others copied only in part is finished
# under the write lock, so that it starts again (`Store.checkpoint`); a shorter one is left
# to the next checkpoints, not worth taking the lock for (16 MB).
RESTART_AT_PAGES = 4_096


def checkpoint(engine: Engine) -> bool:
    """Copy SQLite's write-ahead log into the database as far as no reader still needs it,
    waiting for no lock (a passive checkpoint), on a connection of the pool outside any
    transaction; writers go on meanwhile. Whether it left part of a log of
    `RESTART_AT_PAGES` or more uncopied: only a log copied whole is started again by the
    next writer. False where it copied all of it, found another connection's checkpoint
    under way (left to that one), or had nothing to do (not SQLite)."""
    if engine.dialect.name != "sqlite":
        return False
    connection = engine.raw_connection()
    try:
        cursor = connection.driver_connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
        busy, frames, copied = cursor.fetchone()
        cursor.close()
    finally:
        connection.close()
    return not busy and copied < frames and frames >= RESTART_AT_PAGES


def _sqlite_begin(connection) -> None:  # noqa: ANN001 - SQLAlchemy Connection
    write = connection.get_execution_options().get("hwnas_write", False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


class _CursorsKnown(sqlite3.Connection):
    """A SQLite connection that knows its cursors still alive (`_close_cursors`)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 - sqlite3.connect's
        super().__init__(*args, **kwargs)
        self.cursors: weakref.WeakSet[sqlite3.Cursor] = weakref.WeakSet()

    def cursor(self, *args, **kwargs) -> sqlite3.Cursor:  # noqa: ANN002, ANN003
        cursor = super().cursor(*args, **kwargs)
        self.cursors.add(cursor)
        return cursor


def _close_cursors(dbapi_connection, _record) -> None:  # noqa: ANN001 - DBAPI objects
    # A connection goes back to the pool with its cursors closed. A result left with rows
    # unread keeps its statement, and with it the read's snapshot, after the rollback, for
    # as long as something holds the result; a write transaction begun on the connection
    # meanwhile fails at once with "database is locked" once another connection has written
    # (the busy timeout does not apply to a connection already reading).
    if dbapi_connection is None:  # invalidated: closed already
        return
    for cursor in list(dbapi_connection.cursors):
        cursor.close()


# A connection taken from the pool within this long of its last use is not pinged. A restarted
# PostgreSQL, or a network that dropped an idle connection, leaves dead connections in the
# pool: a connection that rested longer is pinged, and a dead one is replaced before any
# statement runs. One used lately is trusted: a ping of every connection taken cost a round
# trip in each transaction, and a write transaction holds the process's write lock for its
# round trips (about half a millisecond each under load: docs/benchmarks.md, "Fewer round
# trips to PostgreSQL"). Should it be dead after all (the database restarted within this
# long), its statement fails, the request with it (an agent sends it again), and the pool
# replaces every connection it held before then.
PING_AFTER_REST_S = 2.0
_RESTED_SINCE = "hwnas_rested_since"


def _rests(dbapi_connection, record) -> None:  # noqa: ANN001 - DBAPI objects
    record.info[_RESTED_SINCE] = time.monotonic()


def _ping_if_rested(dbapi_connection, record, proxy) -> None:  # noqa: ANN001 - DBAPI objects
    since = record.info.get(_RESTED_SINCE)
    if since is None or time.monotonic() - since < PING_AFTER_REST_S:
        return  # new, or used lately
    try:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as error:  # the driver's own error: the connection is gone
        raise DisconnectionError(f"a pooled connection failed its ping: {error}") from error
