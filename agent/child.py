"""Child process that measures one candidate: ``python -m agent.child``.

Protocol: one JSON object ``{"spec": {...}, "settings": {...}}`` on stdin; exactly one JSON
line on stdout, ``{"measurement": {...}}`` or ``{"failure": {"kind": ..., "message": ...}}``.
Anything libraries print goes to stderr, so stdout carries only that line. A fresh process
per candidate makes the CPU memory high-water mark this candidate's alone.

The spec is parsed as declarative data by archvocab and built by `archvocab.build`; nothing
the server sends is executed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

from agent.failures import classify_exception, parse_job_spec
from archvocab.wire import MeasurementSettings

# TEST HOOK, not a feature: tests set this to make the child fail in a chosen way, so that the
# parent's handling of each failure kind can be exercised with a real process. Read here only.
FAULT_ENV = "HWNAS_AGENT_FAULT"
_WATCHDOG_GRACE_S = 30.0


def _inject_fault() -> None:
    fault = os.environ.get(FAULT_ENV, "")
    if fault == "oom":
        raise MemoryError(f"injected by {FAULT_ENV}=oom")
    if fault == "oom_kill":  # what the kernel's OOM killer does
        os.kill(os.getpid(), signal.SIGKILL)
    if fault == "crash":  # dies without writing a result
        os._exit(70)
    if fault == "error":
        raise RuntimeError(f"injected by {FAULT_ENV}=error")
    if fault == "hang":
        time.sleep(3600)


def _watchdog(timeout_s: float) -> None:
    """Exit if the parent goes away or the job overruns its timeout well past the parent's kill."""
    parent, deadline = os.getppid(), time.monotonic() + timeout_s + _WATCHDOG_GRACE_S

    def watch() -> None:
        while os.getppid() == parent and time.monotonic() < deadline:
            time.sleep(1.0)
        os._exit(75)

    threading.Thread(target=watch, name="watchdog", daemon=True).start()


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Measure one job; the outcome as the JSON-ready dict the parent expects."""
    try:
        settings = MeasurementSettings.model_validate(job["settings"])
        _watchdog(settings.timeout_s)
        spec = parse_job_spec(job["spec"], settings)
        from agent.in_process import measure_spec  # torch is imported after the watchdog runs

        _inject_fault()
        return {"measurement": measure_spec(spec, settings).model_dump(mode="json")}
    except Exception as exc:  # every failure is reported, typed, to the parent
        return {"failure": classify_exception(exc).model_dump(mode="json")}


def main() -> int:
    result_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints, also from C, go to stderr
    try:
        job = json.loads(sys.stdin.read())
        outcome = run_job(job)
    except Exception as exc:  # unreadable job
        outcome = {"failure": classify_exception(exc).model_dump(mode="json")}
    with result_out:
        result_out.write(json.dumps(outcome) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
