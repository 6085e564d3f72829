"""What new results cost a result table's frontier: joined one at a time, or together (issue 20).

A result table (server.services.results.ResultTable) holds `--rows` synthetic results of three
objectives (decoder parameters; latency and memory that grow with them, scattered, so that the
noise keeps many points on the frontier beyond noise). Then `--new` more join it, with the
noise model unchanged, two ways: one at a time (`NoisyFront.insert` each) and together (the
front built from the members and them, `NoisyFront.of`). Each is the best of `--repeats`
copies of the same table, in process CPU; the two must make the same frontier.
`joins_together` decides between the two by a cost model whose constants these readings give:
a join's fixed and per-member cost, a build's.

    .venv/bin/python -m bench.frontier_join [--rows 400,1500,3000,10000,40000] [--new 8,32,128]
        [--json bench/results/frontier_join.json]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import random
import time
from collections.abc import Iterator
from pathlib import Path

from archvocab.wire import SearchCreate
from bench.machine import commit, machine
from bench.script import command_line, write_json
from server.services import results
from server.services.results import ResultTable, Told

REQUEST = SearchCreate(objectives=["decoder_params", "latency_ms", "memory_mb"])


def told(i: int, rng: random.Random, reading: bool, busy: bool = False) -> Told:
    """A synthetic result (also the result tables' tests'): its latency and memory grow with
    its size, with enough scatter to leave some points off the frontier; with `reading`, a
    reference reading taken after the earlier ones."""
    params = rng.uniform(1e6, 1e8)
    return Told(
        arch_id=f"arch{i}",
        seq=i + 1,
        generation=0,
        status="measured",
        reused=False,
        feasible=True,
        values={
            "decoder_params": params,
            "total_params": 2 * params,
            "latency_ms": params / 1e6 * rng.uniform(0.7, 1.3),
            "memory_mb": params / 1e5 * rng.uniform(0.8, 1.2),
        },
        hypervolume=None,
        agent_id="agent",
        spec={},
        device_s=1.0,
        finished_at=None,
        prediction=None,
        busy=busy,
        reference=(10.0 * rng.uniform(0.97, 1.03), 50.0) if reading else None,
        reference_key=("agent", f"t{i:06d}") if reading else None,  # in time order
    )


@contextlib.contextmanager
def joining(together: bool) -> Iterator[None]:
    """While it lasts, new results join a result table's frontier one way only: together
    (built from the members and them) or one at a time, whatever `joins_together` says."""
    decide = results.joins_together
    results.joins_together = lambda new, members: together  # noqa: ARG005
    try:
        yield
    finally:
        results.joins_together = decide


def joined(table: ResultTable, new: list[Told], together: bool, repeats: int) -> tuple:
    """The best of `repeats` joins of `new` into copies of `table`, one way: (process CPU in
    ms, the frontier it made, as arch ids)."""
    best = float("inf")
    with joining(together):
        for _ in range(repeats):
            copied = copy.deepcopy(table)
            start = time.process_time()
            copied.add(new)
            best = min(best, time.process_time() - start)
    return 1000 * best, [t.arch_id for t in copied.frontier]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="400,1500,3000,10000,40000")
    parser.add_argument("--new", default="8,32,128")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    runs = []
    for n in (int(r) for r in args.rows.split(",")):
        news = [int(k) for k in args.new.split(",")]
        rng = random.Random(args.seed)
        # Readings only among the first rows: the new ones leave the noise model where it is.
        rows = [told(i, rng, reading=i < n and i % 50 == 0) for i in range(n + max(news))]
        table = ResultTable(1, REQUEST)
        table.add(rows[:n])
        members = len(table.frontier)
        for k in news:
            (one, front), (together, front_together) = (
                joined(table, rows[n : n + k], way, args.repeats) for way in (False, True)
            )
            if front != front_together:
                raise SystemExit(f"{n} rows, {k} new: the two ways made different frontiers")
            chosen = results.joins_together(k, members)
            runs.append(
                {
                    "rows": n,
                    "members": members,
                    "new": k,
                    "one_at_a_time_ms": round(one, 2),
                    "together_ms": round(together, 2),
                    "chosen": "together" if chosen else "one at a time",
                }
            )
            print(
                f"{n:>6} rows, {members:>6} members, {k:>4} new: one at a time {one:8.2f} ms,"
                f" together {together:8.2f} ms; chosen: {runs[-1]['chosen']}",
                flush=True,
            )
    if args.json:
        payload = {
            "command": command_line(["python", "-m", "bench.frontier_join"], argv),
            "commit": commit(),
            "machine": machine(),
            "runs": runs,
        }
        write_json(args.json, payload, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
