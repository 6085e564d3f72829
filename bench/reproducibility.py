"""Reproducibility: do a search's numbers hold when measured again? (issue 17, item 8)

A real `hwnas serve` (SQLite, loopback, --no-auth) and a real `hwnas agent` run a search of
LTS's GPT-2 space (adaptive embedding k = 4) with the search's noise settings: the agent
re-measures the reference architecture at intervals and retries busy results, the server
states intervals and computes the frontier beyond noise. After the search, a pause, then
every measured candidate is measured again `--repeats` times in fresh processes, in a random
order interleaved with readings of the reference, through the agent's own path
(`agent.measure.measure_candidate` with the search's MeasurementSettings, busy results
retried as the agent does: `agent.reference.measure_until_quiet`). Reported, for this CPU:

- interval coverage: the share of re-measurements inside the stated 95% interval, for hwnas's
  intervals (the API's `intervals`) and for today's protocol (the within-process CI of the
  median, latency only); their median relative widths; the between-process spread (median
  |log ratio| of re-measurement to first measurement) beside the within-process ci_rel;
- memory repeatability: the CV of memory between fresh processes, per candidate (its first
  measurement and its re-measurements) and of the reference readings;
- frontier stability (`bench/frontier_stability.py`): the plain frontier and the frontier
  beyond noise, each computed from the first measurements and again from the
  re-measurements, over the candidates quiet (not busy) in both: the share of the first
  frontier's members kept, the membership flips, and the decision flips (certain <-> off);
- cost: device-seconds of candidates (their `total_s`) against those of reference readings
  (readings counted by the agent's own counter, each costed at the median `total_s` of the
  reference's re-measurements here) and busy retries (each costed at its candidate's kept
  `total_s`).

`--load N` runs N load processes for the whole run (search and re-measurement): with
`--load-kind spin` pure-Python busy loops (CPU only), with `--load-kind memory` copies between
two 256 MB arrays, over and over (memory bandwidth and last-level cache). The 1-minute load
average is sampled throughout and reported per phase.

    .venv/bin/python bench/reproducibility.py [--budget 40] [--repeats 1] [--seed 0]
        [--strategy hwnas] [--pause 60] [--load 0] [--load-kind spin] [--quick] [--json F]
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from agent.launch import start_forkserver
from agent.measure import measure_candidate
from agent.reference import measure_until_quiet
from archvocab.registry import parse_space
from archvocab.wire import MeasurementResult, MeasurementSettings
from bench import frontier_stability
from bench.frontier_stability import frontier_sets
from bench.machine import commit, machine_busy
from hwnas.testing.agents import start_agent
from hwnas.testing.ports import free_port
from hwnas.testing.processes import Processes
from hwnas.testing.servers import start_server
from search.noise import METRICS, fit, reference_architecture

API = "/api/v1"
DEVICE_CLASS = "bench-cpu"
SPACE = {"kind": "gpt2", "div_val": [4]}  # LTS searches k = 4
BUSY_PAUSE_S = 1.0  # the agent's pause before measuring a busy job again (Worker's default)
MEMORY_CV_TARGET = 0.03
COVERAGE_TARGET = 0.90
KEPT_TARGET = 0.90
FULL = {"budget": 40, "pause_s": 60.0, "measurement": {}, "noise": {}, "space": SPACE}
# Seconds, not minutes: a reduced protocol, small models, a reference reading every 2 jobs.
QUICK = {
    "budget": 6,
    "pause_s": 1.0,
    "measurement": {
        "seq_len": 16,
        "warmup": 1,
        "warmup_max_s": 0.3,
        "min_samples": 5,
        "min_time_s": 0.0,
        "max_time_s": 0.3,
    },
    "noise": {"reference_every_jobs": 2, "busy_retries": 1},
    "space": {**SPACE, "n_layer": {"min": 2, "max": 4, "step": 1}},
}


# -- the machine -----------------------------------------------------------------------------
MEMORY_LOAD_MB = 256  # per array, two per process: far past any last-level cache
# Load processes die with this one even when it is killed outright (Linux), so none is left
# competing with whatever runs on the machine next.
DIE_WITH_PARENT = (
    "import ctypes, signal, sys\n"
    "if sys.platform == 'linux': ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"  # PDEATHSIG
)


@contextmanager
def load_processes(code: str, count: int) -> Iterator[list[subprocess.Popen]]:
    """`count` processes running `code` for as long as the block runs, however it ends."""
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(count):
            procs.append(subprocess.Popen([sys.executable, "-c", DIE_WITH_PARENT + code]))
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def busy_loops(count: int) -> AbstractContextManager[list[subprocess.Popen]]:
    """`count` processes spinning in pure Python: CPU only, no memory traffic."""
    return load_processes("while True: pass", count)


def memory_streams(
    count: int, mb: int = MEMORY_LOAD_MB
) -> AbstractContextManager[list[subprocess.Popen]]:
    """`count` processes copying one `mb` MB array into another, over and over: they compete
    for memory bandwidth and cache, which spinners do not."""
    stream = (
        "import numpy as np\n"
        f"a = np.ones({mb} << 20, np.uint8)\n"
        "b = np.zeros_like(a)\n"
        "while True: np.copyto(b, a)\n"
    )
    return load_processes(stream, count)


LOADS = {"spin": busy_loops, "memory": memory_streams}


class LoadSampler:
    """The 1-minute load average every `every_s` seconds, and the machine's busy CPU share,
    per named phase."""

    def __init__(self, every_s: float = 2.0) -> None:
        self.every_s = every_s
        self.phases: dict[str, dict[str, Any]] = {}
        self._phase: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.phase(None)
        self._stop.set()
        self._thread.join()

    def phase(self, name: str | None) -> None:
        """End the current phase and start `name` (None: none)."""
        busy, total = machine_busy()
        if self._phase is not None:
            p = self.phases[self._phase]
            p["cpu_busy_share"] = (busy - p.pop("_busy")) / max(total - p.pop("_total"), 1e-9)
        self._phase = name
        if name is not None:
            self.phases[name] = {"loadavg_1m": [], "_busy": busy, "_total": total}

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            phase = self._phase
            if phase is not None:
                self.phases[phase]["loadavg_1m"].append(os.getloadavg()[0])

    def summary(self) -> dict[str, dict[str, float | None]]:
        out = {}
        for name, p in self.phases.items():
            samples = p["loadavg_1m"]
            out[name] = {
                "loadavg_1m_mean": statistics.fmean(samples) if samples else None,
                "loadavg_1m_max": max(samples) if samples else None,
                "cpu_busy_share": p.get("cpu_busy_share"),
            }
        return out


# -- the search, through a real server and agent ---------------------------------------------
def search_request(args: argparse.Namespace, preset: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "bench reproducibility",
        "strategy": args.strategy,
        "device_class": DEVICE_CLASS,
        "space": preset["space"],
        "measurement": preset["measurement"],
        "budget": {"max_evaluations": args.budget},
        "population": {"initial": max(4, args.budget // 2)},
        "noise": preset["noise"],
        "seed": args.seed,
    }


def agent_counters(log: str) -> dict[str, int]:
    """The counters the agent logs when it stops (`agent stopped: {...}`); {} if it did not."""
    found = re.findall(r"agent stopped: (\{.*\})", log)
    return ast.literal_eval(found[-1]) if found else {}


def run_search(tmp: Path, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Serve, run the search with one agent to its end; the API's view of it."""
    procs = Processes(tmp)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        start_server(procs, tmp / "bench.db", port, "--no-auth", lease_seconds=60)
        with httpx.Client(base_url=url + API, timeout=60) as http:
            created = http.post("/searches", json=request)
            created.raise_for_status()
            search_id = created.json()["id"]
            started = time.monotonic()
            start_agent(procs, "agent", url, "--exit-when-idle", "5", device_class=DEVICE_CLASS)
            search = wait_finished(http, search_id, started + timeout_s)
            wall_s = time.monotonic() - started
            cands = http.get(f"/searches/{search_id}/candidates", params={"status": "measured"})
            cands.raise_for_status()
            failed = http.get(f"/searches/{search_id}/candidates", params={"status": "failed"})
        procs.by_name["agent"].wait(timeout=120)
    finally:
        procs.stop_all()
    return {
        "search": search,
        "candidates": cands.json(),
        "failed": len(failed.json()),
        "wall_s": wall_s,
        "agent_counters": agent_counters(procs.log("agent")),
    }


def wait_finished(http: httpx.Client, search_id: int, deadline: float) -> dict[str, Any]:
    while True:
        search = http.get(f"/searches/{search_id}").json()
        if search["status"] != "running":
            return search
        if time.monotonic() > deadline:
            raise RuntimeError(f"search {search_id} still running: {search['progress']}")
        time.sleep(1.0)


# -- measuring again -------------------------------------------------------------------------
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


# -- what the numbers say --------------------------------------------------------------------
def first_values(c: dict[str, Any]) -> dict[str, float]:
    m = c["measurement"]
    return {"latency_ms": m["latency_ms"], "memory_mb": m["peak_memory_mb"]}


def cv(values: Sequence[float]) -> float | None:
    if len(values) < 2 or statistics.fmean(values) <= 0:
        return None
    return statistics.stdev(values) / statistics.fmean(values)


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def pairs(
    candidates: list[dict[str, Any]], again: dict[str, list[dict[str, Any]]], quiet: bool
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(candidate, re-measurement) for every successful re-measurement; with `quiet`, only
    those where neither measurement was busy."""
    for c in candidates:
        for got in again[c["arch_id"]]:
            if "failure" in got or (quiet and (got["busy"] or c["busy"])):
                continue
            yield c, got


def coverage(
    candidates: list[dict[str, Any]], again: dict[str, list[dict[str, Any]]], quiet: bool
) -> dict[str, Any]:
    """Per metric: the share of re-measurements inside hwnas's interval and today's CI."""
    out: dict[str, Any] = {}
    for metric in METRICS:
        hwnas, today = [], []
        for c, got in pairs(candidates, again, quiet):
            low, high = c["intervals"][metric]
            hwnas.append(low <= got[metric] <= high)
            if metric == "latency_ms":
                lat = c["measurement"]["latency"]
                today.append(lat["ci_low_ms"] <= got[metric] <= lat["ci_high_ms"])
        out[metric] = {"hwnas": share(hwnas), "today": share(today), "n": len(hwnas)}
    return out


def widths_and_spread(
    candidates: list[dict[str, Any]], again: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """Per metric: median relative widths of the stated intervals, the between-process
    spread (median |log(re-measurement / first)|) and the within-process ci_rel."""
    out: dict[str, Any] = {}
    for metric in METRICS:
        rel = [
            (c["intervals"][metric][1] - c["intervals"][metric][0]) / first_values(c)[metric]
            for c in candidates
        ]
        logs = [
            abs(math.log(got[metric] / first_values(c)[metric]))
            for c, got in pairs(candidates, again, quiet=False)
        ]
        entry = {"hwnas_rel_width": median(rel), "between_median_abs_log": median(logs)}
        if metric == "latency_ms":
            lats = [c["measurement"]["latency"] for c in candidates]
            entry["today_rel_width"] = median(
                [(x["ci_high_ms"] - x["ci_low_ms"]) / x["median_ms"] for x in lats]
            )
            entry["within_ci_rel"] = median([x["ci_rel"] for x in lats])
        out[metric] = entry
    return out


def memory_repeatability(
    candidates: list[dict[str, Any]],
    again: dict[str, list[dict[str, Any]]],
    agent_readings: list[dict[str, Any]],
    readings: list[dict[str, Any]],
) -> dict[str, Any]:
    cvs = []
    for c in candidates:
        values = [first_values(c)["memory_mb"]]
        values += [g["memory_mb"] for g in again[c["arch_id"]] if "failure" not in g]
        if (x := cv(values)) is not None:
            cvs.append(x)
    ok = [r for r in readings if "failure" not in r]
    ours = [r["memory_mb"] for r in ok]
    theirs = [r["peak_memory_mb"] for r in agent_readings]
    return {
        "candidates": {
            "n": len(cvs),
            "median": median(cvs),
            "p90": float(np.quantile(cvs, 0.9)) if cvs else None,
            "max": max(cvs) if cvs else None,
            "share_within_target": share([x <= MEMORY_CV_TARGET for x in cvs]),
        },
        "reference": {
            "agent_readings": len(theirs),
            "agent_cv": cv(theirs),
            "remeasure_readings": len(ours),
            "remeasure_cv": cv(ours),
            "all_cv": cv(theirs + ours),
            "latency_all_cv": cv(
                [r["latency_ms"] for r in agent_readings] + [r["latency_ms"] for r in ok]
            ),
        },
    }


def agent_reference_readings(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reference readings the results carried, one per (agent, measured_at), as the
    server keys them."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for c in candidates:
        ref = c["measurement"].get("reference")
        if ref:
            seen[(c["measurement"]["agent_id"], ref["measured_at"])] = ref
    return list(seen.values())


def server_agreement(candidates: list[dict[str, Any]], rel: dict[str, list[float]]) -> int:
    """How many candidates this script's frontier beyond noise (first measurements, the
    server's pool: feasible and not busy) places differently from the API's `on_frontier`."""
    pool = [c for c in candidates if c["feasible"] and not c["busy"]]
    params = np.array([c["objectives"]["decoder_params"] for c in pool], dtype=float)
    values = np.array([[first_values(c)[m] for m in METRICS] for c in pool], dtype=float)
    mine = frontier_sets(params, values.reshape(-1, 2), rel)["members"]
    theirs = {i for i, c in enumerate(pool) if c["on_frontier"]}
    outside = sum(c["on_frontier"] for c in candidates if c not in pool)
    return len(mine ^ theirs) + outside


def sigma_from_candidates(
    candidates: list[dict[str, Any]], again: dict[str, list[dict[str, Any]]], device: str
) -> dict[str, float]:
    """The noise model's sigma had it learned from the candidates' own repeats instead."""
    groups: dict[str, list[list[float]]] = {m: [] for m in METRICS}
    for c in candidates:
        ok = [g for g in again[c["arch_id"]] if "failure" not in g]
        for m in METRICS:
            groups[m].append([first_values(c)[m], *(g[m] for g in ok)])
    return dict(fit(groups, device, prior_dof=0).reference_sigma)


def cost(
    candidates: list[dict[str, Any]], counters: dict[str, int], readings: list[dict[str, Any]]
) -> dict[str, Any]:
    """Device-seconds: candidates (their total_s), reference readings (the agent's count x
    the reference's median total_s here), busy retries (count x the kept total_s)."""
    cand_s = sum(c["measurement"]["total_s"] for c in candidates)
    ref_each = median([r["total_s"] for r in readings if "failure" not in r]) or 0.0
    carried = len(agent_reference_readings(candidates))
    ref_count = counters.get("reference_measurements", carried)
    retries = [len(c["measurement"].get("busy_attempts") or []) for c in candidates]
    busy_s = sum(n * c["measurement"]["total_s"] for n, c in zip(retries, candidates))
    return {
        "candidates_s": cand_s,
        "reference_measurements": ref_count,
        "reference_readings_carried": carried,
        "reference_each_s": ref_each,
        "reference_s": ref_count * ref_each,
        "busy_retries": sum(retries),
        "busy_retries_counter": counters.get("busy_retries"),
        "busy_s": busy_s,
        "busy_pause_s": sum(retries) * BUSY_PAUSE_S,
        "extra_share": (ref_count * ref_each + busy_s) / cand_s if cand_s else None,
    }


def analyse(
    found: dict[str, Any], again: dict[str, Any], readings: list[dict[str, Any]], repeats: int
) -> dict[str, Any]:
    candidates = [c for c in found["candidates"] if not c["reused"]]
    noise = found["search"]["noise"]
    rel = noise["interval_rel"]
    request = found["search"]["request"]
    rows = [candidate_row(c, again[c["arch_id"]]) for c in candidates]
    frontier = frontier_stability.analyse(rows, rel, repeats)
    frontier["server_disagreements"] = server_agreement(candidates, rel)
    return {
        "coverage": {
            "all": coverage(candidates, again, quiet=False),
            "quiet": coverage(candidates, again, quiet=True),
        },
        "spread": widths_and_spread(candidates, again),
        "memory": memory_repeatability(
            candidates, again, agent_reference_readings(candidates), readings
        ),
        "frontier": frontier,
        "sigma": {
            "server": noise["sigma"],
            "from_candidates": sigma_from_candidates(
                candidates, again, request["measurement"]["device"]
            ),
        },
        "cost": cost(candidates, found["agent_counters"], readings),
    }


def targets(a: dict[str, Any]) -> dict[str, bool | None]:
    cov = a["coverage"]["all"]
    plain, noisy = a["frontier"]["plain"], a["frontier"]["noise_aware"]
    mem = a["memory"]["candidates"]["max"]

    def at_least(value: float | None, bound: float) -> bool | None:
        return None if value is None else value >= bound

    return {
        "latency_coverage_ge_90": at_least(cov["latency_ms"]["hwnas"], COVERAGE_TARGET),
        "memory_coverage_ge_90": at_least(cov["memory_mb"]["hwnas"], COVERAGE_TARGET),
        "memory_cv_le_3pct": None if mem is None else mem <= MEMORY_CV_TARGET,
        "noise_frontier_keeps_ge_90": at_least(noisy["kept_share"], KEPT_TARGET),
        "noise_flips_le_half_plain": noisy["flips"] <= 0.5 * plain["flips"],
        "noise_decision_flips_le_half_plain": (
            a["frontier"]["decisions"]["flips"] <= 0.5 * plain["flips"]
        ),
    }


# -- the run ---------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="reduced protocol and budget")
    parser.add_argument("--budget", type=int, default=None, help="measurements in the search")
    parser.add_argument("--repeats", type=int, default=1, help="re-measurements per candidate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strategy", choices=("lts", "hwnas", "nsga2"), default="hwnas")
    parser.add_argument("--pause", type=float, default=None, help="seconds before measuring again")
    parser.add_argument("--load", type=int, default=0, help="load processes for the run")
    parser.add_argument(
        "--load-kind",
        choices=tuple(LOADS),
        default="spin",
        help="spin: pure-Python busy loops; memory: large array copies (memory bandwidth)",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    preset = QUICK if args.quick else FULL
    args.budget = args.budget or preset["budget"]
    args.pause = preset["pause_s"] if args.pause is None else args.pause
    if args.budget < 2 or args.repeats < 1 or args.load < 0 or args.pause < 0:
        parser.error("--budget >= 2, --repeats >= 1, --load >= 0 and --pause >= 0 are needed")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    preset = QUICK if args.quick else FULL
    request = search_request(args, preset)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    load = LOADS[args.load_kind](args.load)
    with tempfile.TemporaryDirectory(prefix="hwnas-repro-") as tmp, load:
        with LoadSampler() as sampler:
            start_forkserver()  # this process's, warming while the search runs
            sampler.phase("search")
            found = run_search(Path(tmp), request, timeout_s=60 * 60)
            sampler.phase("pause")
            time.sleep(args.pause)
            sampler.phase("remeasure")
            began = time.monotonic()
            full = found["search"]["request"]
            reference = reference_architecture(parse_space(full["space"])).to_dict()
            again, readings = remeasure_all(
                [c for c in found["candidates"] if not c["reused"]],
                reference,
                full,
                args.repeats,
                args.seed,
            )
            remeasure_s = time.monotonic() - began
    return report_payload(args, found, again, readings, remeasure_s, sampler, started_at)


def report_payload(
    args: argparse.Namespace,
    found: dict[str, Any],
    again: dict[str, list[dict[str, Any]]],
    readings: list[dict[str, Any]],
    remeasure_s: float,
    sampler: LoadSampler,
    started_at: str,
) -> dict[str, Any]:
    analysis = analyse(found, again, readings, args.repeats)
    done = [g for gs in again.values() for g in gs] + readings
    cpu = next((g["cpu_model"] for g in done if "cpu_model" in g), "unknown")
    search = found["search"]
    return {
        "command": command(args),
        "started_at": started_at,
        "commit": commit() or "",
        "device": {"class": DEVICE_CLASS, "cpu_model": cpu, "cores": os.cpu_count()},
        "load": {"processes": args.load, "kind": args.load_kind, "phases": sampler.summary()},
        "search": {
            "id": search["id"],
            "strategy": args.strategy,
            "budget": args.budget,
            "seed": args.seed,
            "measured": len(found["candidates"]),
            "failed": found["failed"],
            "busy": sum(c["busy"] for c in found["candidates"]),
            "on_frontier": sum(c["on_frontier"] for c in found["candidates"]),
            "wall_s": found["wall_s"],
            "noise": search["noise"],
            "measurement": search["request"]["measurement"],
            "noise_settings": search["request"]["noise"],
            "agent_counters": found["agent_counters"],
            "remeasured": search["progress"]["remeasured"],  # the search's own, after its budget
        },
        "remeasure": {
            "repeats": args.repeats,
            "pause_s": args.pause,
            "wall_s": remeasure_s,
            "measurements": sum(len(gs) for gs in again.values()),
            "failed": sum("failure" in g for g in done),
            "busy": sum(g.get("busy", False) for g in done),
            "busy_retries": sum(g.get("busy_retries", 0) for g in done),
            "reference_readings": len(readings),
        },
        **analysis,
        "targets": targets(analysis),
        "candidates": [candidate_row(c, again[c["arch_id"]]) for c in found["candidates"]],
        "reference_readings": readings,
        "agent_reference_readings": agent_reference_readings(found["candidates"]),
    }


def candidate_row(c: dict[str, Any], again: list[dict[str, Any]]) -> dict[str, Any]:
    m = c["measurement"]
    return {
        "arch_id": c["arch_id"],
        "decoder_params": c["objectives"]["decoder_params"],
        **first_values(c),
        "ci_ms": [m["latency"]["ci_low_ms"], m["latency"]["ci_high_ms"]],
        "intervals": c["intervals"],
        "busy": c["busy"],
        "feasible": c["feasible"],
        "reused": c["reused"],
        "on_frontier": c["on_frontier"],
        "total_s": m["total_s"],
        "again": again,
    }


def command(args: argparse.Namespace) -> str:
    argv = ["--budget", str(args.budget), "--repeats", str(args.repeats), "--seed", str(args.seed)]
    argv += ["--strategy", args.strategy, "--pause", f"{args.pause:g}", "--load", str(args.load)]
    argv += ["--load-kind", args.load_kind]
    argv += ["--quick"] if args.quick else []
    argv += ["--json", str(args.json)] if args.json else []
    return shlex.join([".venv/bin/python", "bench/reproducibility.py", *argv])


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def summary(p: dict[str, Any]) -> list[str]:
    s, r, load = p["search"], p["remeasure"], p["load"]["phases"]
    lines = [
        f"device {p['device']['cpu_model']} ({p['device']['cores']} cores), "
        f"{p['load']['processes']} load processes ({p['load']['kind']}); commit {p['commit']}",
        f"search {s['strategy']}: {s['measured']} measured, {s['failed']} failed, {s['busy']} "
        f"busy, {s['on_frontier']} on the frontier beyond noise (plain "
        f"{s['noise']['plain_frontier_size']}), {s['noise']['reference_readings']} reference "
        f"readings, {s['wall_s']:.0f} s",
        f"re-measured: {r['measurements']} candidates x{r['repeats']} + "
        f"{r['reference_readings']} reference, {r['pause_s']:g} s later, {r['wall_s']:.0f} s; "
        f"busy {r['busy']}, failed {r['failed']}, busy retries {r['busy_retries']}",
        "load average (1 min) mean/max and machine CPU busy: "
        + "; ".join(
            f"{name} {fmt(x['loadavg_1m_mean'])}/{fmt(x['loadavg_1m_max'])}, "
            f"{pct(x['cpu_busy_share'])}"
            for name, x in load.items()
        ),
        "",
        "| metric | hwnas coverage (all / quiet) | today's CI coverage | hwnas width | "
        "today width | between-process median abs log | within ci_rel |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in METRICS:
        a, q, w = p["coverage"]["all"][m], p["coverage"]["quiet"][m], p["spread"][m]
        lines.append(
            f"| {m} | {pct(a['hwnas'])} / {pct(q['hwnas'])} (n={a['n']}) | {pct(a['today'])} | "
            f"{pct(w['hwnas_rel_width'])} | {pct(w.get('today_rel_width'))} | "
            f"{pct(w['between_median_abs_log'])} | {pct(w.get('within_ci_rel'))} |"
        )
    mem, ref = p["memory"]["candidates"], p["memory"]["reference"]
    lines += [
        "",
        f"memory CV between fresh processes, per candidate: median {pct(mem['median'])}, "
        f"p90 {pct(mem['p90'])}, max {pct(mem['max'])}, "
        f"within 3%: {pct(mem['share_within_target'])} (n={mem['n']})",
        f"reference readings: memory CV agent {pct(ref['agent_cv'])} "
        f"(n={ref['agent_readings']}), re-measure {pct(ref['remeasure_cv'])} "
        f"(n={ref['remeasure_readings']}), all {pct(ref['all_cv'])}; latency CV all "
        f"{pct(ref['latency_all_cv'])}",
        f"sigma (log scale): server {fmt_d(p['sigma']['server'])}; "
        f"from the candidates' repeats {fmt_d(p['sigma']['from_candidates'])}",
        "",
        f"frontier (params, latency, memory; and two at a time) over "
        f"{p['frontier']['pool']:.0f} candidates quiet in both "
        f"(script vs server frontier disagreements: {p['frontier']['server_disagreements']}):",
        *frontier_stability.table(p["frontier"]),
    ]
    c = p["cost"]
    lines += [
        "",
        f"cost: candidates {c['candidates_s']:.0f} device-s; reference "
        f"{c['reference_measurements']} x {c['reference_each_s']:.1f} s = "
        f"{c['reference_s']:.0f} s; busy retries {c['busy_retries']} = {c['busy_s']:.0f} s "
        f"(+{c['busy_pause_s']:.0f} s paused); extra {pct(c['extra_share'])}",
        "targets: " + ", ".join(f"{k} {v}" for k, v in p["targets"].items()),
    ]
    return lines


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def fmt_d(values: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in values.items())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # A plain kill unwinds like an exception, so the server, agent and load processes stop.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    print(command(args), flush=True)
    payload = run(args)
    lines = summary(payload)
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({**payload, "summary": lines}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
