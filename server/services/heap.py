"""A process's large long-lived state, out of the garbage collector's way.

CPython's full collection walks every object that can hold references, and every request of
the process waits meanwhile. A server's heap grows with its searches (engines, result
tables), and so does each full collection: under 200 agents on 4 searches of a few thousand
results, 130-165 ms, five times in 30 s, a good part of the claims' tail (docs/benchmarks.md,
"Full collections out of the requests' way"); a 100,000-result search holds well over a
million objects, and a read that makes many objects of its own (a /points answer) set off a
full collection of about 0.6 s ("The page's first load at 100,000": a fourth pass).

Two ways out of it, both by `gc.freeze`, which moves objects out of the collector's reach:
- `settle_after`: once a large search has been read in, collect and freeze what the process
  holds;
- `keep_settled` (for a server's life): freeze what the process holds as it starts; then,
  after each full collection of the collector's own, freeze what survived once it is
  `FREEZE_AT` objects or more, so that a full collection walks only what came since.

Frozen objects are still freed when nothing refers to them any more. Only garbage in
reference cycles among them would stay, so a settle first gives the ones frozen before back
to the collector and collects; and under `keep_settled`, once the frozen objects have doubled
since the last walk of them all, they are given back and the collector's next full
collection walks them all (a pause of the old kind, at each doubling of the heap).
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Rows (results, or candidates of an engine) read in at once that make settling worth its
# full collection: 0.6 s at 100,000, against the seconds the reading took.
SETTLE_AT = 10_000
# Survivors of a full collection worth freezing: a full collection walks about this many
# at most between freezes (a few milliseconds); fewer are left to the collector, so that
# the collections stay as rare as the collector makes them.
FREEZE_AT = 50_000
# The frozen objects may grow this many times over between walks of them all: garbage in
# cycles among them is held at most that long.
GROWTH = 2

_lock = threading.Lock()


def _oldest_generation_size() -> int:
    """How many objects the collector's oldest generation holds, counted in C calls alone.

    `len(gc.get_objects(2))` in Python code keeps the list alive over a point where another
    thread may run; the list holds every tracked object, a tuple that `tuple(generator)` is
    still filling among them, and CPython 3.11 refuses to grow a tuple held twice: that
    thread's `tuple()` fails with a SystemError (bench/settled_tuple_race.py). Here the list
    is made, measured and freed inside `map`'s next step, with no Python code in between.
    """
    list_oldest = functools.partial(gc.get_objects, generation=2)
    return next(map(len, iter(list_oldest, None)))


class _Settled:
    """What the collector's callback keeps between full collections (`keep_settled`)."""

    def __init__(self) -> None:
        self.users = 0  # apps of this process keeping the heap settled
        self.walked = 0  # objects frozen after the last full collection that walked them all
        self.frozen = 0  # an upper bound on those frozen now: some were freed since
        self.walk_all = True  # the next full collection walks every object

    def after(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info["generation"] != 2:
            return
        survivors = _oldest_generation_size()
        if self.walk_all:
            self.walk_all = False
            self.walked = self.frozen = survivors
            gc.freeze()
            return
        if survivors < FREEZE_AT:
            return
        self.frozen += survivors
        if self.frozen > GROWTH * self.walked:
            self.frozen = gc.get_freeze_count() + survivors  # the bound, made exact
        if self.frozen > GROWTH * self.walked:
            # Inside a collection `gc.collect` does nothing: the collector's next full
            # collection walks them all instead, and this callback freezes what survives.
            gc.unfreeze()
            self.walk_all = True
            return
        gc.freeze()


_settled = _Settled()


@contextmanager
def keep_settled() -> Iterator[None]:
    """For its duration, keep what survives the collector's full collections frozen
    (module docstring); several apps of one process may share it. At its end, every frozen
    object is given back to the collector."""
    with _lock:
        _settled.users += 1
        if _settled.users == 1:
            # What the process holds as it starts (its modules, the app) is frozen as it is,
            # unwalked: else the first full collection walks it all inside some request, a
            # pause of 60-70 ms at a server's start here (docs/benchmarks.md, "The largest
            # create lets others in between its parts"). Garbage in cycles among it is
            # collected at the first walk of them all.
            gc.freeze()
            _settled.walked = _settled.frozen = gc.get_freeze_count()
            _settled.walk_all = False
            # First: a pause timed by a later callback (bench/gc_trace) includes this one.
            gc.callbacks.insert(0, _settled.after)
    try:
        yield
    finally:
        with _lock:
            _settled.users -= 1
            if _settled.users == 0:
                gc.callbacks.remove(_settled.after)
                gc.unfreeze()


def settle_after(read: int, at_least: int = SETTLE_AT) -> bool:
    """Settle the heap if `read` rows just read in reach `at_least`; whether it did."""
    if read < at_least:
        return False
    with _lock:
        gc.unfreeze()
        _settled.walk_all = True  # for `keep_settled`'s count, when it is on
        gc.collect()
        gc.freeze()
    return True
