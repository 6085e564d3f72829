"""How long a thread running Python keeps the interpreter while another thread waits for it.

CPython lets a waiting thread in after the holder has run its switch interval, 5 ms by
default. A request served beside a thread that computes (a proposal round breeding a
generation of 20,000 outside the write lock, a result table rebuilt) waits that long at each of
its many returns from the database or the socket: registrations waited 60-180 ms while a
generation was bred, against 13-19 ms with turns of 0.25-0.5 ms (docs/benchmarks.md,
"Generations off the result's transaction").
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

# A turn: short enough that a request waiting behind a computing thread waits a few of them at
# each step, long enough that handing over stays a small share of the computing.
TURN_S = 0.0005


@contextmanager
def short_turns() -> Iterator[None]:
    """Threads take turns of `TURN_S` for the with-block (a server's life); the interval
    before is restored after it."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(TURN_S)
    try:
        yield
    finally:
        sys.setswitchinterval(before)
