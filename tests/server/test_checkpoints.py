"""SQLite's write-ahead log is copied into the database on the server's schedule
(server.app.sweeper, `Store.checkpoint`), not by the commit that finds it long: that commit
held the process's write lock while it waited (server.store.database.AUTOCHECKPOINT_PAGES)."""

from __future__ import annotations

import os
import sqlite3
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from server.app.factory import create_app
from server.settings import Settings
from server.store import store as store_module
from server.store.database import RESTART_AT_PAGES
from server.store.store import Store

PAGE = 4096
# More pages than a commit of SQLite's default setting lets the log hold (1,000), one row each.
PAGES = 1_500


def _create(store: Store) -> None:
    with store.write() as session:
        session.execute(text("CREATE TABLE filler (x BLOB)"))


def _fill(store: Store, pages: int = PAGES, per_commit: int = 250) -> None:
    """`pages` pages of rows into the table `_create` made."""
    for _ in range(pages // per_commit):
        with store.write() as session:
            session.execute(
                text("INSERT INTO filler (x) VALUES (randomblob(3500))"), [{}] * per_commit
            )


def _log_frames(path) -> int:
    """Frames in the log now (a passive checkpoint reports them)."""
    with sqlite3.connect(path) as connection:
        _busy, frames, _copied = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return frames


def test_a_commit_leaves_the_log_to_be_checkpointed_on_the_schedule(tmp_path):
    path = tmp_path / "c.db"
    store = Store(Settings(database_url=f"sqlite:///{path}", auth=False))
    try:
        _create(store)
        _fill(store)
        # A commit that checkpointed the log would have started it again after the copy.
        assert _log_frames(path) >= PAGES
    finally:
        store.close()


def test_a_running_server_copies_the_log_into_the_database(tmp_path):
    path = tmp_path / "s.db"
    app = create_app(Settings(database_url=f"sqlite:///{path}", auth=False))
    with TestClient(app):
        before = os.path.getsize(path)
        _create(app.state.store)
        _fill(app.state.store)
        deadline = time.monotonic() + 10
        # Pages reach the database file only by a checkpoint, and every one of the log's.
        while os.path.getsize(path) < before + PAGES * PAGE:
            assert time.monotonic() < deadline, "the log was not copied within 10 s"
            time.sleep(0.05)


@pytest.mark.parametrize("pages", [RESTART_AT_PAGES + 500, PAGES])
def test_a_long_log_copied_short_beside_others_is_finished_so_that_it_starts_again(
    tmp_path, monkeypatch, pages
):
    """The schedule's copy runs beside other connections: one that still reads from the log
    (or writes to it) as the copy runs leaves part of it uncopied, and a log never copied
    whole never starts again; it grows until a commit checkpoints it under the write lock.
    A long log is finished under the write lock; a short one is left to the next copies."""
    path = tmp_path / "r.db"
    store = Store(Settings(database_url=f"sqlite:///{path}", auth=False))
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        _create(store)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM filler").fetchone()  # the log as it was
        _fill(store, pages)
        copy = store_module.checkpoint
        left_short: list[bool] = []

        def copy_beside_a_reader(engine) -> bool:  # noqa: ANN001 - an Engine
            short = copy(engine)
            left_short.append(short)
            if reader.in_transaction:
                reader.execute("COMMIT")  # the reader is done once the copy has run
            return short

        monkeypatch.setattr(store_module, "checkpoint", copy_beside_a_reader)
        store.checkpoint()
        with store.write() as session:
            session.execute(text("INSERT INTO filler (x) VALUES (randomblob(10))"))
        if pages >= RESTART_AT_PAGES:
            assert left_short == [True, False]  # short beside the reader, then finished
            assert _log_frames(path) < 10  # the next writer started the log again
        else:
            assert left_short == [False]  # left to the next copies
            assert _log_frames(path) >= pages
    finally:
        reader.close()
        store.close()
