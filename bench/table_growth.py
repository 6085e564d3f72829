"""What one more result costs a large search's result table (server.services.results): joined
to the frontier (`NoisyFront.extend`) against the rebuild from the frontier and it that came
before (issue 20, item 4), in the same run.

The search's results are read from a `bench/large_search.py` database; two tables are built
from all but the last `--results` of them, then each of those is added to both, alternating
which goes first: one table joins it, the other (`JOIN_AT_MOST = 0`) rebuilds. Both must end
with the same frontier. Prints the build time and the per-result medians.

    .venv/bin/python -m bench.table_growth --db /tmp/ds/large-100000.db [--results 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from bench.machine import commit
from bench.script import command_line
from server.services import results
from server.services.result_tables import _read
from server.services.results import ResultTable
from server.settings import Settings
from server.store.store import Store, get_search


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--search", type=int, default=1)
    parser.add_argument("--results", type=int, default=20)
    args = parser.parse_args(argv)
    store = Store(Settings(database_url=f"sqlite:///{args.db}"))
    with store.read() as session:
        search = get_search(session, args.search)
        request = search.parsed_request
        started = time.perf_counter()
        rows = _read(session, search, 0)
        read_s = time.perf_counter() - started
    store.close()
    head, tail = rows[: -args.results], rows[-args.results :]
    tables, built = {}, {}
    for name in ("join", "rebuild"):
        started = time.perf_counter()
        tables[name] = ResultTable(args.search, request)
        tables[name].add(head)
        built[name] = time.perf_counter() - started
    times: dict[str, list[float]] = {"join": [], "rebuild": []}
    join_at_most = results.JOIN_AT_MOST
    for i, t in enumerate(tail):
        for name in ("join", "rebuild") if i % 2 == 0 else ("rebuild", "join"):
            results.JOIN_AT_MOST = join_at_most if name == "join" else 0
            started = time.perf_counter()
            tables[name].add([t])
            times[name].append(time.perf_counter() - started)
    results.JOIN_AT_MOST = join_at_most
    same = [t.arch_id for t in tables["join"].frontier] == [
        t.arch_id for t in tables["rebuild"].frontier
    ] and tables["join"].uncertainty == tables["rebuild"].uncertainty
    print(f"$ {command_line(['python', '-m', 'bench.table_growth'], argv)}  (commit {commit()})")
    print(f"read {len(rows):,} results: {read_s:.1f} s")
    print(f"table built from {len(head):,}: {built['join']:.1f} s, {built['rebuild']:.1f} s")
    print(f"frontier beyond noise: {len(tables['join'].frontier):,} members")
    for name, values in times.items():
        ms = sorted(1000 * v for v in values)
        print(f"{name}: median {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms per result")
    ratio = statistics.median(times["rebuild"]) / statistics.median(times["join"])
    print(f"rebuild / join: {ratio:.0f}x; same frontier: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
