"""How large hwnas's initial design should be, and of what kind: the strategy run as a user
runs it (its defaults, steered as the server steers it: bench.strategy_runs) with each
initial design size in turn, and each variant (`hwnas-random-start`: random samples in place
of the analytic front), on the replayed device; the median hypervolume (the benchmark's
fixed normalisation) at a few measurement counts.

    .venv/bin/python -m bench.initial_design [--initial 8 10 16 32] [--seeds 3 4 5 6 7]
        [--variants hwnas hwnas-random-start] [--budget 120]
        [--space '{"n_layer": {"min": 2, "max": 6}}'] [--json out.json]
    .venv/bin/python -m bench.initial_design --report-from out.json  # its report again

After the medians it prints on how many seeds the first variant and size is ahead of each
other one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from archvocab.registry import parse_space
from archvocab.wire import HWNAS_INITIAL
from bench.normalisation import make_normaliser
from bench.replay import DeviceReplay
from bench.script import command_line, write_json
from bench.strategy_runs import HWNAS, run_one

CHECKPOINTS = (10, 15, 20, 30, 60, 120, 300, 600)


def sweep(
    sizes: list[int],
    seeds: list[int],
    budget: int,
    space_overrides: dict[str, Any],
    variants: list[str],
) -> dict[str, Any]:
    """Per hwnas variant and initial design size, per seed: the hypervolume after every
    measurement."""
    replay = DeviceReplay.load()
    space = parse_space({**(replay.space or {}), **space_overrides})
    normaliser = make_normaliser(replay, space)
    curves = {
        f"{variant} {size}": {
            seed: run_one(variant, space, replay, normaliser, seed, budget, size)["hv"]
            for seed in seeds
        }
        for variant in variants
        for size in sizes
    }
    return {"space": space.to_dict(), "curves": curves}


def table(curves: dict[str, dict[int, list[float]]], budget: int) -> list[str]:
    counts = [n for n in CHECKPOINTS if n <= budget]
    lines = [
        "| variant, initial design | " + " | ".join(f"{n} measurements" for n in counts) + " |",
        "|---:|" + "---:|" * len(counts),
    ]
    for name, per_seed in curves.items():
        cells = [f"{statistics.median(hv[n - 1] for hv in per_seed.values()):.4f}" for n in counts]
        shipped = " (default)" if name == f"hwnas {HWNAS_INITIAL}" else ""
        lines.append(f"| {name}{shipped} | " + " | ".join(cells) + " |")
    return lines


def seeds_ahead(curves: dict[str, dict[Any, list[float]]], budget: int) -> list[str]:
    """On how many seeds the first curve's hypervolume is above each other's, per count."""
    counts = [n for n in CHECKPOINTS if n <= budget]
    first, *others = curves
    lines = [
        f"| seeds on which {first} is ahead of | " + " | ".join(f"{n}" for n in counts) + " |",
        "|---|" + "---:|" * len(counts),
    ]
    mine = curves[first]
    for name in others:
        theirs = curves[name]
        seeds = [seed for seed in mine if seed in theirs]
        cells = [
            f"{sum(mine[s][n - 1] > theirs[s][n - 1] for s in seeds)}/{len(seeds)}" for n in counts
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--initial", type=int, nargs="+", default=[8, HWNAS_INITIAL, 16, 32])
    parser.add_argument("--seeds", type=int, nargs="+", default=[3, 4, 5, 6, 7])
    parser.add_argument("--budget", type=int, default=120)
    parser.add_argument(
        "--variants", nargs="+", choices=list(HWNAS), default=["hwnas"], help="hwnas's, to sweep"
    )
    parser.add_argument("--space", type=json.loads, default={}, help="JSON overrides")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--report-from", type=Path, help="print the report of a run saved by --json again"
    )
    args = parser.parse_args(argv)
    if args.report_from is not None:
        curves = json.loads(args.report_from.read_text())["curves"]
        budget = min(len(hv) for per_seed in curves.values() for hv in per_seed.values())
        print("\n".join([*table(curves, budget), "", *seeds_ahead(curves, budget)]))
        return 0
    started = time.perf_counter()
    result = sweep(args.initial, args.seeds, args.budget, args.space, args.variants)
    lines = [*table(result["curves"], args.budget), ""]
    lines += seeds_ahead(result["curves"], args.budget)
    print(f"seeds {args.seeds}, median hypervolume ({time.perf_counter() - started:.0f} s)")
    print("\n".join(lines))
    if args.json is not None:
        command = command_line(["bench/initial_design.py"], argv)
        write_json(args.json, {"command": command, **result, "report": lines})
    return 0


if __name__ == "__main__":
    sys.exit(main())
