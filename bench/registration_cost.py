"""What an agent's registration costs a real server (issue 20, item 5: a fleet registering at
once queues its first claims behind the registrations, each a write transaction of its own).

A real `hwnas serve` (SQLite, authentication on, JSON log) takes `--per-round` registrations
one after another over loopback, with its enrollment token, as `hwnas agent` sends them; the
server process's CPU (from /proc) per registration is taken per round. /proc counts in clock
ticks (10 ms), so a round goes on, `--per-round` registrations at a time, until the server's
clock has moved `MIN_TICKS` ticks: each figure is then within 5% of what the clock can tell. With
`--baseline-pythonpath` a second server runs another checkout's code (a worktree), and the
rounds alternate between the two, so that the machine's drift falls on both. Reported: the
median of the rounds for each, and the median of the per-round ratios.

    .venv/bin/python -m bench.registration_cost [--rounds 6] [--per-round 300]
        [--baseline-pythonpath /tmp/before] [--json bench/results/registration_cost.json]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import statistics
import sys
import tempfile
from pathlib import Path

import httpx

from bench.load_agents import DEVICE_CLASS, FINGERPRINT
from bench.machine import commit, machine, tree_cpu_s
from bench.script import command_line, served_from, write_json
from hwnas.testing.servers import RunningServer, serve

HERE = Path(__file__).resolve().parent
MIN_TICKS = 20


def register_round(
    server: RunningServer, http: httpx.Client, numbers: itertools.count, n: int
) -> float:
    """Register new agents n at a time until the server's CPU clock has moved MIN_TICKS ticks
    (a handful of registrations can fit in one tick and read as free); the server's CPU per
    registration, in ms."""
    enroll = {"authorization": f"Bearer {server.procs.agent_token}"}
    least_s = MIN_TICKS / os.sysconf("SC_CLK_TCK")
    before, done = tree_cpu_s(server.proc.pid), 0
    while (used := tree_cpu_s(server.proc.pid) - before) < least_s or not done:
        for i in itertools.islice(numbers, n):
            fingerprint = {**FINGERPRINT, "hostname": f"agent-{i:06d}"}
            body = {"device_class": DEVICE_CLASS, "name": f"agent-{i}", "fingerprint": fingerprint}
            http.post("/api/v1/agents", json=body, headers=enroll).raise_for_status()
        done += n
    return 1000 * used / done


def run(args: argparse.Namespace, argv: list[str] | None) -> dict:
    versions = {"this": None}
    if args.baseline_pythonpath:
        versions["baseline"] = served_from(args.baseline_pythonpath)
    rounds: dict[str, list[float]] = {name: [] for name in versions}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        served = {}
        for name, env in versions.items():
            folder = Path(tmp) / name
            folder.mkdir()
            server = stack.enter_context(
                serve(folder, folder / "r.db", "--log-format", "json", name=name, env=env)
            )
            http = stack.enter_context(httpx.Client(base_url=server.url, timeout=60))
            numbers = itertools.count()
            register_round(server, http, numbers, 20)  # imports and caches warm
            served[name] = (server, http, numbers)
        for r in range(args.rounds):
            names = list(versions) if r % 2 == 0 else list(reversed(versions))
            for name in names:
                rounds[name].append(register_round(*served[name], args.per_round))
    out: dict = {
        "command": command_line(["python", "-m", "bench.registration_cost"], argv),
        "commit": commit(),
        "machine": machine(),
        "per_round": args.per_round,
        "cpu_ms_per_registration": {
            name: {"median": round(statistics.median(ms), 2), "rounds": [round(v, 2) for v in ms]}
            for name, ms in rounds.items()
        },
    }
    if args.baseline_pythonpath:
        ratios = [a / b for a, b in zip(rounds["this"], rounds["baseline"], strict=True)]
        out["baseline_pythonpath"] = args.baseline_pythonpath
        out["median_ratio"] = round(statistics.median(ratios), 3)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-round", type=int, default=300)
    parser.add_argument("--baseline-pythonpath", help="another checkout, served the same way")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "registration_cost.json")
    args = parser.parse_args(argv)
    out = run(args, argv)
    for name, figures in out["cpu_ms_per_registration"].items():
        print(f"{name}: {figures['median']:.2f} ms of server CPU per registration")
    if "median_ratio" in out:
        print(f"median of the per-round ratios, this / baseline: {out['median_ratio']:.3f}")
    write_json(args.json, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
