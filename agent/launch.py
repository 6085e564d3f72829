"""Run one job in a fresh process and wait for its answer, a deadline, or a cancel.

Two ways to get a fresh process:

- `run_forked`: forked from a multiprocessing forkserver that has torch and the model builder
  loaded (`agent.preload`). Each candidate still gets its own process (its own memory
  high-water mark; a crash or an OOM kill takes only it), but it starts in milliseconds
  instead of paying 1-4 s of interpreter start and torch import. The agent's own process
  never imports torch: the forkserver is a separate interpreter.
- `run_subprocess`: ``python -m agent.child``, for steps that must not have torch loaded.

Either way the process is killed at the deadline or on cancel, and always reaped.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing import spawn
from multiprocessing.connection import Connection, wait
from multiprocessing.context import BaseContext
from typing import Any, Protocol

from agent.child import forked_main

# "__main__" too: the server imports the main script once, so children need not (multiprocessing
# re-imports it in each child otherwise, as "__mp_main__"). CPython 3.11's forkserver drops the
# main script's path on the way (it filters for a key get_preparation_data never sets), so
# agent.preload imports it from MAIN_PATH_ENV instead: a script importing scipy cost every
# candidate 0.5 s of process start without this.
PRELOAD = ["__main__", "agent.preload"]
MAIN_PATH_ENV = "HWNAS_FORKSERVER_MAIN"
CHILD_COMMAND = (sys.executable, "-m", "agent.child")
_POLL_S = 0.1
_LOG_TAIL = 2000


class CancelFlag(Protocol):
    """What the wait polls to learn it should stop (a threading.Event will do)."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class Ended:
    """How a measuring process ended."""

    status: str  # "done", "timeout" (killed at the deadline) or "cancelled" (killed)
    answer: dict[str, Any] | None  # what it sent, None if nothing (readable) came
    returncode: int | None  # negative: killed by that signal
    log_tail: str  # the end of what it wrote to stdout/stderr
    unreadable: str | None = None  # why the answer could not be read


def _context() -> BaseContext:
    """The forkserver context, its server preloading torch (spawn where there is no fork)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)  # takes effect when the server starts
    main_path = spawn.get_preparation_data("hwnas").get("init_main_from_path")
    if main_path:  # read by the forkserver when it starts (agent.preload)
        os.environ[MAIN_PATH_ENV] = main_path
    return context


def start_forkserver() -> None:
    """Start the forkserver now (it imports torch: seconds) instead of at the first job.

    Returns at once: the server imports its preload in the background, and the first process
    forked from it waits for that (`warm_forkserver` waits for it instead)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        _context()
        from multiprocessing import forkserver

        forkserver.ensure_running()


def warm_forkserver() -> float:
    """Start the forkserver and wait until it has imported its preload (torch: seconds), by
    forking one process that does nothing; the seconds that took. Meant for a background
    thread at the agent's start, so that the first job's process starts as fast as any."""
    started = time.monotonic()
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return 0.0  # spawn: every process imports torch itself; nothing to warm
    process = _context().Process(target=os.getpid, name="hwnas-warm-up")  # a no-op
    _start(process)
    process.join()
    return time.monotonic() - started


def _job_message(job: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
    return {**job, "timeout_s": timeout_s, "agent_pid": os.getpid(), "sent_at": time.time()}


def run_forked(job: Mapping[str, Any], deadline: float, cancel: CancelFlag | None) -> Ended:
    """Run `job` in a process forked from the forkserver (see `agent.child.forked_main`)."""
    context = _context()
    with tempfile.NamedTemporaryFile(prefix="hwnas-child-", suffix=".log") as log:
        reader, writer = context.Pipe(duplex=False)
        message = _job_message(job, max(0.0, deadline - time.monotonic()))
        process = context.Process(
            target=forked_main, args=(message, writer, log.name), name="hwnas-measure"
        )
        try:
            _start(process)
        except BaseException:
            reader.close()
            writer.close()
            raise
        writer.close()  # the child holds the only writer: EOF tells us it is gone
        try:
            status, answer, unreadable = _wait_forked(process, reader, deadline, cancel)
        finally:
            reader.close()
            process.join()
        tail = _tail(log.name)
    return Ended(status, answer, process.exitcode, tail, unreadable)


def _start(process: Any) -> None:
    """Start `process`; if the forkserver cannot be reached, start a fresh one and retry once.

    The server listens on a socket file under /tmp/pymp-*: a tmp cleaner removing it would
    otherwise fail every later job of a long-running agent. (A server that died is restarted
    by multiprocessing itself.)
    """
    try:
        process.start()
    except OSError:
        if not _restart_forkserver():
            raise
        process.start()


def _restart_forkserver() -> bool:
    from multiprocessing import forkserver, util

    server = getattr(forkserver, "_forkserver", None)  # the stdlib has no public restart
    if server is None or not hasattr(server, "_stop"):
        return False
    with contextlib.suppress(OSError):
        server._stop()  # closes the alive pipe (the server exits), then unlinks the socket
    server._forkserver_address = None
    os.makedirs(util.get_temp_dir(), exist_ok=True)  # the cleaner may have taken the dir too
    return True


def _wait_forked(
    process: Any, reader: Connection, deadline: float, cancel: CancelFlag | None
) -> tuple[str, dict[str, Any] | None, str | None]:
    answer: dict[str, Any] | None = None
    unreadable: str | None = None
    open_ = True
    while True:
        if answer is None and open_:
            waiting = [reader, process.sentinel]
        else:
            waiting = [process.sentinel]
        ready = wait(waiting, timeout=_POLL_S)
        if reader in ready:
            try:
                answer, unreadable = _decode(reader.recv_bytes())
            except (EOFError, OSError):
                open_ = False  # exited, or about to, without an answer
        exited = process.sentinel in ready
        if exited and (answer is not None or not open_ or not reader.poll(0)):
            return "done", answer, unreadable
        status = _stop_reason(deadline, cancel)
        if status:
            process.kill()
            if status == "timeout" and answer is not None:
                return "done", answer, unreadable  # answered in time, slow to exit
            return status, answer, unreadable


def _decode(raw: bytes | str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        answer = json.loads(raw)
    except ValueError as exc:
        return None, f"unreadable answer: {exc}"
    if not isinstance(answer, dict):
        return None, f"unreadable answer: expected a JSON object, got {type(answer).__name__}"
    return answer, None


def _stop_reason(deadline: float, cancel: CancelFlag | None) -> str | None:
    if cancel is not None and cancel.is_set():
        return "cancelled"
    if time.monotonic() >= deadline:
        return "timeout"
    return None


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(max(0, os.path.getsize(path) - _LOG_TAIL))
            return log.read().decode(errors="replace")
    except OSError:
        return ""


def run_subprocess(
    job: Mapping[str, Any],
    deadline: float,
    cancel: CancelFlag | None,
    env: Mapping[str, str] | None = None,
) -> Ended:
    """Run `job` in ``python -m agent.child``: a fresh interpreter with nothing preloaded."""
    payload = json.dumps(_job_message(job, max(0.0, deadline - time.monotonic())))
    proc = subprocess.Popen(
        CHILD_COMMAND,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env) if env is not None else None,
        start_new_session=True,  # a Ctrl-C meant for the agent must not kill the child
    )
    with proc:
        status, out, err = _wait_subprocess(proc, payload, deadline, cancel)
    answer, unreadable = None, None
    lines = out.strip().splitlines()
    if lines:
        answer, unreadable = _decode(lines[-1])
    return Ended(status, answer, proc.returncode, err[-_LOG_TAIL:], unreadable)


def _wait_subprocess(
    proc: subprocess.Popen[str], payload: str, deadline: float, cancel: CancelFlag | None
) -> tuple[str, str, str]:
    """('done' | 'timeout' | 'cancelled', stdout, stderr); the child is reaped in every case."""
    pending: str | None = payload
    while True:
        try:
            out, err = proc.communicate(pending, timeout=_POLL_S)
            return "done", out, err
        except subprocess.TimeoutExpired:
            pending = None  # the payload went with the first call
        status = _stop_reason(deadline, cancel)
        if status:
            proc.kill()
            out, err = proc.communicate()
            return status, out, err
