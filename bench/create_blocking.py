"""Does creating a very large search hold up everyone else? (issue 20, "Bad input")

A real `hwnas serve` (SQLite, loopback, `--no-auth`). One thread creates an LTS search with
the largest first generation the schema allows (`population.initial` 10,000); meanwhile
another registers agents one after another (a write each) and times every registration.
Reported: how long the create took, and the registrations' latency while it ran (count,
median, max, and the five longest with when each began), beside the same registrations with
nothing else going on. `--server-pythonpath` serves the code that path finds (a worktree of
the commit before a change); `--workdir` keeps the server's log (JSON lines).

    .venv/bin/python -m bench.create_blocking [--population 10000] [--json out.json]
        [--server-pythonpath /tmp/before] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.machine import commit, machine
from bench.script import command_line, served_from, write_json
from hwnas.testing.measurements import FINGERPRINT
from hwnas.testing.servers import serve


def _register(http: httpx.Client) -> float:
    start = time.perf_counter()
    answer = http.post(
        "/api/v1/agents", json={"device_class": "bench-cpu", "fingerprint": FINGERPRINT}
    )
    answer.raise_for_status()
    return (time.perf_counter() - start) * 1000


def _summary(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "median": statistics.median(ms), "max": max(ms)} if ms else {"n": 0}


def run(args: argparse.Namespace) -> dict[str, Any]:
    request = {
        "name": "large",
        "device_class": "bench-cpu",
        "strategy": "lts",
        "budget": {"max_evaluations": args.population},
        "population": {"initial": args.population, "parents": 20},
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve(
            args.workdir or Path(tmp),
            Path(tmp) / "c.db",
            "--no-auth",
            "--log-format",
            "json",
            env=served_from(args.server_pythonpath),
        ) as server,
        httpx.Client(base_url=server.url, timeout=600) as http,
    ):
        quiet = [_register(http) for _ in range(args.quiet)]
        done = threading.Event()
        created: dict[str, Any] = {}

        def create() -> None:
            start = time.perf_counter()
            with httpx.Client(base_url=server.url, timeout=600) as own:
                answer = own.post("/api/v1/searches", json=request)
            created["s"] = time.perf_counter() - start
            created["status"] = answer.status_code
            created["queued"] = answer.json()["progress"]["queued"]
            done.set()

        creator = threading.Thread(target=create)
        created_at = time.perf_counter()
        creator.start()
        time.sleep(args.head_start)
        during, began = [], []
        while not done.is_set():
            began.append(time.perf_counter() - created_at)
            during.append(_register(http))
        creator.join()
    return {
        "command": command_line([".venv/bin/python", "-m", "bench.create_blocking"], None),
        "commit": commit(),
        "machine": machine(),
        "population": args.population,
        "server_pythonpath": args.server_pythonpath,
        "create": created,
        "register_quiet_ms": _summary(quiet),
        "register_during_create_ms": _summary(during),
        # The longest waits during the create, with when each began (s after the create did).
        "slowest_during_create": [
            {"began_s": round(t, 3), "ms": round(ms, 1)}
            for ms, t in sorted(zip(during, began, strict=True), reverse=True)[:5]
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--population", type=int, default=10_000)
    parser.add_argument("--quiet", type=int, default=50, help="registrations timed before")
    parser.add_argument("--head-start", type=float, default=0.5, help="seconds")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--workdir", type=Path, help="keep the server's log here")
    parser.add_argument("--server-pythonpath", help="serve the code this path finds")
    args = parser.parse_args(argv)
    result = run(args)
    c, q, d = result["create"], result["register_quiet_ms"], result["register_during_create_ms"]
    print(f"create: {c['s']:.1f} s (HTTP {c['status']}, {c['queued']} queued)")
    print(f"registrations, quiet: median {q['median']:.1f} ms, max {q['max']:.1f} ms (n={q['n']})")
    if d["n"]:
        print(
            f"registrations during the create: median {d['median']:.1f} ms, max "
            f"{d['max']:.1f} ms (n={d['n']})"
        )
    if args.json:
        write_json(args.json, result, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
