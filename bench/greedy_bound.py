"""What k measurements can hold, on the replayed device: the pooled frontier of LTS's
3,000-measurement runs (one per seed), and from it k points chosen greedily, each the one that
adds the most volume to those chosen before (the benchmark's fixed normalisation). A yardstick
for "X% of LTS within k measurements", not a bound: greedy choice holds at least 63% of the
best k points' volume (hypervolume is submodular), and a search may find points off LTS's
frontier.

    .venv/bin/python -m bench.greedy_bound [--k 30 60 120] [--seeds 0 1] [--lts-budget 3000]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from numpy.typing import NDArray

from archvocab.spaces.gpt2.space import GPT2Space
from bench.curve import Curve
from bench.normalisation import make_normaliser
from bench.replay import DeviceReplay
from bench.strategy_runs import make_engine, run_engine
from search.hypervolume import hypervolume, improvements
from search.pareto import non_dominated_mask


def lts_front(space: GPT2Space, replay: DeviceReplay, curve: Curve, seed: int, budget: int) -> None:
    run_engine(make_engine("lts", space, seed, budget), replay, curve)


def greedy_order(points: NDArray[np.float64], k: int) -> list[int]:
    """The indices of k of `points` (normalised), picked one at a time, each the one that adds
    the most volume to those picked before."""
    chosen: list[int] = []
    for _ in range(min(k, len(points))):
        gains = improvements(points[chosen], points)
        gains[chosen] = -1.0
        chosen.append(int(np.argmax(gains)))
    return chosen


def greedy(points: NDArray[np.float64], k: int) -> list[float]:
    """The hypervolume after each of k greedy choices from `points`."""
    order = greedy_order(points, k)
    return [hypervolume(points[order[: n + 1]]) for n in range(len(order))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[30, 60, 120])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--lts-budget", type=int, default=3000)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    replay = DeviceReplay.load()
    space = GPT2Space()
    normaliser = make_normaliser(replay, space)
    fronts, finals = [], []
    for seed in args.seeds:
        curve = Curve(normaliser)
        lts_front(space, replay, curve, seed, args.lts_budget)
        fronts.append(curve.front)
        finals.append(curve.hv[-1])
    pooled = np.vstack(fronts)
    pooled = np.unique(pooled[non_dominated_mask(pooled)], axis=0)
    volumes = greedy(pooled, max(args.k))
    print(f"LTS at {args.lts_budget}, seeds {args.seeds}: " + ", ".join(f"{v:.4f}" for v in finals))
    print(f"pooled frontier: {len(pooled)} points, {hypervolume(pooled):.4f}")
    for k in args.k:
        print(f"best {k} points, chosen greedily: {volumes[min(k, len(volumes)) - 1]:.4f}")
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
