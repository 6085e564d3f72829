"""What a stale engine costs a server process: a full restore against a catch-up (issue 18).

With several server processes on one store, a result often lands on a process whose cached
engine another process has moved past. Before, that process replayed the search's whole
history (`Engine.restore`); now it tells its engine only what is new (`Engine.catch_up`: the
results of its pending candidates, then the proposals after its last). This times both, for
each strategy, at several history lengths: a search of GPT-2 (LTS's space) run to `n` told
results with synthetic latency and memory (smooth in the parameter count), then

- restore: rebuild from all `n` records;
- catch-up: an engine restored one result behind (that candidate pending) is told it.

Both are engine work only; the store reads add to each (the restore reads n rows, the
catch-up the new ones). Medians of `--repeats` interleaved timings.

    .venv/bin/python bench/engine_catch_up.py [--sizes 200 1000] [--repeats 5] [--json F]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from archvocab.registry import ArchSpec, parse_space
from archvocab.wire import Constraints, Population
from proxies.registry import zero_cost_scores
from search.engine import Engine
from search.records import PENDING
from search.strategies import ENGINES

OBJECTIVES = ["decoder_params", "latency_ms", "memory_mb"]
STRATEGIES = ("hwnas", "lts", "nsga2")


def synthetic(spec: ArchSpec) -> dict[str, float]:
    """Latency and memory that grow with the parameter count, with a spec-dependent wobble
    so that the frontier is not a line."""
    params = float(zero_cost_scores(spec)["decoder_params"])
    wobble = 1 + 0.1 * math.sin(int(spec.arch_id[:8], 16))
    return {"latency_ms": 1e-6 * params * wobble + 1.0, "memory_mb": 4e-6 * params / wobble + 50}


def kwargs(n: int) -> dict[str, Any]:
    return {
        "objectives": OBJECTIVES,
        "scorer": zero_cost_scores,
        "seed": 0,
        "max_evaluations": n + 50,
        "population": Population(initial=50, parents=10, mutations=20, crossovers=20),
        "constraints": Constraints(),
    }


def live_search(strategy: str, n: int) -> Engine:
    """Run a search until `n` results are told, one agent slot at a time."""
    space = parse_space({"kind": "gpt2"})
    engine = ENGINES[strategy](space, **kwargs(n))
    while engine.told < n:
        engine.ask(1)
        for arch_id in sorted(engine.pending):
            if engine.told >= n:
                break
            engine.tell(arch_id, synthetic(engine.candidate(arch_id).spec))
    return engine


def timings(strategy: str, n: int, repeats: int) -> dict[str, Any]:
    live = live_search(strategy, n)
    history = live.history()
    space, cls = parse_space({"kind": "gpt2"}), type(live)
    last = max(
        (i for i, r in enumerate(history) if r.values is not None and r.values is not PENDING),
        default=None,
    )
    assert last is not None
    behind = [r if i != last else r._replace(values=PENDING) for i, r in enumerate(history)]
    restore_s, catch_up_s = [], []
    for _ in range(repeats):  # interleaved
        start = time.perf_counter()
        cls.restore(space, history=history, **kwargs(n))
        restore_s.append(time.perf_counter() - start)
        stale = cls.restore(space, history=behind, **kwargs(n))
        start = time.perf_counter()
        stale.catch_up(told=[(history[last].spec.arch_id, history[last].values)], proposed=[])
        catch_up_s.append(time.perf_counter() - start)
        assert stale.told == live.told
    restore, catch_up = statistics.median(restore_s), statistics.median(catch_up_s)
    return {
        "strategy": strategy,
        "told": n,
        "restore_ms": restore * 1e3,
        "catch_up_ms": catch_up * 1e3,
        "ratio": restore / catch_up if catch_up else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = [timings(s, n, args.repeats) for s in args.strategies for n in args.sizes]
    lines = ["| strategy | told | restore (ms) | catch-up (ms) | restore / catch-up |"]
    lines.append("|---|---|---|---|---|")
    for r in rows:
        lines.append(
            f"| {r['strategy']} | {r['told']} | {r['restore_ms']:.1f} | {r['catch_up_ms']:.2f} | "
            f"{r['ratio']:.0f}x |"
        )
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"argv": sys.argv[1:], "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
