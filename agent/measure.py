"""Measure a candidate in a fresh child process, with a timeout and typed failures.

The entry point the worker uses. No HTTP and no torch in this process: the spec is checked
here, then built and timed by ``python -m agent.child`` (see `agent.in_process`), so that
each candidate's memory high-water mark is its own and a crash or an OOM kill takes down only
the child.

Failure kinds: invalid_spec (the spec or its settings do not validate; found before spawning),
out_of_memory (MemoryError or an "out of memory" RuntimeError in the child, or the child
SIGKILLed by someone other than us: the OOM killer), timeout (no result within
settings.timeout_s; the child is killed), error (anything else).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import ValidationError

from agent.failures import classify_exception, parse_job_spec, short
from archvocab.errors import InvalidSpec
from archvocab.wire import Failure, MeasurementResult, MeasurementSettings

logger = logging.getLogger(__name__)

CHILD_COMMAND = (sys.executable, "-m", "agent.child")
_POLL_S = 0.1


class CancelFlag(Protocol):
    """What `measure_candidate` polls to learn it should stop (a threading.Event will do)."""

    def is_set(self) -> bool: ...


class MeasurementCancelled(Exception):
    """The caller's cancel event was set; the child was killed and nothing was measured."""


def measure_candidate(
    spec: Mapping[str, Any],
    settings: MeasurementSettings,
    *,
    cancel: CancelFlag | None = None,
) -> MeasurementResult | Failure:
    """Build and measure `spec` in a child process; a MeasurementResult or a typed Failure.

    Raises MeasurementCancelled if `cancel` is set before the child finishes.
    """
    try:
        parse_job_spec(spec, settings)
    except (InvalidSpec, ValidationError) as exc:
        return classify_exception(exc)
    payload = json.dumps({"spec": dict(spec), "settings": settings.model_dump(mode="json")})
    try:
        proc = subprocess.Popen(
            CHILD_COMMAND,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_child_env(settings),
            start_new_session=True,  # a Ctrl-C meant for the agent must not kill the child
        )
    except OSError as exc:
        return Failure(kind="error", message=short(f"could not start the measuring process: {exc}"))
    with proc:
        status, out, err = _wait(proc, payload, settings.timeout_s, cancel)
    if err.strip():
        logger.debug("measuring process stderr:\n%s", err[-4000:])
    if status == "cancelled":
        raise MeasurementCancelled("measurement cancelled; child killed")
    if status == "timeout":
        return Failure(
            kind="timeout", message=f"no result within timeout_s={settings.timeout_s:g}; killed"
        )
    return _outcome(proc.returncode, out, err)


def _child_env(settings: MeasurementSettings) -> dict[str, str]:
    env = dict(os.environ)
    # Thread pools sized at import time follow the job's thread count, not the machine's.
    env["OMP_NUM_THREADS"] = str(settings.threads)
    return env


def _wait(
    proc: subprocess.Popen[str], payload: str, timeout_s: float, cancel: CancelFlag | None
) -> tuple[str, str, str]:
    """('done' | 'timeout' | 'cancelled', stdout, stderr); the child is reaped in every case."""
    deadline = time.monotonic() + timeout_s
    pending: str | None = payload
    while True:
        try:
            out, err = proc.communicate(pending, timeout=_POLL_S)
            return "done", out, err
        except subprocess.TimeoutExpired:
            pending = None  # the payload went with the first call
        if cancel is not None and cancel.is_set():
            status = "cancelled"
        elif time.monotonic() >= deadline:
            status = "timeout"
        else:
            continue
        proc.kill()
        out, err = proc.communicate()
        return status, out, err


def _outcome(returncode: int, out: str, err: str) -> MeasurementResult | Failure:
    lines = out.strip().splitlines()
    if lines:
        try:
            data = json.loads(lines[-1])
            if "measurement" in data:
                return MeasurementResult.model_validate(data["measurement"])
            return Failure.model_validate(data["failure"])
        except (ValueError, KeyError, TypeError) as exc:
            return Failure(kind="error", message=short(f"unreadable result from child: {exc}"))
    tail = short(err.strip()[-400:], 400)
    if returncode == -getattr(signal, "SIGKILL", 9):
        return Failure(
            kind="out_of_memory",
            message=f"measuring process was killed by SIGKILL (likely the OOM killer). {tail}",
        )
    if returncode < 0:
        return Failure(
            kind="error", message=f"measuring process died from {_signal_name(-returncode)}. {tail}"
        )
    return Failure(
        kind="error",
        message=f"measuring process exited with status {returncode} without a result. {tail}",
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
