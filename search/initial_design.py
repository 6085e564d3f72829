"""What hwnas measures before its cost models can be fitted: the analytic front's best volume.

A random initial design spends most of its measurements on candidates that end up
dominated. Yet before any measurement hwnas knows more than a black-box optimiser: a proxy
objective known at proposal (decoder_params) is exact, and latency and memory grow with the
analytic counts (FLOPs, total parameters, depth). A candidate that another beats on the proxy
and on every count is very likely beaten on the measurements too. So the design keeps, from a
seeded sample of the space, the candidates no other beats on those columns (the analytic
front), and takes from it one at a time the candidate that adds the most hypervolume in those
columns: the counts stand in for the costs they drive, so the picks spread over the front
where a frontier's volume lies rather than at its far ends.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from archvocab.registry import ArchSpec, SearchSpace
from search.hypervolume import best_improvement
from search.pareto import non_dominated_indices

# Counts that a measured cost (latency, memory) grows with; the design minimises those the
# space's scorer provides and that are not themselves an objective, and depth.
COSTLY_COUNTS = ("total_params", "flops")
INITIAL_DESIGNS = ("random", "analytic_front")
_MARGIN = 0.1  # the volume's reference lies this share of each column's range past its worst

Admit = Callable[[ArchSpec], "dict[str, float] | None"]
Pair = tuple[ArchSpec, dict[str, float]]


def sample_pool(space: SearchSpace, admit: Admit, rng: random.Random, size: int) -> list[Pair]:
    """Up to `size` distinct admissible samples of the space (`admit` gives their proxies)."""
    pool: dict[str, Pair] = {}
    for _ in range(size):
        spec = space.sample(rng)
        if spec.arch_id in pool:
            continue
        proxies = admit(spec)
        if proxies is not None:
            pool[spec.arch_id] = (spec, proxies)
    return list(pool.values())


def analytic_columns(
    pool: Sequence[Pair], senses: Mapping[str, str]
) -> tuple[NDArray[np.float64], int] | None:
    """One row per candidate, every column minimised: the objectives known at proposal
    (negated where maximised), then the costly counts and depth; and how many columns are
    objectives. None when no objective is known at proposal (nothing to trade costs against)."""
    if not pool:
        return None
    proxies = pool[0][1]
    known = [name for name in senses if name in proxies]
    if not known:
        return None
    counts = [c for c in COSTLY_COUNTS if c in proxies and c not in senses]
    sign = [-1.0 if senses[name] == "max" else 1.0 for name in known]
    rows = [
        [s * float(p[name]) for s, name in zip(sign, known, strict=True)]
        + [float(p[c]) for c in counts]
        + [float(spec.n_layer)]
        for spec, p in pool
    ]
    return np.asarray(rows, dtype=float), len(known)


def greedy_volume(points: NDArray[np.float64], objectives: int, count: int) -> list[int]:
    """`count` rows, each the one adding the most hypervolume to those picked before.

    Columns are scaled to 0 at their ideal and 1 just past their worst: an objective's ideal
    is its best value among `points` (its first `objectives` columns); a cost count's is 0, as
    a measured cost's is, so that the volume weighs a count by its size, not by its spread.
    """
    if count <= 0 or len(points) == 0:
        return []
    worst = points.max(axis=0)
    ideal = points.min(axis=0)
    ideal[objectives:] = np.minimum(ideal[objectives:], 0.0)
    span = worst - ideal
    span[span <= 0] = 1.0
    scaled = (points - ideal) / (span * (1 + _MARGIN))
    picked: list[int] = []
    open_ = np.ones(len(points), dtype=bool)
    upper = None
    while len(picked) < min(count, len(points)):
        best, _gain, upper = best_improvement(scaled[picked], scaled, open_, upper)
        if best < 0:  # nothing adds volume any more: the rest in their order
            best = int(np.flatnonzero(open_)[0])
        picked.append(best)
        open_[best] = False
    return picked


def analytic_front_design(
    pool: Sequence[Pair], senses: Mapping[str, str], size: int
) -> list[Pair] | None:
    """`size` candidates from `pool`: its analytic front's picks by added volume (then, where
    the front is smaller, the pool's first others: a seeded pool's order is random). None when
    no objective is known at proposal."""
    columns = analytic_columns(pool, senses)
    if columns is None:
        return None
    table, objectives = columns
    front = non_dominated_indices(table)
    chosen = [int(front[i]) for i in greedy_volume(table[front], objectives, size)]
    taken = set(chosen)
    chosen += [i for i in range(len(pool)) if i not in taken][: size - len(chosen)]
    return [pool[i] for i in chosen]
