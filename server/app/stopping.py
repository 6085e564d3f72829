"""A stop signal answers the claims that wait for work before the server waits for its requests.

On SIGTERM or SIGINT uvicorn stops accepting connections and then waits for the requests in
flight; only after them does it tell the app (the lifespan's shutdown). A claim may wait up to
`MAX_CLAIM_WAIT_S` for work (server.app.agent_path), so a server with idle agents would take
that long to stop. The process's handlers for the two signals, uvicorn's, are wrapped for the
app's life: the signal first closes the work signal (server.services.work), which answers the
waiting claims "no work" at once, then goes on to the handler it replaced.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from server.services.work import WorkSignal

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def claims_answered_on_stop(work: WorkSignal) -> Iterator[None]:
    """For the block, SIGINT and SIGTERM close `work` before their previous handlers run.
    Only the main thread may set handlers: elsewhere (an app served by a test client) the
    block changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}

    def handle(signum: int, frame: FrameType | None) -> None:
        # From a thread: the handler runs on the event loop's thread, which may be inside
        # `work`'s lock (a claim starting or ending its wait) at this moment.
        threading.Thread(target=work.close, name="claims-answered-on-stop", daemon=True).start()
        before = previous[signum]
        if callable(before):
            before(signum, frame)
        elif before == signal.SIG_DFL:  # nobody handled it: it ends the process, as it would
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    for sig in _SIGNALS:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, before in previous.items():
            if signal.getsignal(sig) is handle:
                signal.signal(sig, before)
