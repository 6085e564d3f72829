"""Claims that wait for work (`claim?wait=`, a long poll): instead of asking again every
second, an idle agent's claim is held open and asked again when a write transaction that
queued jobs commits.

A thousand idle agents polling once a second cost the server a thousand requests a second
while a search waits for its generation's last results (docs/benchmarks.md, "The fleet on 16
cores"). Held open, they cost nothing until there is work, and the first claims to ask again
get it at once instead of a poll interval later. Jobs queued by another server process are
heard through the store's work channel on PostgreSQL (server.store.work_channel); where there
is none (SQLite), once a process has seen others write, its waiting claims also ask again
every second (server.app.agent_path).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.orm import Session

from server.store.work_channel import WorkChannel


class WorkSignal:
    """Told by the services when a transaction queues jobs (`queued`), and by the store when
    write transactions end (a `TransactionObserver`); wakes the claims waiting in this
    process once such a transaction commits: for each device class as many as it got jobs
    (the longest waiting first), so that one job does not send a thousand idle agents' claims
    to look for it. A claim whose agent's class is not known yet (its first) wakes at every
    commit that queued anything. With a `channel`, the transaction also tells the other
    server processes, and what they queue wakes claims here the same way (`wake`)."""

    def __init__(self) -> None:
        # Jobs queued per device class by the write transaction running in this thread (a
        # class None: not known, which wakes every claim). On PostgreSQL a claim's transaction
        # runs beside others (`Store.write_rows`), each in its own thread.
        self._pending = threading.local()
        self._guard = threading.Lock()  # the waiters, from the event loop and worker threads
        # By device class (None: not known), each in the order the claims began to wait.
        self._waiters: dict[str | None, dict[asyncio.Event, asyncio.AbstractEventLoop]] = {}
        self._closed = False
        self.channel: WorkChannel | None = None  # to and from the other server processes

    def queued(self, device_class: str | None = None, jobs: int = 1) -> None:
        """The running write transaction queued `jobs` jobs for agents of `device_class` (None:
        of any class, or not known): wake that many of its waiting claims if it commits."""
        if jobs > 0:
            pending = self._queued()
            pending[device_class] = pending.get(device_class, 0) + jobs

    def _queued(self) -> dict[str | None, int]:
        pending = getattr(self._pending, "queued", None)
        if pending is None:
            pending = self._pending.queued = {}
        return pending

    def committing(self, session: Session) -> None:
        """The transaction is about to commit: it tells the other processes what it queued."""
        pending = self._queued()
        if pending and self.channel is not None:
            self.channel.send(session, pending)

    def committed(self) -> None:
        queued, self._pending.queued = self._queued(), {}
        if queued:
            self.wake(queued)

    def rolled_back(self) -> None:
        self._pending.queued = {}

    @contextmanager
    def listening(self) -> Iterator[None]:
        """Hear the other processes' jobs through the channel, if any, for the with-block (the
        app's lifespan)."""
        if self.channel is None:
            yield
            return
        self.channel.start()
        try:
            yield
        finally:
            self.channel.stop()

    @property
    def hears_others(self) -> bool:
        """Whether jobs other processes queue wake claims here (the channel listens)."""
        return self.channel is not None and self.channel.listening

    def wake(self, queued: dict[str | None, int] | None = None) -> None:
        """Wake the claims waiting now that jobs `queued` (per device class) may go to: as many
        of a class's as it got, and every claim of a class not known; all of them when
        `queued` is None or has jobs of no known class. (Each asks again; those that find
        nothing wait on.)"""
        with self._guard:
            if queued is None or None in queued:
                woken = [w for waiters in self._waiters.values() for w in waiters.items()]
                self._waiters = {}
            else:
                woken = list(self._waiters.pop(None, {}).items())
                for device_class, jobs in queued.items():
                    waiters = self._waiters.get(device_class, {})
                    for event in list(itertools.islice(waiters, jobs)):
                        woken.append((event, waiters.pop(event)))
        # One call per event loop sets all of its claims' events: they resume in one turn of
        # it, and those woken together ask together (server.app.agent_path).
        by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Event]] = {}
        for event, loop in woken:
            by_loop.setdefault(loop, []).append(event)
        for loop, events in by_loop.items():
            try:
                loop.call_soon_threadsafe(_set_all, events)
            except RuntimeError:  # its loop has closed: the server is going away
                pass

    def close(self) -> None:
        """The server is stopping: the claims waiting now answer at once, and later ones wait
        no more (a server waits for its requests in flight before it stops)."""
        self._closed = True
        self.wake()

    @property
    def closed(self) -> bool:
        return self._closed

    def waiter(self, device_class: str | None = None) -> asyncio.Event:
        """An event set at a wake for this claim, for a claim about to ask (from the event
        loop), whose agent is of `device_class` (None: not known): registered before it asks,
        so that work queued while it asks is not missed."""
        event = asyncio.Event()
        with self._guard:
            self._waiters.setdefault(device_class, {})[event] = asyncio.get_running_loop()
        return event

    def forget(self, event: asyncio.Event) -> None:
        with self._guard:
            for waiters in self._waiters.values():
                if waiters.pop(event, None) is not None:
                    return

    def waiting(self) -> int:
        with self._guard:
            return sum(len(waiters) for waiters in self._waiters.values())


def _set_all(events: list[asyncio.Event]) -> None:
    for event in events:
        event.set()
