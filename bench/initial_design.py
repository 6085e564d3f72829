"""How large hwnas's random initial design should be: the strategy run as a user runs it
(its defaults, steered as the server steers it: bench.strategy_runs) with each initial
design size in turn, on the replayed device, on seeds the default was not chosen on; the
median hypervolume (the benchmark's fixed normalisation) at a few measurement counts.

    .venv/bin/python -m bench.initial_design [--initial 8 10 16 32] [--seeds 3 4 5 6 7]
        [--budget 120] [--space '{"n_layer": {"min": 2, "max": 6}}'] [--json out.json]
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
from bench.strategy_runs import run_one

CHECKPOINTS = (30, 60, 120, 300, 600)


def sweep(
    sizes: list[int], seeds: list[int], budget: int, space_overrides: dict[str, Any]
) -> dict[str, Any]:
    """Per initial design size, per seed: the hypervolume after every measurement."""
    replay = DeviceReplay.load()
    space = parse_space({**(replay.space or {}), **space_overrides})
    normaliser = make_normaliser(replay, space)
    curves = {
        size: {
            seed: run_one("hwnas", space, replay, normaliser, seed, budget, size)["hv"]
            for seed in seeds
        }
        for size in sizes
    }
    return {"space": space.to_dict(), "curves": curves}


def table(curves: dict[int, dict[int, list[float]]], budget: int) -> list[str]:
    counts = [n for n in CHECKPOINTS if n <= budget]
    lines = [
        "| initial design | " + " | ".join(f"{n} measurements" for n in counts) + " |",
        "|---:|" + "---:|" * len(counts),
    ]
    for size, per_seed in curves.items():
        cells = [f"{statistics.median(hv[n - 1] for hv in per_seed.values()):.4f}" for n in counts]
        shipped = " (default)" if size == HWNAS_INITIAL else ""
        lines.append(f"| {size}{shipped} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--initial", type=int, nargs="+", default=[8, HWNAS_INITIAL, 16, 32])
    parser.add_argument("--seeds", type=int, nargs="+", default=[3, 4, 5, 6, 7])
    parser.add_argument("--budget", type=int, default=120)
    parser.add_argument("--space", type=json.loads, default={}, help="JSON overrides")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = sweep(args.initial, args.seeds, args.budget, args.space)
    lines = table(result["curves"], args.budget)
    print(f"seeds {args.seeds}, median hypervolume ({time.perf_counter() - started:.0f} s)")
    print("\n".join(lines))
    if args.json is not None:
        command = command_line(["bench/initial_design.py"], argv)
        write_json(args.json, {"command": command, **result, "report": lines})
    return 0


if __name__ == "__main__":
    sys.exit(main())
