"""Keeping a claimed job: lease heartbeats from a background thread, and retry delays."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx

from agent.client import AgentClient, ApiError
from archvocab.wire import LeaseRef


class Backoff:
    """Exponential delays: initial, times factor each time, capped; reset after a success."""

    def __init__(self, initial: float = 0.5, factor: float = 2.0, cap: float = 10.0) -> None:
        self.initial, self.factor, self.cap = initial, factor, cap
        self._next = initial

    def next(self) -> float:
        delay, self._next = self._next, min(self.cap, self._next * self.factor)
        return delay

    def reset(self) -> None:
        self._next = self.initial

    def fresh(self) -> Backoff:
        """A new sequence with the same shape."""
        return Backoff(self.initial, self.factor, self.cap)


class AnyEvent:
    """Looks like a threading.Event to whoever polls it: set when any of its events is set."""

    def __init__(self, *events: threading.Event) -> None:
        self.events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


class Heartbeats(threading.Thread):
    """Renews one lease every `interval` s until `finish()`.

    A refusal (409/404) sets `lost` and stops; connection errors and unexpected answers are
    passed to `on_trouble` and the next beat is tried anyway, since the lease may outlive a
    short outage. `cancel` is set when the lease is lost or `abort` is set.
    """

    def __init__(
        self,
        client: AgentClient,
        job_id: int,
        ref: LeaseRef,
        interval: float,
        *,
        abort: threading.Event,
        on_beat: Callable[[], None],
        on_trouble: Callable[[Exception], None],
    ) -> None:
        super().__init__(name=f"heartbeat-{job_id}", daemon=True)
        self.client, self.job_id, self.ref, self.interval = client, job_id, ref, interval
        self.on_beat, self.on_trouble = on_beat, on_trouble
        self.lost = threading.Event()
        self.cancel = AnyEvent(abort, self.lost)
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.interval):
            try:
                alive = self.client.heartbeat(self.job_id, self.ref)
            except (httpx.TransportError, ApiError) as exc:
                self.on_trouble(exc)
                continue
            if not alive:
                self.lost.set()
                return
            self.on_beat()

    def finish(self) -> None:
        """Stop beating and wait for an in-flight beat to end."""
        self._done.set()
        self.join()
