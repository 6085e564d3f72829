"""What one more arrival costs a large search's result table (server.services.results), in
one process, results read from a `bench/large_search.py` database (issue 20, item 4):

- a result joined to the frontier (`NoisyFront.insert`) against the rebuild from the
  frontier and it that came before, in the same run (`--results`): two tables are built
  from all but the last `--results` results, then each of those is added to both,
  alternating which goes first: one table joins it, the other rebuilds (`frontier_join.joining`).
  Both must end with the same frontier;
- `--readings`: results as agents send them, each bringing the agent's latest reading of
  the reference architecture (a new one every 5 results, as agents take them): a new
  reading refits the noise model, and a refit moves every interval (server.services.results,
  `evidence_used`). The database's results carry no readings, so they are given some: a
  reading every 5 results, about 10 ms and 50 MB, moving by a few percent;
- `--again N`: N re-measurements of frontier points (each a few percent off its first
  value), as a search at its budget queues them (server.services.remeasure), and then the
  choice of the next ones (`remeasure.choose`, 2 free slots).

Prints the build time and the per-arrival medians and maxima. The same script run from
another checkout's directory (with its own `PYTHONPATH`) times that checkout's table.

    .venv/bin/python -m bench.table_growth --db /tmp/ds/large-100000.db [--limit 20000]
        [--results 20] [--readings 40] [--again 40]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from bench.frontier_join import joining
from bench.machine import commit
from bench.script import command_line
from server.services import remeasure
from server.services.result_tables import _read
from server.services.results import Again, ResultTable, Told
from server.settings import Settings
from server.store.store import Store, get_search

READINGS_EVERY = 5


def _give_readings(rows: list[Told], seed: int, start: int = 0) -> None:
    """A reading every READINGS_EVERY results from `start` on, each result carrying the
    latest (as an agent sends them)."""
    for i, t in enumerate(rows, start=start):
        n = i // READINGS_EVERY
        wobble = random.Random(seed * 1_000_003 + n)
        t.reference = (
            10.0 * (1 + 0.02 * wobble.gauss(0, 1)),
            50.0 * (1 + 0.005 * wobble.gauss(0, 1)),
        )
        t.reference_key = ("bench-agent", f"{n:08d}")


def _ms(seconds: list[float]) -> str:
    ms = sorted(1000 * s for s in seconds)
    mean, median = statistics.fmean(ms), statistics.median(ms)
    return f"median {median:.1f} ms, mean {mean:.1f} ms, max {ms[-1]:.1f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--search", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="only the first N results (0: all)")
    parser.add_argument("--results", type=int, default=20, help="joined against rebuilt")
    parser.add_argument("--readings", type=int, default=0, help="results with readings timed")
    parser.add_argument("--again", type=int, default=0, help="re-measurements timed")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    store = Store(Settings(database_url=f"sqlite:///{args.db}"))
    with store.read() as session:
        search = get_search(session, args.search)
        request = search.parsed_request
        started = time.perf_counter()
        rows = _read(session, search, 0)
        read_s = time.perf_counter() - started
    store.close()
    if args.limit:
        rows = rows[: args.limit]
    print(f"$ {command_line(['python', '-m', 'bench.table_growth'], argv)}  (commit {commit()})")
    print(f"read {len(rows):,} results: {read_s:.1f} s")
    same = True
    if args.results:
        same = _join_against_rebuild(request, rows, args.results)
    if args.readings or args.again:
        _arrivals(request, rows, args)
    return 0 if same else 1


def _join_against_rebuild(request, rows: list[Told], count: int) -> bool:
    head, tail = rows[:-count], rows[-count:]
    tables, built = {}, {}
    for name in ("join", "rebuild"):
        started = time.perf_counter()
        tables[name] = ResultTable(1, request)
        tables[name].add(head)
        built[name] = time.perf_counter() - started
    times: dict[str, list[float]] = {"join": [], "rebuild": []}
    for i, t in enumerate(tail):
        for name in ("join", "rebuild") if i % 2 == 0 else ("rebuild", "join"):
            with joining(together=name == "rebuild"):
                started = time.perf_counter()
                tables[name].add([t])
                times[name].append(time.perf_counter() - started)
    same = [t.arch_id for t in tables["join"].frontier] == [
        t.arch_id for t in tables["rebuild"].frontier
    ] and tables["join"].uncertainty == tables["rebuild"].uncertainty
    print(f"table built from {len(head):,}: {built['join']:.1f} s, {built['rebuild']:.1f} s")
    print(f"frontier beyond noise: {len(tables['join'].frontier):,} members")
    for name, values in times.items():
        print(f"{name}: {_ms(values)} per result")
    ratio = statistics.median(times["rebuild"]) / statistics.median(times["join"])
    print(f"rebuild / join: {ratio:.0f}x; same frontier: {same}")
    return same


def _arrivals(request, rows: list[Told], args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    head, tail = rows[: len(rows) - args.readings], rows[len(rows) - args.readings :]
    _give_readings(head, args.seed)
    started = time.perf_counter()
    table = ResultTable(1, request)
    table.add(head)
    print(f"table with readings built from {len(head):,}: {time.perf_counter() - started:.1f} s")
    print(f"frontier beyond noise: {len(table.frontier):,} members")
    if tail:
        _give_readings(tail, args.seed, start=len(head))
        times = []
        for t in tail:
            started = time.perf_counter()
            table.add([t])
            times.append(time.perf_counter() - started)
        print(f"a result with the agent's latest reading: {_ms(times)} ({len(tail)} results)")
    times = []
    for j in range(args.again):
        point = table.frontier[rng.randrange(len(table.frontier))]
        again = Again(
            id=j + 1,
            arch_id=point.arch_id,
            latency=point.values["latency_ms"] * (1 + 0.05 * rng.gauss(0, 1)),
            memory=point.values["memory_mb"] * (1 + 0.01 * rng.gauss(0, 1)),
            busy=False,
            reference=None,
            reference_key=None,
        )
        started = time.perf_counter()
        table.add([], [again])
        times.append(time.perf_counter() - started)
    if times:
        print(f"a re-measurement of a frontier point: {_ms(times)} ({len(times)} of them)")
        # What a search at its budget does next: choose the next re-measurements (2 slots).
        times = []
        for _ in range(9):
            started = time.perf_counter()
            remeasure.choose(table, request.noise.max_measurements, most=2)
            times.append(time.perf_counter() - started)
        print(
            f"choosing the next 2 re-measurements: {_ms(times)} ({len(table.crowded()):,} crowded)"
        )


if __name__ == "__main__":
    sys.exit(main())
