"""Scaling with agents: wall-clock time to a fixed hypervolume with 1, 2 and 4 agents.

Each run starts a fresh, real `hwnas serve` (its own temporary SQLite file, loopback port) and
N real agent processes (`bench/replay_agent.py`: the agent's own Worker over HTTP, whose
device is the replayed table of real measurements, `bench/replay.py`, sleeping each
measurement's real device time times `--time-scale`). It then creates an hwnas search
(asynchronous steady-state: one proposal per free live agent) with a fixed hypervolume
normalisation (the one bench/search_efficiency.py judges by: decoder_params from the space's
smallest member to its largest, latency and memory from 0 to the replayed cost of the largest
member) and polls the search's hypervolume trace until it reaches `--target` or the search
ends; then it cancels the search and stops every process.

Wall-clock time to target = the server's time of the first result whose hypervolume is >=
the target minus the search's created_at (both the server's clock, so the polling interval
does not matter). Measurements and device-seconds to the target come from the same trace
point. Configurations are interleaved across seeds (seed 0: 1, 2, 4 agents; seed 1: ...), so
drift of the machine hits all alike. It prints a markdown table and PASS/FAIL for the target
(4 agents at least 3.2x faster than 1 to the same hypervolume); `--json` keeps every run.

    .venv/bin/python -m bench.agent_scaling [--agents 1 2 4] [--seeds 3] [--budget 400]
        [--target 0.335] [--time-scale 0.2] [--table bench/data/device_table_gpt2_cpu.json]
        [--json bench/results/agent_scaling.json] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from archvocab.spaces.gpt2.space import GPT2Space
from bench.replay import DEFAULT_TABLE, DeviceReplay
from hwnas.testing.servers import serve

DEVICE_CLASS = "replay-cpu"
OBJECTIVES = ["decoder_params", "latency_ms", "memory_mb"]
SPEEDUP_TARGET = 3.2  # 4 agents vs 1, wall-clock to the same hypervolume
DEFAULTS = {
    "agents": [1, 2, 4],
    "seeds": 3,
    "budget": 400,
    "target": 0.335,
    "time_scale": 0.2,
    "initial": None,  # the hwnas strategy's own default initial design
    "max_run_s": 900.0,
}
QUICK = {
    "agents": [1, 2],
    "seeds": 1,
    "budget": 16,
    "target": 0.2,
    "time_scale": 0.02,
    "initial": 6,
    "max_run_s": 120.0,
}
POLL_S = 2.0  # the trace is read-only, but each read costs the server ~20 ms of CPU
API = "/api/v1"


# -- set-up ------------------------------------------------------------------------------------
def normalisation(table: Path) -> dict[str, dict[str, float]]:
    """The fixed hypervolume normalisation bench/search_efficiency.py judges every strategy by."""
    from bench.search_efficiency import make_normaliser  # search code: only the bench uses it

    return make_normaliser(DeviceReplay.load(table), GPT2Space()).to_dict()


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


def start_agents(
    url: str, count: int, time_scale: float, table: Path, logs: Path
) -> list[subprocess.Popen]:
    procs = []
    for index in range(count):
        cmd = [
            sys.executable,
            "-m",
            "bench.replay_agent",
            "--server",
            url,
            "--device-class",
            DEVICE_CLASS,
            "--name",
            f"replay-{index}",
            "--time-scale",
            str(time_scale),
            "--table",
            str(table),
        ]
        log = (logs / f"agent-{index}.log").open("w")
        procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
        log.close()
    return procs


def stop_processes(procs: Sequence[subprocess.Popen], grace_s: float = 10.0) -> None:
    """SIGTERM twice (the agent's abort), then SIGKILL whatever is left; always reaps."""
    for sig in (signal.SIGTERM, signal.SIGTERM):
        for proc in procs:
            if proc.poll() is None:
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    pass
        time.sleep(0.1)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process (Linux /proc), None if unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def wait_for_agents(http: httpx.Client, count: int, procs: Sequence[subprocess.Popen]) -> None:
    """Until every agent has registered (so the search sees all its slots from the start)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        dead = [p.args for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"an agent exited before registering: {dead[0]}")
        agents = http.get(f"{API}/agents").json()
        if sum(a["device_class"] == DEVICE_CLASS for a in agents) >= count:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{count} agents did not register within 120 s")


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


# -- one run -----------------------------------------------------------------------------------
def run_one(
    agents: int,
    seed: int,
    *,
    budget: int,
    target: float,
    time_scale: float,
    table: Path,
    norm: Mapping[str, Any],
    initial: int | None,
    max_run_s: float,
) -> dict[str, Any]:
    """One fresh server, `agents` replay agents, one search until the target or its end."""
    with tempfile.TemporaryDirectory(prefix="hwnas-scaling-") as tmp:
        tmpdir = Path(tmp)
        try:
            # A benchmark on loopback: what it measures does not depend on tokens.
            with serve(tmpdir, tmpdir / "scaling.db", "--no-auth") as server:
                procs: list[subprocess.Popen] = []
                try:
                    procs = start_agents(server.url, agents, time_scale, table, tmpdir)
                    with httpx.Client(base_url=server.url, timeout=60) as http:
                        wait_for_agents(http, agents, procs)
                        return _search(
                            http,
                            server.proc,
                            agents,
                            seed,
                            budget,
                            target,
                            time_scale,
                            norm,
                            initial,
                            max_run_s,
                        )
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
    budget: int,
    target: float,
    time_scale: float,
    norm: Mapping[str, Any],
    initial: int | None,
    max_run_s: float,
) -> dict[str, Any]:
    cpu_before = cpu_seconds(server.pid)
    created = http.post(f"{API}/searches", json=search_request(seed, budget, norm, initial))
    created.raise_for_status()
    info = created.json()
    search_id, created_at = info["id"], _time(info["created_at"])
    started = time.monotonic()
    hit: dict[str, Any] | None = None
    status = "running"
    trace: dict[str, Any] = {"points": []}
    while True:
        trace = http.get(f"{API}/searches/{search_id}/hypervolume").json()
        hit = next((p for p in trace["points"] if p["hypervolume"] >= target), None)
        status = http.get(f"{API}/searches/{search_id}").json()["status"]
        if hit is not None or status != "running":
            break
        if time.monotonic() - started > max_run_s:
            break
        if server.poll() is not None:
            raise RuntimeError("the server exited during the search")
        time.sleep(POLL_S)
    cpu_after = cpu_seconds(server.pid)
    if status == "running":
        http.post(f"{API}/searches/{search_id}/cancel").raise_for_status()
    done = http.get(f"{API}/agents").json()
    points = trace["points"]
    last = points[-1] if points else None
    run: dict[str, Any] = {
        "agents": agents,
        "seed": seed,
        "search_id": search_id,
        "status_at_stop": status,
        "reached": hit is not None,
        "wall_s_to_target": None,
        "measurements_to_target": None,
        "results_to_target": None,
        "device_s_to_target": None,
        "agent_utilisation": None,
        "results_seen": last["results"] if last else 0,
        "hypervolume_seen": last["hypervolume"] if last else None,
        "server_cpu_s": (
            round(cpu_after - cpu_before, 2)
            if cpu_before is not None and cpu_after is not None
            else None
        ),
        "jobs_done_per_agent": sorted(a["jobs_done"] for a in done),
        "failures": sum(a["failures"] for a in done),
        "trace": [
            [
                p["results"],
                p["measured"],
                p["device_s"],
                round((_time(p["at"]) - created_at).total_seconds(), 3),
                round(p["hypervolume"], 6),
            ]
            for p in points
        ],
    }
    if hit is not None:
        wall = (_time(hit["at"]) - created_at).total_seconds()
        run.update(
            wall_s_to_target=round(wall, 3),
            measurements_to_target=hit["measured"],
            results_to_target=hit["results"],
            device_s_to_target=hit["device_s"],
            # share of the agents' wall time spent in (simulated) measurements; measurements
            # still in flight at the target are not counted, so it reads a little low
            agent_utilisation=round(hit["device_s"] * time_scale / (agents * wall), 3)
            if wall > 0
            else None,
        )
    return run


# -- reading the runs --------------------------------------------------------------------------
def median_or_none(values: Sequence[float | None]) -> float | None:
    """The median, counting a None (never reached) as worse than every number."""
    ranked = sorted(values, key=lambda v: math.inf if v is None else v)
    if not ranked:
        return None
    middle = len(ranked) // 2
    if len(ranked) % 2:
        return ranked[middle]
    low, high = ranked[middle - 1], ranked[middle]
    return None if low is None or high is None else (low + high) / 2


def summarise(runs: Sequence[Mapping[str, Any]], agents: Sequence[int]) -> list[dict[str, Any]]:
    rows = []
    base = median_or_none([r["wall_s_to_target"] for r in runs if r["agents"] == agents[0]])
    for n in agents:
        mine = [r for r in runs if r["agents"] == n]
        walls = [r["wall_s_to_target"] for r in mine]
        reached = [w for w in walls if w is not None]
        wall = median_or_none(walls)
        util = [r["agent_utilisation"] for r in mine if r["agent_utilisation"] is not None]
        cpu = [
            r["server_cpu_s"] / r["results_seen"]
            for r in mine
            if r["server_cpu_s"] is not None and r["results_seen"]
        ]
        rows.append(
            {
                "agents": n,
                "runs": len(mine),
                "reached": len(reached),
                "wall_s": wall,
                "wall_min": min(reached) if reached else None,
                "wall_max": max(reached) if reached else None,
                "measurements": median_or_none([r["measurements_to_target"] for r in mine]),
                "device_s": median_or_none([r["device_s_to_target"] for r in mine]),
                "utilisation": statistics.median(util) if util else None,
                "server_cpu_ms_per_result": 1000 * statistics.median(cpu) if cpu else None,
                "speedup": base / wall if base is not None and wall else None,
            }
        )
    return rows


def _fmt(value: float | None, digits: int = 1) -> str:
    return "not reached" if value is None else f"{value:.{digits}f}"


def report(
    summary: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]], args: Any
) -> tuple[str, bool | None]:
    lines = [
        f"Target hypervolume {args.target} (fixed normalisation), hwnas strategy, budget "
        f"{args.budget}, {args.seeds} seed(s), time scale {args.time_scale} "
        "(wall s per replayed device-s).",
        "",
        "| agents | runs reaching target | median wall s to target | min-max | "
        "median measurements to target | median device-s to target | agent utilisation | "
        "server CPU ms/result | speedup vs 1 agent |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in summary:
        span = (
            f"{row['wall_min']:.1f}-{row['wall_max']:.1f}" if row["wall_min"] is not None else "-"
        )
        speedup = "-" if row["speedup"] is None else f"{row['speedup']:.2f}x"
        lines.append(
            f"| {row['agents']} | {row['reached']}/{row['runs']} | {_fmt(row['wall_s'])} | "
            f"{span} | {_fmt(row['measurements'], 0)} | {_fmt(row['device_s'], 0)} | "
            f"{_fmt(row['utilisation'], 2)} | {_fmt(row['server_cpu_ms_per_result'], 0)} | "
            f"{speedup} |"
        )
    lines += ["", "Per seed (wall s to target / measurements to target):", ""]
    seeds = sorted({r["seed"] for r in runs})
    head = " | ".join(f"{n} agent{'s' if n > 1 else ''}" for n in args.agents)
    lines += [f"| seed | {head} |", "|---:|" + "---:|" * len(args.agents)]
    for seed in seeds:
        cells = []
        for n in args.agents:
            run = next((r for r in runs if r["seed"] == seed and r["agents"] == n), None)
            if run is None or run["wall_s_to_target"] is None:
                cells.append("not reached")
            else:
                cells.append(f"{run['wall_s_to_target']:.1f} / {run['measurements_to_target']}")
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    verdict: bool | None = None
    four = next((r for r in summary if r["agents"] == 4), None)
    if four is not None and args.agents[0] == 1:
        verdict = four["speedup"] is not None and four["speedup"] >= SPEEDUP_TARGET
        got = "-" if four["speedup"] is None else f"{four['speedup']:.2f}x"
        lines += [
            "",
            f"{'PASS' if verdict else 'FAIL'}: 4 agents reach hypervolume {args.target} "
            f"{got} faster than 1 agent (median wall-clock; target >= {SPEEDUP_TARGET}x)",
        ]
    return "\n".join(lines), verdict


# -- main --------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, nargs="+", default=None)
    parser.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1")
    parser.add_argument("--budget", type=int, default=None, help="max evaluations per search")
    parser.add_argument("--target", type=float, default=None, help="hypervolume to reach")
    parser.add_argument("--time-scale", type=float, default=None)
    parser.add_argument("--initial", type=int, default=None, help="hwnas initial design size")
    parser.add_argument("--max-run-s", type=float, default=None, help="give up a run after")
    parser.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    args = parser.parse_args(argv)
    preset = QUICK if args.quick else DEFAULTS
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if sorted(set(args.agents)) != args.agents or args.agents[0] < 1:
        parser.error("--agents: distinct, increasing counts >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    norm = normalisation(args.table)
    runs: list[dict[str, Any]] = []
    started = time.perf_counter()
    for seed in range(args.seeds):  # interleaved: every configuration once per seed
        for agents in args.agents:
            run = run_one(
                agents,
                seed,
                budget=args.budget,
                target=args.target,
                time_scale=args.time_scale,
                table=args.table,
                norm=norm,
                initial=args.initial,
                max_run_s=args.max_run_s,
            )
            runs.append(run)
            print(
                f"seed {seed}, {agents} agent(s): "
                + (
                    f"target in {run['wall_s_to_target']:.1f} s, "
                    f"{run['measurements_to_target']} measurements, "
                    f"{run['device_s_to_target']:.0f} device-s, "
                    f"utilisation {run['agent_utilisation']}"
                    if run["reached"]
                    else f"not reached (hypervolume {run['hypervolume_seen']})"
                )
                + f"; server CPU {run['server_cpu_s']} s for {run['results_seen']} results; "
                f"jobs per agent {run['jobs_done_per_agent']}, failures {run['failures']}",
                file=sys.stderr,
                flush=True,
            )
    summary = summarise(runs, args.agents)
    text, verdict = report(summary, runs, args)
    print(text)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "command": shlex.join(["python", "-m", "bench.agent_scaling", *(argv or sys.argv[1:])]),
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "normalisation": norm,
            "elapsed_s": round(time.perf_counter() - started, 1),
            "summary": summary,
            "verdict": verdict,
            "runs": runs,
        }
        args.json.write_text(json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
