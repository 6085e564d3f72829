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

The script runs the search (here) and leaves the rest to its modules: `bench.background_load`
(load processes and the load sampler), `bench.remeasure` (measuring again),
`bench.reproducibility_analysis` (the numbers and targets), `bench.frontier_stability` and
`bench.reproducibility_report` (the printed summary).

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
import os
import re
import shlex
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from agent.launch import start_forkserver
from archvocab.registry import parse_space
from bench.background_load import LOADS, LoadSampler
from bench.machine import commit
from bench.remeasure import remeasure_all
from bench.reproducibility_analysis import agent_reference_readings, analyse, candidate_row, targets
from bench.reproducibility_report import summary
from hwnas.testing.agents import start_agent
from hwnas.testing.ports import free_port
from hwnas.testing.processes import Processes
from hwnas.testing.servers import start_server
from search.noise import reference_architecture

API = "/api/v1"
DEVICE_CLASS = "bench-cpu"
SPACE = {"kind": "gpt2", "div_val": [4]}  # LTS searches k = 4
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


def command(args: argparse.Namespace) -> str:
    argv = ["--budget", str(args.budget), "--repeats", str(args.repeats), "--seed", str(args.seed)]
    argv += ["--strategy", args.strategy, "--pause", f"{args.pause:g}", "--load", str(args.load)]
    argv += ["--load-kind", args.load_kind]
    argv += ["--quick"] if args.quick else []
    argv += ["--json", str(args.json)] if args.json else []
    return shlex.join([".venv/bin/python", "bench/reproducibility.py", *argv])


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
