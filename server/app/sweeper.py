"""The schedules off the requests' write lock, one task each per server process, started and
stopped with the app:
- the sweep requeues expired leases (server.services.leases.requeue_stale), tells searches
  the results left waiting (server.services.arrivals.settle_waiting) and keeps the result
  tables of searches near their end built (server.services.remeasure.keep_tables_ready);
  several processes sharing a database each run one; the requeue is a conditional update
  and a settle locks its search, so whichever comes first does it;
- the checkpoint copies SQLite's write-ahead log into the database (`Store.checkpoint`), so
  that no commit waits for it; a process's checkpoint that finds another's under way
  leaves it to that one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from functools import partial

from anyio import to_thread

from server.services.arrivals import settle_waiting
from server.services.context import Services
from server.services.leases import requeue_stale, sweep_interval
from server.services.remeasure import keep_tables_ready

log = logging.getLogger("hwnas.leases")


async def _every(
    interval: float, stop: asyncio.Event, passes: list[Callable[[], object]], what: str
) -> None:
    """Every `interval` until `stop` is set, run `passes` in turn, each in a worker thread (a
    pass is a blocking database transaction); a failed round (the database away) is logged
    and the next one tries again."""
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
        if stop.is_set():
            return
        try:
            for run in passes:
                await to_thread.run_sync(run)
        except Exception:
            log.exception("%s failed; trying again in %.1f s", what, interval)


async def requeue_on_schedule(services: Services, stop: asyncio.Event) -> None:
    """Every sweep interval until `stop` is set, requeue what expired, settle what waits and
    build the tables re-measurements will need."""
    passes = [
        partial(requeue_stale, services.store, services.work),
        partial(settle_waiting, services),
        partial(keep_tables_ready, services),
    ]
    await _every(sweep_interval(services.store.settings), stop, passes, "the sweep")


# How often the write-ahead log is copied into the database: each checkpoint has at most this
# long's writes to copy, and the log stays below the length at which a commit would
# checkpoint itself (server.store.database.AUTOCHECKPOINT_PAGES): the largest generation's
# parts added up to about 5,000 pages in a quarter second, and its log's file reached 28,000-
# 36,000 pages; with a checkpoint a second, 40,000 (docs/benchmarks.md, "A log that starts
# again").
CHECKPOINT_S = 0.25


async def checkpoint_on_schedule(services: Services, stop: asyncio.Event) -> None:
    """Every CHECKPOINT_S until `stop` is set, a checkpoint."""
    await _every(CHECKPOINT_S, stop, [services.store.checkpoint], "the checkpoint")


@contextlib.asynccontextmanager
async def lease_schedule(services: Services) -> AsyncIterator[None]:
    """Run the schedules for the with-block (the app's lifespan). On exit a pass under way
    finishes first, so the store closes after it: the tasks are told to stop, not cancelled,
    because cancelling leaves the pass's thread running (and holding a pooled connection)."""
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(requeue_on_schedule(services, stop), name="requeue-expired-leases")
    ]
    if services.store.db.dialect.name == "sqlite":  # PostgreSQL checkpoints by itself
        tasks.append(
            asyncio.create_task(checkpoint_on_schedule(services, stop), name="checkpoint-the-log")
        )
    try:
        yield
    finally:
        stop.set()
        for task in tasks:
            await task
