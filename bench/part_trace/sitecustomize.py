"""A served process's round parts timed step by step (bench.create_blocking --part-trace).

On PYTHONPATH, Python imports this at start. Where HWNAS_PART_TRACE names a folder, every
write transaction that writes a part of a proposal round (`server.services.searches.advance`
with `in_parts`) is appended to `<folder>/parts-<pid>.log` as a JSON line: when it asked for
the write lock (unix s), how long it waited for it and held it (ms), and the steps inside
(ms): the search's row read and locked, the measurement cache's lookups, the rest of
`enqueue` (the inserts), the commit and the driver's COMMIT within it; and on SQLite the
write-ahead log's length after it (pages). Full and middle collections (`what`: gc1, gc2) and
the server's checkpoints (`what`: checkpoint), each with its start and length, go to the
same log, to be laid beside the parts. Other writes are not timed. It wraps the functions
by name once the server's modules are imported: any version of the server that has them
can be traced, the commit before a change included.
"""

import gc
import json
import os
import sqlite3
import sys
import threading
import time
from contextlib import contextmanager

_folder = os.environ.get("HWNAS_PART_TRACE")
_MODULES = ("server.services.searches", "server.store.proposals", "server.store.store")


def _start() -> None:
    log = open(os.path.join(_folder, f"parts-{os.getpid()}.log"), "a", buffering=1)  # noqa: SIM115 - for the process's life
    writing = threading.Lock()

    def record(entry: dict) -> None:
        line = json.dumps(entry) + "\n"
        with writing:
            log.write(line)

    began = [0.0]

    def collected(phase: str, info: dict) -> None:
        if info["generation"] < 1:
            return
        if phase == "start":
            began[0] = time.time()
        else:
            ms = (time.time() - began[0]) * 1000
            record({"what": f"gc{info['generation']}", "began": began[0], "ms": ms})

    gc.callbacks.insert(0, collected)
    threading.Thread(target=_patch_when_imported, args=(record,), daemon=True).start()


def _patch_when_imported(record) -> None:  # noqa: ANN001 - the log's writer
    while not all(
        name in sys.modules and hasattr(sys.modules[name], attr)
        for name, attr in zip(_MODULES, ("write_round", "enqueue", "Store"), strict=True)
    ):
        time.sleep(0.01)
    searches, proposals, store = (sys.modules[name] for name in _MODULES)
    import sqlalchemy.orm.session as orm_session

    steps = threading.local()

    def timed(owner, name: str, step: str) -> None:  # noqa: ANN001 - a module or class
        inner = getattr(owner, name)

        def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                taken = getattr(steps, "taken", None)
                if taken is not None:
                    taken[step] = taken.get(step, 0.0) + (time.perf_counter() - start) * 1000

        setattr(owner, name, wrapper)

    timed(searches, "get_search", "search_row")
    timed(proposals, "find_cached", "lookup")
    timed(searches, "enqueue", "enqueue")
    timed(orm_session.SessionTransaction, "commit", "commit")
    _trace_driver_commit(steps)

    advance = searches.advance

    def traced_advance(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if kwargs.get("in_parts") and getattr(steps, "taken", None) is not None:
            steps.taken["part"] = 1.0
        return advance(*args, **kwargs)

    searches.advance = traced_advance

    write = store.Store.write

    @contextmanager
    def traced_write(self):  # noqa: ANN001, ANN202
        if getattr(steps, "taken", None) is not None:  # within another: not timed apart
            with write(self) as session:
                yield session
            return
        asked, start = time.time(), time.perf_counter()
        steps.taken = {}
        try:
            with write(self) as session:
                held = time.perf_counter()
                yield session
            ended = time.perf_counter()
        finally:
            taken, steps.taken = steps.taken, None
        if taken.pop("part", None):
            taken["insert"] = taken.pop("enqueue", 0.0) - taken.get("lookup", 0.0)
            log_pages = taken.pop("log_pages", None)
            record(
                {
                    "part": asked,
                    "wait_ms": (held - start) * 1000,
                    "held_ms": (ended - held) * 1000,
                    **{f"{step}_ms": ms for step, ms in taken.items()},
                    **({} if log_pages is None else {"log_pages": log_pages}),
                }
            )

    store.Store.write = traced_write

    checkpoint = store.checkpoint

    def traced_checkpoint(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        start = time.time()
        try:
            return checkpoint(*args, **kwargs)
        finally:
            record({"what": "checkpoint", "began": start, "ms": (time.time() - start) * 1000})

    store.checkpoint = traced_checkpoint


def _trace_driver_commit(steps: threading.local) -> None:
    """Time the driver's own COMMIT within a part's commit (`driver_commit`), and note the
    length of SQLite's write-ahead log after it (`log_pages`, of 4 KiB and a frame header
    each): a commit that finds the log long checkpoints it itself."""
    from sqlalchemy.engine.default import DefaultDialect

    inner = DefaultDialect.do_commit
    logs: dict[int, str | None] = {}  # a driver connection's log file (None: no file)

    def log_of(dbapi_connection) -> str | None:  # noqa: ANN001 - a DBAPI connection
        # SQLAlchemy hands the driver's connection in its pool's wrapper
        driver = getattr(dbapi_connection, "driver_connection", dbapi_connection)
        key = id(driver)
        if key not in logs:
            path = None
            if isinstance(driver, sqlite3.Connection):
                rows = driver.execute("PRAGMA database_list").fetchall()
                path = next((f"{file}-wal" for _, name, file in rows if name == "main"), None)
            logs[key] = path or None
        return logs[key]

    def do_commit(self, dbapi_connection):  # noqa: ANN001, ANN202
        taken = getattr(steps, "taken", None)
        start = time.perf_counter()
        try:
            return inner(self, dbapi_connection)
        finally:
            if taken is not None:
                taken["driver_commit"] = (time.perf_counter() - start) * 1000
                log = log_of(dbapi_connection)
                if log is not None and os.path.exists(log):
                    taken["log_pages"] = os.path.getsize(log) // 4120

    DefaultDialect.do_commit = do_commit


if _folder:
    _start()
