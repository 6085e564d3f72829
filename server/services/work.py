"""Claims that wait for work (`claim?wait=`, a long poll): instead of asking again every
second, an idle agent's claim is held open and asked again when a write transaction that
queued jobs commits in this process.

A thousand idle agents polling once a second cost the server a thousand requests a second
while a search waits for its generation's last results (docs/benchmarks.md, "The fleet on 16
cores"). Held open, they cost nothing until there is work, and the first claims to ask again
get it at once instead of a poll interval later. Jobs queued by another server process wake
no one here: once a process has seen others write, its waiting claims also ask again every
second (server.app.agent_path).
"""

from __future__ import annotations

import asyncio
import threading


class WorkSignal:
    """Told by the services when a transaction queues jobs (`queued`), and by the store when
    write transactions end (a `TransactionObserver`); wakes the claims waiting in this
    process once such a transaction commits."""

    def __init__(self) -> None:
        # Set and read inside write transactions, which take turns (`Store.write`).
        self._queued = False
        self._guard = threading.Lock()  # the waiters, from the event loop and worker threads
        self._waiters: dict[asyncio.Event, asyncio.AbstractEventLoop] = {}
        self._closed = False

    def queued(self) -> None:
        """The running write transaction queued jobs: wake the waiting claims if it commits."""
        self._queued = True

    def committed(self) -> None:
        if self._queued:
            self._queued = False
            self.wake()

    def rolled_back(self) -> None:
        self._queued = False

    def wake(self) -> None:
        """Wake every claim waiting now (each asks again; those that find nothing wait on)."""
        with self._guard:
            waiters, self._waiters = self._waiters, {}
        for event, loop in waiters.items():
            try:
                loop.call_soon_threadsafe(event.set)
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

    def waiter(self) -> asyncio.Event:
        """An event set at the next wake, for a claim about to ask (from the event loop):
        registered before it asks, so that work queued while it asks is not missed."""
        event = asyncio.Event()
        with self._guard:
            self._waiters[event] = asyncio.get_running_loop()
        return event

    def forget(self, event: asyncio.Event) -> None:
        with self._guard:
            self._waiters.pop(event, None)

    def waiting(self) -> int:
        with self._guard:
            return len(self._waiters)
