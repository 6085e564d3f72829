"""Benchmark: the frontier computation against the naive all-pairs check, in the same run.

LTS's released code recomputes its Pareto set over all evaluated points each iteration with
an O(N^2) pairwise check. This script times `search.pareto.non_dominated_mask` against two
baselines on the same random 3-objective point sets: a vectorised numpy all-pairs check
(the fair baseline) and a pure-Python all-pairs loop (what LTS does), interleaving the
contenders and taking medians over repeats. It also checks that all agree.

    .venv/bin/python bench/pareto.py [--sizes 1000 5000 20000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from search.pareto import non_dominated_mask


def numpy_all_pairs(points: np.ndarray) -> np.ndarray:
    """O(N^2) memory and time: point j is dominated if any i is <= everywhere and < somewhere."""
    mask = np.ones(len(points), dtype=bool)
    for start in range(0, len(points), 1000):  # chunked so 20k points fit in memory
        block = points[start : start + 1000]
        le = (points[:, None, :] <= block[None, :, :]).all(axis=2)
        lt = (points[:, None, :] < block[None, :, :]).any(axis=2)
        mask[start : start + 1000] = ~(le & lt).any(axis=0)
    return mask


def python_all_pairs(points: np.ndarray) -> np.ndarray:
    rows = points.tolist()

    def dominated(p: list[float]) -> bool:
        return any(
            all(a <= b for a, b in zip(q, p)) and any(a < b for a, b in zip(q, p)) for q in rows
        )

    return np.array([not dominated(p) for p in rows])


def workload(n: int, seed: int) -> np.ndarray:
    """Shaped like a search: latency and memory grow with parameters, plus noise."""
    rng = np.random.default_rng(seed)
    params = rng.uniform(1e6, 1e8, n)
    latency = params / 1e6 * rng.lognormal(0, 0.3, n)
    memory = params / 2e6 * rng.lognormal(0, 0.3, n)
    return np.column_stack([-params, latency, memory])


def timed(fn, points: np.ndarray) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    result = fn(points)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--python-max", type=int, default=5000, help="largest N for Python")
    args = parser.parse_args()
    print(
        "| N | front | hwnas ms | numpy all-pairs ms | Python all-pairs ms | vs numpy | vs Python |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        contenders = {"hwnas": non_dominated_mask, "numpy": numpy_all_pairs}
        if n <= args.python_max:
            contenders["python"] = python_all_pairs
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for repeat in range(args.repeats):
            points = workload(n, seed=repeat)
            masks = {}
            for name, fn in contenders.items():  # interleaved: drift hits all alike
                elapsed, masks[name] = timed(fn, points)
                times[name].append(elapsed)
            for name, mask in masks.items():
                assert np.array_equal(mask, masks["hwnas"]), f"{name} disagrees at N={n}"
        med = {name: statistics.median(t) * 1000 for name, t in times.items()}
        py = f"{med['python']:.1f}" if "python" in med else "-"
        vs_py = f"{med['python'] / med['hwnas']:.0f}x" if "python" in med else "-"
        front = int(masks["hwnas"].sum())
        print(
            f"| {n} | {front} | {med['hwnas']:.2f} | {med['numpy']:.1f} | {py} | "
            f"{med['numpy'] / med['hwnas']:.0f}x | {vs_py} |"
        )


if __name__ == "__main__":
    main()
