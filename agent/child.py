"""What a measuring process runs: one job, answered with one JSON-ready dict.

A job is ``{"step": ..., "spec": {...}, "settings": {...}, ...}``; steps:

- ``torch``: build and measure with eager PyTorch (`agent.in_process`);
- ``export_onnx``: build and export to ``job["path"]`` (`agent.onnx_backend.export_onnx`);
- ``measure_onnx``: time the exported file with ONNX Runtime (`agent.onnx_backend.measure_onnx`),
  in a process that never imported torch, so ORT's memory high-water mark is its own.

The answer is ``{"measurement": {...}}``, ``{"exported": {"build_s": ...}}`` or
``{"failure": {"kind": ..., "message": ...}}``. Two ways in: `forked_main`, the target of a
process forked from the agent's forkserver (torch already loaded), and ``python -m
agent.child`` (job on stdin, answer as one line on stdout) for the torch-free ORT step.

This module does not import torch: the step's own module brings it. The spec is parsed as
declarative data by archvocab and built by its kind's builder (`archvocab.spaces.<kind>.build`);
nothing the server sends is executed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from agent.failures import classify_exception, parse_job_spec
from archvocab.wire import MeasurementSettings, ProxyRequest

# TEST HOOK, not a feature: tests set this in the agent's environment to make the measuring
# process fail in a chosen way. The agent reads it and sends it with the job: a forked child
# sees the forkserver's environment from when that started, not the agent's current one.
FAULT_ENV = "HWNAS_AGENT_FAULT"
FAULTS = ("oom", "oom_kill", "crash", "error", "hang")
_WATCHDOG_GRACE_S = 30.0


def inject_fault(fault: str | None) -> None:
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


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else: not ours any more, but alive
        return True
    return True


def start_watchdog(timeout_s: float, agent_pid: int | None) -> None:
    """Exit if the agent (or our parent) goes away, or the job overruns well past its kill."""
    parent, deadline = os.getppid(), time.monotonic() + timeout_s + _WATCHDOG_GRACE_S

    def watch() -> None:
        while os.getppid() == parent and _alive(agent_pid) and time.monotonic() < deadline:
            time.sleep(1.0)
        os._exit(75)

    threading.Thread(target=watch, name="watchdog", daemon=True).start()


def _step(job: dict[str, Any], settings: MeasurementSettings, started: float) -> dict[str, Any]:
    step = job.get("step", "torch")
    spec = parse_job_spec(job["spec"], settings)
    if step == "torch":
        from agent.in_process import measure_spec  # torch comes with it

        inject_fault(job.get("fault"))
        result = measure_spec(spec, settings, started=started)
        return {"measurement": result.model_dump(mode="json")}
    if step == "proxies":
        from agent.proxy_values import compute_proxies

        request = ProxyRequest.model_validate(job["proxies"])
        return {"proxies": compute_proxies(spec, request, settings.threads)}
    from agent import onnx_backend  # written separately; only ORT jobs need it

    if step == "export_onnx":
        inject_fault(job.get("fault"))
        return {"exported": {"build_s": onnx_backend.export_onnx(spec, settings, job["path"])}}
    if step == "measure_onnx":
        result = onnx_backend.measure_onnx(job["path"], spec, settings, float(job["build_s"]))
        return {"measurement": result.model_dump(mode="json")}
    raise ValueError(f"unknown step {step!r}; allowed: torch, export_onnx, measure_onnx, proxies")


def run_job(job: dict[str, Any], *, watchdog: bool = False) -> dict[str, Any]:
    """Run one job; the outcome as the JSON-ready dict the agent expects.

    `watchdog` is for the measuring process's entry points only: it ends the whole process.
    """
    started = time.perf_counter()
    try:
        settings = MeasurementSettings.model_validate(job["settings"])
        if watchdog:
            start_watchdog(float(job.get("timeout_s", settings.timeout_s)), job.get("agent_pid"))
        return _step(job, settings, started)
    except Exception as exc:  # every failure is reported, typed, to the agent
        return {"failure": classify_exception(exc).model_dump(mode="json")}


def _detach(log_path: str | None) -> None:
    """Own session (a Ctrl-C meant for the agent must not reach us); output to `log_path`."""
    os.setsid()
    if log_path:
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        for target in (1, 2):  # stray prints, also from C libraries
            os.dup2(fd, target)
        os.close(fd)


def forked_main(job: dict[str, Any], answer: Connection, log_path: str | None) -> None:
    """Target of a process forked from the forkserver: run `job`, send the JSON answer."""
    _detach(log_path)
    job = {**job, "child_started_at": time.time()}
    outcome = run_job(job, watchdog=True)
    _note_process(outcome, job)
    answer.send_bytes(json.dumps(outcome).encode())
    answer.close()


def _note_process(outcome: dict[str, Any], job: dict[str, Any]) -> None:
    """Record which process measured, and how long it took to start (per-candidate overhead)."""
    if "measurement" not in outcome:
        return
    details = outcome["measurement"].setdefault("details", {})
    details["pid"] = os.getpid()
    details["torch_loaded"] = "torch" in sys.modules  # must be False for the ORT step
    sent = job.get("sent_at")
    if isinstance(sent, (int, float)):
        details["process_start_s"] = max(0.0, job["child_started_at"] - sent)


def main() -> int:
    """``python -m agent.child``: a job on stdin, one JSON line on stdout."""
    started_at = time.time()
    result_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints, also from C, go to stderr
    try:
        job = json.loads(sys.stdin.read())
        job["child_started_at"] = started_at
        outcome = run_job(job, watchdog=True)
        _note_process(outcome, job)
    except Exception as exc:  # unreadable job
        outcome = {"failure": classify_exception(exc).model_dump(mode="json")}
    with result_out:
        result_out.write(json.dumps(outcome) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
