"""How long a thread running Python keeps the interpreter while another thread waits for it,
made short while a thread computes at length beside the requests.

CPython lets a waiting thread in after the holder has run its switch interval, 5 ms by
default. A request served beside a thread that breeds a generation of 20,000 outside the
write lock waits that long at each of its many returns from the database or the socket:
registrations waited 104-179 ms, against 14-23 ms with turns of 0.5 ms (docs/benchmarks.md,
"Generations off the result's transaction"). Short turns cost every thread more switches, so
they are taken only meanwhile.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# A turn: short enough that a request waiting behind a computing thread waits a few of them at
# each step, long enough that handing over stays a small share of the computing.
TURN_S = 0.0005


class _Turns:
    """The threads inside `short_turns` (counted: the interval is the process's), and the
    interval before the first came in."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside = 0
        self.before = sys.getswitchinterval()


_turns = _Turns()


@contextmanager
def short_turns() -> Iterator[None]:
    """Threads take turns of `TURN_S` for the with-block, and of the interval before once no
    thread is inside one any more."""
    with _turns.lock:
        if _turns.inside == 0:
            _turns.before = sys.getswitchinterval()
            sys.setswitchinterval(TURN_S)
        _turns.inside += 1
    try:
        yield
    finally:
        with _turns.lock:
            _turns.inside -= 1
            if _turns.inside == 0:
                sys.setswitchinterval(_turns.before)
