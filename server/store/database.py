"""Opening the database: the SQLAlchemy engine, migrated to the newest schema on open."""

from __future__ import annotations

import sqlite3
import weakref

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

from server.store.schema import check_schema
from server.store.schema import migrate as upgrade


def make_engine(database_url: str, migrate: bool = True) -> Engine:
    """Create the engine and bring the schema up to date (server.store.schema).

    SQLite gets WAL, a busy timeout, and transactions that say up front whether they write:
    a write transaction starts with BEGIN IMMEDIATE, so it waits its turn for the one writer
    (the busy timeout) instead of failing with "database is locked" when a read transaction
    tries to become a write one while another process writes. A connection goes back to the
    pool with its cursors closed (`_close_cursors`).
    """
    is_sqlite = database_url.startswith("sqlite")
    sqlite_args = {"check_same_thread": False, "timeout": 30, "factory": _CursorsKnown}
    engine = create_engine(
        database_url,
        connect_args=sqlite_args if is_sqlite else {},
        pool_pre_ping=not is_sqlite,  # a restarted PostgreSQL leaves dead pooled connections
    )
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        event.listen(engine.pool, "checkin", _close_cursors)
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
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


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
