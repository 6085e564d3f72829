"""Which parts of hwnas's strategy earn their keep: the strategy with one idea removed at a
time, on the same replayed device and normalisation as `bench/search_efficiency.py`.

Variants (all steady-state, the default initial design of `HWNAS_INITIAL`):
- `hwnas`: as shipped (screening, optimism of one residual, parents by hypervolume
  contribution, steered by the benchmark's fixed normalisation);
- `no-screening`: a pool of one offspring, so every bred candidate is measured (plain
  steady-state evolution with the same parents);
- `uniform-parents`: parents drawn uniformly from the frontier;
- `no-optimism`: screening by the cost models' mean prediction;
- `adaptive-normaliser`: steered by a normalisation adapted to the results so far (what a
  search does before its reference is fixed), while still judged by the fixed one.

    .venv/bin/python -m bench.ablation --seeds 3 --budget 300
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.wire import HWNAS_INITIAL, Population
from bench.curve import Curve, first_reaching
from bench.normalisation import OBJECTIVES, make_normaliser, score
from bench.replay import DeviceReplay
from bench.strategy_runs import run_engine, run_one
from search.hypervolume import Normaliser
from search.strategies.hwnas import SteadyStateEngine

VARIANTS: dict[str, dict[str, Any]] = {
    "hwnas": {},
    "no-screening": {"pool_size": 1},
    "uniform-parents": {"parent_floor": 1.0},
    "no-optimism": {"optimism": 0.0},
    "adaptive-normaliser": {"normaliser": None},
}
CHECKPOINTS = (50, 100, 200, 300, 600)


def run_variant(
    name: str, replay: DeviceReplay, norm: Normaliser, seed: int, budget: int
) -> list[float]:
    kwargs: dict[str, Any] = {"normaliser": norm, **VARIANTS[name]}
    engine = SteadyStateEngine(
        GPT2Space(),
        objectives=OBJECTIVES,
        scorer=score,
        seed=seed,
        max_evaluations=budget,
        population=Population(initial=HWNAS_INITIAL),
        **kwargs,
    )
    curve = Curve(norm)
    run_engine(engine, replay, curve)
    return curve.hv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=300)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    replay = DeviceReplay.load()
    norm = make_normaliser(replay, GPT2Space())
    seeds = range(args.seeds)
    lts = [run_one("lts", GPT2Space(), replay, norm, s, 3000)["hv"][-1] for s in seeds]
    header = [f"{n}" for n in CHECKPOINTS if n <= args.budget]
    print(f"LTS at 3000, per seed: {', '.join(f'{v:.4f}' for v in lts)}")
    print()
    print(f"| variant | {' | '.join(header)} | measurements to 99% of LTS-3000 (per seed) |")
    print(f"|---|{'---|' * len(header)}---|")
    for name in VARIANTS:
        curves = [run_variant(name, replay, norm, s, args.budget) for s in seeds]
        cells = [
            f"{statistics.median(c[n - 1] for c in curves):.4f}"
            for n in CHECKPOINTS
            if n <= args.budget
        ]
        reach = [first_reaching({"hv": c}, 0.99 * level) for c, level in zip(curves, lts)]
        shown = ", ".join("-" if r is None else str(r) for r in reach)
        print(f"| {name} | {' | '.join(cells)} | {shown} |", flush=True)
    print()
    print(
        f"median hypervolume over {args.seeds} seeds; - = not within {args.budget}. "
        f"Wall time {time.perf_counter() - started:.0f} s; command: bench/ablation.py "
        + " ".join(argv if argv is not None else sys.argv[1:])
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
