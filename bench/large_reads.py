"""The reads of one 100,000-candidate search (issue 20, item 4), this checkout against a
baseline checkout in the same run.

One finished search in a SQLite file (`bench/large_search.py`, reused from `--workdir`), one
`hwnas serve --no-auth` per checkout over its own copy of the file (a server may migrate it),
both up at once. The first reads of each (/searches, then /searches/{id}) build its result table
(`cold`); then for
`--repeats` rounds, the checkouts alternating which goes first, every read below is timed on
loopback (wall time with the body read, gzip as a browser asks) with its wire size:

- `search`: /searches/{id}, the search page's facts;
- `pareto_top`: /pareto?order_by=latency_ms&limit=20, a choice among the frontier;
- `pareto_page`: /pareto?order_by=latency_ms&limit=1000&offset=F/2, a page from the middle of
  the frontier F in that order (reading the whole frontier page by page);
- `pick`: /pick?order_by=latency_ms;
- `poll`: /points?after=N-10 with the `frontier_since` token of the previous answer, the
  dashboard's poll (a checkout that does not know the token answers with the whole frontier);
- `points`: /points, the page's first load;
- `pareto`: /pareto, the whole frontier with every measurement (`--whole` rounds only: slow).

    .venv/bin/python -m bench.large_reads --baseline-src /tmp/before [--candidates 100000]
        [--repeats 5] [--whole 2] [--workdir DIR] [--json bench/results/large_reads.json]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench.dashboard_scale import build, client, find_search
from bench.machine import commit, machine
from bench.script import command_line, shown, write_json
from hwnas.testing.ports import free_port, loopback_url
from hwnas.testing.servers import wait_healthy

HERE = Path(__file__).resolve().parent
PAGE = 1000  # frontier points per page of /pareto
READS = {
    "search": "/api/v1/searches/{id}",
    "pareto_top": "/api/v1/searches/{id}/pareto?order_by=latency_ms&limit=20",
    "pareto_page": f"/api/v1/searches/{{id}}/pareto?order_by=latency_ms&limit={PAGE}"
    "&offset={offset}",
    "pick": "/api/v1/searches/{id}/pick?order_by=latency_ms",
    "poll": "/api/v1/searches/{id}/points?after={after}&frontier_since={token}",
    "points": "/api/v1/searches/{id}/points",
}
WHOLE = {"pareto": "/api/v1/searches/{id}/pareto"}


@contextlib.contextmanager
def server(src: Path, db: Path, log: Path) -> Iterator[str]:
    """`hwnas serve` of the checkout at `src` (its code first on the path) over `db`."""
    port = free_port()
    argv = [sys.executable, "-m", "hwnas", "serve", "--no-auth", "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(src)}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*argv, "--db", str(db)], cwd=src, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_healthy(loopback_url(port), proc, log)
        yield loopback_url(port)
    finally:
        proc.terminate()
        proc.wait(60)


def timed(http: httpx.Client, path: str) -> tuple[float, float, httpx.Response]:
    """(ms, wire kB, response) of one GET."""
    started = time.perf_counter()
    response = http.get(path).raise_for_status()
    return 1000 * (time.perf_counter() - started), response.num_bytes_downloaded / 1000, response


def run(args: argparse.Namespace, workdir: Path) -> dict:
    source = build(workdir, args.candidates, "large")
    checkouts = {"current": HERE.parent, "baseline": Path(args.baseline_src).resolve()}
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in checkouts}
    with contextlib.ExitStack() as stack:
        https, state = {}, {}
        for name, src in checkouts.items():
            db = workdir / f"{name}.db"
            shutil.copyfile(source, db)
            url = stack.enter_context(server(src, db, workdir / f"{name}.log"))
            http = stack.enter_context(client(url))
            started = time.perf_counter()  # the first reads build the result table
            search_id = find_search(http, args.candidates)
            timed(http, f"/api/v1/searches/{search_id}")
            samples[name]["cold ms"] = [1000 * (time.perf_counter() - started)]
            print(f"{name}: cold {samples[name]['cold ms'][0]:.0f} ms", flush=True)
            last = timed(http, f"/api/v1/searches/{search_id}/points")[2].json()
            https[name] = http
            state[name] = {"id": search_id, "after": max(0, last["last"] - 10)}
            state[name]["token"] = last.get("frontier_token", "")
            state[name]["offset"] = len(last["frontier"]) // 2  # a page from mid-order
        names = list(checkouts)
        for round_ in range(args.repeats):
            for name in names if round_ % 2 == 0 else names[::-1]:
                reads = {**READS, **(WHOLE if round_ < args.whole else {})}
                for read, template in reads.items():
                    ms, kb, response = timed(https[name], template.format(**state[name]))
                    samples[name].setdefault(f"{read} ms", []).append(ms)
                    samples[name].setdefault(f"{read} kB", []).append(kb)
                    if read == "poll":
                        token = response.json().get("frontier_token")
                        state[name]["token"] = token or state[name]["token"]
            print(f"round {round_ + 1}/{args.repeats} done", flush=True)
    medians = {
        name: {key: statistics.median(values) for key, values in by_key.items()}
        for name, by_key in samples.items()
    }
    return {
        "command": command_line(["python", "-m", "bench.large_reads"], args.argv),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "commit": commit(),
        "baseline_commit": _commit_of(checkouts["baseline"]),
        "candidates": args.candidates,
        "repeats": args.repeats,
        "medians": medians,
        "samples": samples,
    }


def _commit_of(src: Path) -> str:
    result = subprocess.run(
        ["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return result.stdout.strip() or "unknown"


def print_table(result: dict) -> None:
    current, baseline = result["medians"]["current"], result["medians"]["baseline"]
    print("| read | baseline ms | current ms | baseline kB | current kB |")
    print("|---|---|---|---|---|")
    for read in ("cold", *READS, *WHOLE):
        if f"{read} ms" not in current:
            continue
        cells = [f"{d[f'{read} ms']:.0f}" for d in (baseline, current)]
        sizes = [
            f"{d[f'{read} kB']:,.1f}" if f"{read} kB" in d else "" for d in (baseline, current)
        ]
        print(f"| {read} | {' | '.join(cells)} | {' | '.join(sizes)} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-src", required=True, help="a checkout to compare with")
    parser.add_argument("--candidates", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--whole", type=int, default=2, help="rounds that read all of /pareto")
    parser.add_argument("--workdir", help="keeps the built database between runs")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "large_reads.json")
    args = parser.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    with contextlib.ExitStack() as stack:
        workdir = (
            Path(args.workdir)
            if args.workdir
            else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="large_reads-")))
        )
        workdir.mkdir(parents=True, exist_ok=True)
        result = run(args, workdir)
    write_json(args.json, result, indent=1)
    print_table(result)
    print(f"wrote {shown(args.json)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
