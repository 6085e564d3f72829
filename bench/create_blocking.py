"""Does a very large proposal round hold up everyone else? (issue 20, "Bad input")

A real `hwnas serve` (SQLite, loopback, `--no-auth`). One thread starts a large round of an LTS
search; meanwhile another registers agents one after another (a write each) and times every
registration. Two rounds, each the largest the schema allows by default:

- `--round create`: a search created with a first generation of `--population` (10,000);
- `--round next`: a search whose first generation of `--initial` an agent measures, bred to a
  next generation of `--population` (up to 20,000: `mutations` and `crossovers` half each).
  Timed from the result that completes the first generation until the next one is queued.

Reported: how long the round took, and the registrations' latency while it ran (count,
median, max, and the five longest with when each began), beside the same registrations with
nothing else going on. `--server-pythonpath` serves the code that path finds (a worktree of
the commit before a change); `--workdir` keeps the server's log (JSON lines). With
`--part-trace` the server times each part of the round it writes, step by step
(bench/part_trace), and the report adds the parts' holds of the write lock and what the
longest had beside them (full collections, checkpoints). With `--idle-claimers N`, N agents
of a class no search serves claim in a tight loop meanwhile, each from a process of its own
(an agent that claims in a tight loop; its claims keep the server's other threads at the
interpreter while the round is written).

    .venv/bin/python -m bench.create_blocking [--round create|next] [--population 10000]
        [--json out.json] [--server-pythonpath /tmp/before] [--workdir DIR] [--part-trace]
        [--idle-claimers 0]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.load_checks import latency_stats
from bench.machine import commit, machine
from bench.script import command_line, served_from, write_json
from hwnas.testing.measurements import FINGERPRINT, synthetic_measurement
from hwnas.testing.servers import serve

PART_TRACE = Path(__file__).resolve().parent / "part_trace"


def _register(http: httpx.Client) -> float:
    start = time.perf_counter()
    answer = http.post(
        "/api/v1/agents", json={"device_class": "bench-cpu", "fingerprint": FINGERPRINT}
    )
    answer.raise_for_status()
    return (time.perf_counter() - start) * 1000


def claim_idly(url: str, ready: Any, stop: Any, claims: Any) -> None:
    """An agent of a class no search serves, claiming in a tight loop until `stop` is set,
    after it says it is `ready` (registered, one claim made); how many claims it made during
    the loop goes to `claims`."""
    with httpx.Client(base_url=url, timeout=600) as http:
        body = {"device_class": "nobodys-class", "fingerprint": FINGERPRINT}
        agent = http.post("/api/v1/agents", json=body).json()["agent_id"]
        http.post(f"/api/v1/agents/{agent}/claim").raise_for_status()
        ready.put(agent)
        made = 0
        while not stop.is_set():
            http.post(f"/api/v1/agents/{agent}/claim").raise_for_status()
            made += 1
    claims.put(made)


def _summary(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "median": statistics.median(ms), "max": max(ms)} if ms else {"n": 0}


def _search(args: argparse.Namespace) -> dict[str, Any]:
    if args.round == "create":
        population = {"initial": args.population, "parents": 20}
        budget = args.population
    else:
        half = args.population // 2
        population = {
            "initial": args.initial,
            "parents": 20,
            "mutations": half,
            "crossovers": args.population - half,
        }
        budget = args.initial + args.population
    return {
        "name": "large",
        "device_class": "bench-cpu",
        "strategy": "lts",
        "budget": {"max_evaluations": budget},
        "population": population,
    }


def _measure_all_but_one(http: httpx.Client, jobs: int) -> tuple[str, dict]:
    """An agent measures all but the last of the first generation's `jobs`: its id and the
    last job's lease, unreported."""
    answer = http.post(
        "/api/v1/agents", json={"device_class": "bench-cpu", "fingerprint": FINGERPRINT}
    )
    answer.raise_for_status()
    agent = answer.json()["agent_id"]
    leases = []
    for _ in range(jobs):
        claimed = http.post(f"/api/v1/agents/{agent}/claim")
        assert claimed.status_code == 200, claimed.text
        leases.append(claimed.json())
    for lease in leases[:-1]:
        _report(http, agent, lease)
    return agent, leases[-1]


def _report(http: httpx.Client, agent: str, lease: dict) -> None:
    body = {
        "agent_id": agent,
        "lease_id": lease["lease_id"],
        "measurement": synthetic_measurement(lease["spec"]),
    }
    http.post(f"/api/v1/jobs/{lease['job_id']}/result", json=body).raise_for_status()


def _server_env(args: argparse.Namespace, traces: Path) -> dict[str, str] | None:
    """The server's environment: the code `--server-pythonpath` finds, and with
    `--part-trace` its parts timed into the folder `traces` (bench/part_trace)."""
    env = served_from(args.server_pythonpath)
    if not args.part_trace:
        return env
    env = dict(env or {})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PART_TRACE), env.get("PYTHONPATH")]))
    env["HWNAS_PART_TRACE"] = str(traces)
    return env


def part_holds(traces: Path) -> dict[str, Any]:
    """What bench/part_trace logged: the parts' holds of the write lock and their steps (ms,
    `latency_stats`), the longest the write-ahead log was after a part (`log_pages_max`,
    SQLite), and the five longest with the collections and checkpoints that ran while each
    held it (start after the part took the lock, and length, ms)."""
    entries = [
        json.loads(line)
        for log in traces.glob("parts-*.log")
        for line in log.read_text().splitlines()
    ]
    parts = [e for e in entries if "part" in e]
    if not parts:
        return {"n": 0}
    others = [e for e in entries if "part" not in e]
    steps = sorted({key for part in parts for key in part if key.endswith("_ms")})
    summary: dict[str, Any] = {"n": len(parts)}
    for step in steps:
        summary[step] = latency_stats([part.get(step, 0.0) for part in parts])
    longest = []
    for part in sorted(parts, key=lambda p: -p["held_ms"])[:5]:
        took = part["part"] + part["wait_ms"] / 1000
        left = took + part["held_ms"] / 1000
        beside = [
            {"what": e["what"], "after_ms": round((e["began"] - took) * 1000, 1), "ms": e["ms"]}
            for e in others
            if e["began"] < left and e["began"] + e["ms"] / 1000 > took
        ]
        times = {key: round(value, 2) for key, value in part.items() if key != "part"}
        longest.append({**times, "beside": beside})
    summary["longest"] = longest
    pages = [part["log_pages"] for part in parts if "log_pages" in part]
    if pages:
        summary["log_pages_max"] = max(pages)
    return summary


def run(args: argparse.Namespace) -> dict[str, Any]:
    request = _search(args)
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve(
            args.workdir or Path(tmp),
            Path(tmp) / "c.db",
            "--no-auth",
            "--log-format",
            "json",
            env=_server_env(args, Path(tmp)),
        ) as server,
        httpx.Client(base_url=server.url, timeout=600) as http,
    ):
        quiet = [_register(http) for _ in range(args.quiet)]
        if args.round == "next":
            created = http.post("/api/v1/searches", json=request)
            created.raise_for_status()
            search_id = created.json()["id"]
            agent, last = _measure_all_but_one(http, args.initial)
        done = threading.Event()
        round_: dict[str, Any] = {}

        def create() -> None:
            start = time.perf_counter()
            try:
                with httpx.Client(base_url=server.url, timeout=600) as own:
                    answer = own.post("/api/v1/searches", json=request)
                round_["s"] = time.perf_counter() - start
                round_["status"] = answer.status_code
                round_["queued"] = answer.json()["progress"]["queued"]
            finally:
                done.set()

        def next_generation() -> None:
            start = time.perf_counter()
            failed: list[int] = []  # the progress's answers other than 200, asked again
            try:
                with httpx.Client(base_url=server.url, timeout=600) as own:
                    _report(own, agent, last)
                    round_["result_s"] = time.perf_counter() - start
                    while time.perf_counter() - start < 600:  # until the round is queued
                        answer = own.get(f"/api/v1/searches/{search_id}")
                        if answer.status_code != 200:
                            failed.append(answer.status_code)
                        elif answer.json()["progress"]["queued"] >= args.population:
                            break
                        time.sleep(0.05)
                    round_["queued"] = own.get(f"/api/v1/searches/{search_id}").json()["progress"][
                        "queued"
                    ]
                round_["s"] = time.perf_counter() - start
                round_["status"] = 200
            finally:
                round_["progress_errors"] = failed
                done.set()

        spawn = multiprocessing.get_context("spawn")
        ready, stop, claims = spawn.Queue(), spawn.Event(), spawn.Queue()
        claimers = [
            spawn.Process(target=claim_idly, args=(server.url, ready, stop, claims))
            for _ in range(args.idle_claimers)
        ]
        for claimer in claimers:
            claimer.start()
        for _ in claimers:
            ready.get(timeout=120)
        creator = threading.Thread(target=create if args.round == "create" else next_generation)
        created_at = time.perf_counter()
        creator.start()
        time.sleep(args.head_start)
        during, began = [], []
        while not done.is_set():
            began.append(time.perf_counter() - created_at)
            during.append(_register(http))
        creator.join()
        stop.set()
        idle_claims = [claims.get(timeout=60) for _ in claimers]
        for claimer in claimers:
            claimer.join()
        parts = part_holds(Path(tmp)) if args.part_trace else None
    return {
        "command": command_line([".venv/bin/python", "-m", "bench.create_blocking"], None),
        "commit": commit(),
        "machine": machine(),
        "round": args.round,
        "population": args.population,
        "initial": args.initial if args.round == "next" else args.population,
        "server_pythonpath": args.server_pythonpath,
        "create": round_,
        "idle_claimers": args.idle_claimers,
        "idle_claims_made": idle_claims,
        "register_quiet_ms": _summary(quiet),
        "register_during_create_ms": _summary(during),
        # The longest waits during the round, with when each began (s after it did).
        "slowest_during_create": [
            {"began_s": round(t, 3), "ms": round(ms, 1)}
            for ms, t in sorted(zip(during, began, strict=True), reverse=True)[:5]
        ],
        **({"part_holds": parts} if parts is not None else {}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--round", choices=["create", "next"], default="create")
    parser.add_argument("--population", type=int, default=None, help="the large round's size")
    parser.add_argument("--initial", type=int, default=20, help="first generation (--round next)")
    parser.add_argument("--quiet", type=int, default=50, help="registrations timed before")
    parser.add_argument("--head-start", type=float, default=0.5, help="seconds")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--workdir", type=Path, help="keep the server's log here")
    parser.add_argument("--server-pythonpath", help="serve the code this path finds")
    parser.add_argument(
        "--idle-claimers", type=int, default=0, help="agents claiming in a tight loop meanwhile"
    )
    parser.add_argument(
        "--part-trace", action="store_true", help="time the round's parts (bench/part_trace)"
    )
    args = parser.parse_args(argv)
    if args.population is None:  # the schema's largest
        args.population = 10_000 if args.round == "create" else 20_000
    result = run(args)
    c, q, d = result["create"], result["register_quiet_ms"], result["register_during_create_ms"]
    print(f"{args.round}: {c['s']:.1f} s (HTTP {c['status']}, {c['queued']} queued)")
    if c.get("progress_errors"):
        print(f"the round's progress answered {c['progress_errors']} meanwhile")
    print(f"registrations, quiet: median {q['median']:.1f} ms, max {q['max']:.1f} ms (n={q['n']})")
    if d["n"]:
        print(
            f"registrations during the round: median {d['median']:.1f} ms, max "
            f"{d['max']:.1f} ms (n={d['n']})"
        )
    if result.get("part_holds", {}).get("n"):
        held = result["part_holds"]["held_ms"]
        print(
            f"its {result['part_holds']['n']} parts held the write lock: median "
            f"{held['p50']:.1f} ms, p90 {held['p90']:.1f} ms, max {held['max']:.1f} ms"
        )
        holds = result["part_holds"]
        if "driver_commit_ms" in holds:
            log = holds.get("log_pages_max")  # SQLite's alone
            print(
                f"  the driver's COMMIT in them: max {holds['driver_commit_ms']['max']:.1f} ms"
                + ("" if log is None else f"; the log at most {log:,} pages after one")
            )
    if args.json:
        write_json(args.json, result, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
