"""Measuring a search's candidates again after it, as its agent measured them: each in a
fresh process with the search's settings, busy results retried, interleaved with readings
of the reference architecture in one random order."""

from __future__ import annotations

import random
import sys
import time
from typing import Any

from agent.measure import measure_candidate
from agent.reference import measure_until_quiet
from archvocab.wire import MeasurementResult, MeasurementSettings

BUSY_PAUSE_S = 1.0  # the agent's pause before measuring a busy job again (Worker's default)


def measure_again(
    spec: dict[str, Any], settings: MeasurementSettings, busy_retries: int
) -> dict[str, Any]:
    """One fresh-process measurement as the agent takes it (busy results retried)."""
    outcome = measure_until_quiet(
        lambda: measure_candidate(spec, settings), busy_retries, pause_s=BUSY_PAUSE_S
    )
    if not isinstance(outcome, MeasurementResult):
        return {"failure": f"{outcome.kind}: {outcome.message[:300]}"}
    return {
        "latency_ms": outcome.latency_ms,
        "memory_mb": outcome.peak_memory_mb,
        "busy": outcome.provenance.busy,
        "busy_retries": len(outcome.busy_attempts),
        "total_s": outcome.total_s,
        "cpu_model": outcome.provenance.cpu_model,
        "at": time.time(),
    }


def remeasure_all(
    candidates: list[dict[str, Any]],
    reference: dict[str, Any],
    request: dict[str, Any],
    repeats: int,
    seed: int,
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Every candidate `repeats` times and the reference about every tenth measurement (at
    least 3 times), in one random order; (re-measurements by arch id, reference readings)."""
    settings = MeasurementSettings.model_validate(request["measurement"])
    retries = request["noise"]["busy_retries"]
    jobs: list[dict[str, Any] | None] = [c for c in candidates for _ in range(repeats)]
    jobs += [None] * max(3, len(jobs) // 10)  # None: the reference
    random.Random(seed).shuffle(jobs)
    again: dict[str, list[dict[str, Any]]] = {c["arch_id"]: [] for c in candidates}
    readings: list[dict[str, Any]] = []
    for i, job in enumerate(jobs):
        spec = reference if job is None else job["spec"]
        got = measure_again(spec, settings, retries)
        (readings if job is None else again[job["arch_id"]]).append(got)
        name = "reference" if job is None else job["arch_id"]
        print(f"  re-measure {i + 1}/{len(jobs)} {name}: {short(got)}", file=sys.stderr)
    return again, readings


def short(got: dict[str, Any]) -> str:
    if "failure" in got:
        return got["failure"][:120]
    busy = " busy" if got["busy"] else ""
    return f"{got['latency_ms']:.2f} ms {got['memory_mb']:.1f} MB{busy}"
