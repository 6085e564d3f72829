"""One run of bench/agent_scaling.py: a fresh, real `hwnas serve` (its own temporary SQLite
file, loopback port), N replay agents, and one hwnas search with the fixed hypervolume
normalisation, watched through its hypervolume trace until it reaches the target or ends.

Wall-clock time to target = the server's time of the first result whose hypervolume is >=
the target minus the search's created_at (both the server's clock, so the polling interval
does not matter)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench.machine import tree_cpu_s
from bench.normalisation import OBJECTIVES
from bench.replay_fleet import API, DEVICE_CLASS, start_agents, stop_processes, wait_for_agents
from bench.server_events import server_time
from hwnas.testing.servers import serve

POLL_S = 2.0  # the trace is read-only, but each read costs the server ~20 ms of CPU


@dataclass(frozen=True)
class RunSettings:
    """What every run of one benchmark shares."""

    budget: int
    target: float  # the hypervolume to reach
    time_scale: float  # wall seconds per replayed device-second
    table: Path
    norm: Mapping[str, Any]  # the fixed normalisation: {"ideal": ..., "reference": ...}
    initial: int | None  # None: the hwnas strategy's own initial design
    max_run_s: float  # give a run up after this long


def search_request(
    seed: int, budget: int, norm: Mapping[str, Any], initial: int | None
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "name": f"agent scaling seed {seed}",
        "strategy": "hwnas",
        "device_class": DEVICE_CLASS,
        "space": {},
        "objectives": OBJECTIVES,
        "budget": {"max_evaluations": budget},
        "seed": seed,
        "hypervolume": {"ideal": dict(norm["ideal"]), "reference": dict(norm["reference"])},
    }
    if initial is not None:
        request["population"] = {"initial": initial}
    return request


def run_one(agents: int, seed: int, settings: RunSettings) -> dict[str, Any]:
    """One fresh server, `agents` replay agents, one search until the target or its end."""
    with tempfile.TemporaryDirectory(prefix="hwnas-scaling-") as tmp:
        tmpdir = Path(tmp)
        try:
            # A benchmark on loopback: what it measures does not depend on tokens.
            with serve(tmpdir, tmpdir / "scaling.db", "--no-auth") as server:
                procs: list[subprocess.Popen] = []
                try:
                    procs = start_agents(
                        server.url, agents, settings.time_scale, settings.table, tmpdir
                    )
                    with httpx.Client(base_url=server.url, timeout=60) as http:
                        wait_for_agents(http, agents, procs)
                        return _search(http, server.proc, agents, seed, settings)
                finally:
                    stop_processes(procs)
        except Exception:
            for name in ("server.log", *(f"agent-{i}.log" for i in range(agents))):
                path = tmpdir / name
                if path.exists():
                    print(f"--- {name} (tail)\n{path.read_text()[-3000:]}", file=sys.stderr)
            raise


def _search(
    http: httpx.Client,
    server: subprocess.Popen,
    agents: int,
    seed: int,
    settings: RunSettings,
) -> dict[str, Any]:
    cpu_before = tree_cpu_s(server.pid)
    request = search_request(seed, settings.budget, settings.norm, settings.initial)
    created = http.post(f"{API}/searches", json=request)
    created.raise_for_status()
    info = created.json()
    search_id, created_at = info["id"], server_time(info["created_at"])
    trace, hit, status = _watch(http, server, search_id, settings)
    server_cpu_s = round(tree_cpu_s(server.pid) - cpu_before, 2)
    if status == "running":
        http.post(f"{API}/searches/{search_id}/cancel").raise_for_status()
    done = http.get(f"{API}/agents").json()
    points = trace["points"]
    last = points[-1] if points else None
    return {
        "agents": agents,
        "seed": seed,
        "search_id": search_id,
        "status_at_stop": status,
        "reached": hit is not None,
        **_to_target(hit, created_at, agents, settings.time_scale),
        "results_seen": last["results"] if last else 0,
        "hypervolume_seen": last["hypervolume"] if last else None,
        "server_cpu_s": server_cpu_s,
        "jobs_done_per_agent": sorted(a["jobs_done"] for a in done),
        "failures": sum(a["failures"] for a in done),
        "trace": [_trace_row(p, created_at) for p in points],
    }


def _watch(
    http: httpx.Client, server: subprocess.Popen, search_id: int, settings: RunSettings
) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """Poll the search's hypervolume trace until it reaches the target, the search ends or
    the run runs out of time: the trace, its first point at the target (or None), and the
    search's status then."""
    started = time.monotonic()
    while True:
        trace = http.get(f"{API}/searches/{search_id}/hypervolume").json()
        hit = next((p for p in trace["points"] if p["hypervolume"] >= settings.target), None)
        status = http.get(f"{API}/searches/{search_id}").json()["status"]
        if hit is not None or status != "running":
            return trace, hit, status
        if time.monotonic() - started > settings.max_run_s:
            return trace, hit, status
        if server.poll() is not None:
            raise RuntimeError("the server exited during the search")
        time.sleep(POLL_S)


def _to_target(
    hit: Mapping[str, Any] | None, created_at: datetime, agents: int, time_scale: float
) -> dict[str, Any]:
    """Wall time, measurements, results and device-seconds to the target (None if not
    reached), and the agents' utilisation on the way."""
    if hit is None:
        keys = ("wall_s", "measurements", "results", "device_s")
        return {**{f"{k}_to_target": None for k in keys}, "agent_utilisation": None}
    wall = (server_time(hit["at"]) - created_at).total_seconds()
    return {
        "wall_s_to_target": round(wall, 3),
        "measurements_to_target": hit["measured"],
        "results_to_target": hit["results"],
        "device_s_to_target": hit["device_s"],
        # share of the agents' wall time spent in (simulated) measurements; measurements
        # still in flight at the target are not counted, so it reads a little low
        "agent_utilisation": round(hit["device_s"] * time_scale / (agents * wall), 3)
        if wall > 0
        else None,
    }


def _trace_row(point: Mapping[str, Any], created_at: datetime) -> list[Any]:
    """[results, measured, device-seconds, seconds since created, hypervolume]."""
    return [
        point["results"],
        point["measured"],
        point["device_s"],
        round((server_time(point["at"]) - created_at).total_seconds(), 3),
        round(point["hypervolume"], 6),
    ]
