"""A process's large long-lived state, out of the garbage collector's way.

CPython's full collection walks every object that can hold references. A process holding a
100,000-result search (its result table, its engine) holds well over a million, and a read
that makes many objects of its own (a /points answer) set off a full collection of about
0.6 s on most such reads (docs/benchmarks.md, "The page's first load at 100,000": a fourth
pass). Once a large search has been read in, `settle_after` moves what the process holds out of
the collector's reach (`gc.freeze`); full collections then walk only what came later.

Frozen objects are still freed when nothing refers to them any more. Only garbage in
reference cycles among them would stay, so each settle first gives the ones frozen before
back to the collector and collects.
"""

from __future__ import annotations

import gc
import threading

# Rows (results, or candidates of an engine) read in at once that make settling worth its
# full collection: 0.6 s at 100,000, against the seconds the reading took.
SETTLE_AT = 10_000

_lock = threading.Lock()


def settle_after(read: int, at_least: int = SETTLE_AT) -> bool:
    """Settle the heap if `read` rows just read in reach `at_least`; whether it did."""
    if read < at_least:
        return False
    with _lock:
        gc.unfreeze()
        gc.collect()
        gc.freeze()
    return True
