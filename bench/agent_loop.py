"""The agent's whole loop per candidate, timed: a real `hwnas serve` on loopback, a search of
LTS's space, and the agent's own Worker (claim -> measure in a fresh process -> report)
measuring it in this process, so each job's wall time can be split into its parts.

Used by bench/measurement.py; not a test (no timed assertions), a measurement.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from agent.client import AgentClient
from agent.fingerprint import device_fingerprint
from agent.launch import start_forkserver
from agent.measure import measure_candidate
from agent.worker import Worker
from archvocab.wire import AgentRegistration, JobLease, MeasurementSettings
from hwnas.testing.servers import serve

DEVICE_CLASS = "bench-cpu"


class TimedWorker(Worker):
    """The agent's Worker, with each job's wall time from its claim request to the accepted
    result, and the measuring call's own wall time, recorded per arch id."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, measure=self._timed_measure, **kwargs)
        self.jobs: dict[str, dict[str, float]] = {}
        self._claim_started = 0.0
        self._measure_s = 0.0

    def _timed_measure(self, spec: Mapping[str, Any], settings: MeasurementSettings, **kw: Any):
        start = time.perf_counter()
        try:
            return measure_candidate(spec, settings, **kw)
        finally:
            self._measure_s = time.perf_counter() - start

    def _claim(self) -> JobLease | None:
        self._claim_started = time.perf_counter()
        return super()._claim()

    def process(self, lease: JobLease) -> None:
        super().process(lease)
        wall = time.perf_counter() - self._claim_started
        self.jobs[lease.arch_id] = {"wall_s": wall, "measure_s": self._measure_s}


def agent_loop_timing(candidates: int, settings: MeasurementSettings, seed: int) -> list[dict]:
    """Per job: the agent's wall time, the measuring call's, and the measurement's own parts."""
    with tempfile.TemporaryDirectory(prefix="hwnas-bench-") as tmp:
        # A benchmark on loopback: what it measures does not depend on tokens.
        with serve(Path(tmp), Path(tmp) / "bench.db", "--no-auth") as server:
            return _run_search(server.url, candidates, settings, seed)


def _run_search(url: str, candidates: int, settings: MeasurementSettings, seed: int) -> list:
    request = {
        "name": "bench agent loop",
        "device_class": DEVICE_CLASS,
        "space": {"div_val": [4]},
        "measurement": settings.model_dump(),
        "budget": {"max_evaluations": candidates},
        "population": {"initial": candidates, "parents": 2, "mutations": 2, "crossovers": 2},
        "seed": seed,
    }
    start_forkserver()
    with httpx.Client(base_url=url, timeout=60) as http:
        created = http.post("/api/v1/searches", json=request)
        created.raise_for_status()
        search_id = created.json()["id"]
        registration = AgentRegistration(
            device_class=DEVICE_CLASS, name="bench", fingerprint=device_fingerprint()
        )
        worker = TimedWorker(AgentClient(http), registration, once=False, max_jobs=candidates)
        worker.run()
        rows = http.get(f"/api/v1/searches/{search_id}/candidates").json()
    out = []
    for row in rows:
        m = row.get("measurement")
        job = worker.jobs.get(row["arch_id"])
        if m is None or job is None:
            continue
        out.append(
            {
                "arch_id": row["arch_id"],
                "wall_s": job["wall_s"],
                "measure_s": job["measure_s"],
                "process_s": m["total_s"],
                "build_s": m["build_s"] + m["load_s"],
                "warmup_s": m["latency"]["warmup_s"],
                "timed_s": m["latency"]["timed_s"],
                "child_start_s": m["details"].get("process_start_s", 0.0),
                "latency_ms": m["latency_ms"],
            }
        )
    return out
