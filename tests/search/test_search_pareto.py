"""search.pareto against a brute-force O(n^2) reference."""

from __future__ import annotations

import time

import numpy as np
import pytest

from archvocab.wire import Constraints
from search import pareto
from search.objectives import Objectives, minimised
from search.pareto import dominates, non_dominated_indices, non_dominated_mask


def is_dominated(points: np.ndarray, p: np.ndarray) -> bool:
    """The definition: some row is <= p in all objectives and < p in at least one."""
    return bool((np.all(points <= p, axis=1) & np.any(points < p, axis=1)).any())


def brute_force_mask(points: np.ndarray) -> np.ndarray:
    return np.array([not is_dominated(points, p) for p in points], dtype=bool)


def pairwise_mask(points: np.ndarray) -> np.ndarray:
    n = len(points)
    return np.array(
        [not any(dominates(points[j], points[i]) for j in range(n) if j != i) for i in range(n)],
        dtype=bool,
    )


def test_references_agree() -> None:
    rng = np.random.default_rng(0)
    for k in (2, 3):
        pts = random_points(rng, 40, k, "ties")
        assert np.array_equal(brute_force_mask(pts), pairwise_mask(pts))


def random_points(rng: np.random.Generator, n: int, k: int, kind: str) -> np.ndarray:
    if kind == "continuous":
        return rng.random((n, k))
    if kind == "ties":  # few distinct values per objective: many ties and exact duplicates
        return rng.integers(0, 4, size=(n, k)).astype(float)
    if kind == "anti":  # points near a plane: most of them are non-dominated
        pts = rng.random((n, k))
        pts[:, -1] = -pts[:, :-1].sum(axis=1) + 0.05 * rng.random(n)
        return pts
    raise AssertionError(kind)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("kind", ["continuous", "ties", "anti"])
def test_mask_matches_brute_force(k: int, kind: str) -> None:
    rng = np.random.default_rng(1000 * k + len(kind))
    for trial in range(40):
        n = int(rng.integers(0, 60)) if trial else 0
        pts = random_points(rng, n, k, kind)
        assert np.array_equal(non_dominated_mask(pts), brute_force_mask(pts)), (k, kind, trial)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_blocked_paths_match_brute_force_beyond_one_block(k: int) -> None:
    # More rows than one block (256) so the sweeps carry their front across blocks.
    rng = np.random.default_rng(k)
    for kind in ("ties", "anti"):
        pts = random_points(rng, 600, k, kind)
        assert np.array_equal(non_dominated_mask(pts), brute_force_mask(pts)), kind


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("kind", ["continuous", "ties", "anti"])
def test_dominance_by_the_points_of_another_set_matches_the_definition(
    k: int, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sweeps large sets take (two and three objectives), and the halving of many rows
    # among themselves, here on small ones.
    monkeypatch.setattr(pareto, "_SWEEP_FROM", 0)
    monkeypatch.setattr(pareto, "_WITHIN_PAIRS", 4)
    rng = np.random.default_rng(2000 * k + len(kind))
    for trial in range(40):
        rows = random_points(rng, int(rng.integers(0, 50)), k, kind)
        others = random_points(rng, int(rng.integers(1, 50)), k, kind)
        shared = min(len(rows), len(others), 5)
        rows[:shared] = others[:shared]  # copies of another: an equal point does not dominate
        want = [is_dominated(others, r) for r in rows]
        assert pareto._dominated_by_any(rows, others).tolist() == want, (k, kind, trial)
        # By another point of one set (a point's best case always bounds its own worst case)
        low = random_points(rng, int(rng.integers(1, 50)), k, kind)
        high = low + rng.integers(0, 2, size=low.shape)
        some = np.flatnonzero(rng.random(len(low)) < 0.5)
        want = [is_dominated(np.delete(low, i, axis=0), high[i]) for i in some]
        got = pareto._dominated_by_other(high, some, low, np.arange(len(low)))
        assert got.tolist() == want, (k, kind, trial)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("kind", ["continuous", "ties", "anti"])
def test_weakly_dominated_matches_the_definition(k: int, kind: str) -> None:
    rng = np.random.default_rng(3000 * k + len(kind))
    for trial in range(40):
        others = random_points(rng, int(rng.integers(0, 50)), k, kind)
        point = random_points(rng, 1, k, kind)[0]
        if len(others) and trial % 4 == 0:
            point = others[int(rng.integers(len(others)))].copy()  # an equal point covers it
        want = bool(np.all(others <= point, axis=1).any()) if len(others) else False
        assert pareto.weakly_dominated(point, others) is want, (k, kind, trial)


def test_identical_points_both_stay_on_front() -> None:
    pts = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [2.0, 2.0, 3.0], [0.0, 5.0, 5.0]])
    assert non_dominated_mask(pts).tolist() == [True, True, False, True]
    assert non_dominated_mask(pts[:, :2]).tolist() == [True, True, False, True]
    assert non_dominated_mask(pts[:, :1]).tolist() == [False, False, False, True]


def test_equal_in_two_objectives_better_in_third_dominates() -> None:
    pts = np.array([[1.0, 1.0, 2.0], [1.0, 1.0, 1.0], [0.0, 9.0, 2.0], [0.0, 9.0, 1.0]])
    assert non_dominated_mask(pts).tolist() == [False, True, False, True]


def test_infinities_are_ordinary_values() -> None:
    inf = np.inf
    pts = np.array([[inf, 0.0], [inf, 1.0], [0.0, inf], [-inf, inf], [1.0, 1.0]])
    assert np.array_equal(non_dominated_mask(pts), brute_force_mask(pts))
    pts3 = np.array([[inf, inf, 0.0], [0.0, inf, inf], [inf, inf, inf], [1.0, 2.0, inf]])
    assert np.array_equal(non_dominated_mask(pts3), brute_force_mask(pts3))


def test_indices_and_dominates() -> None:
    pts = np.array([[3.0, 1.0], [1.0, 3.0], [3.0, 3.0], [2.0, 2.0]])
    assert non_dominated_indices(pts).tolist() == [0, 1, 3]
    assert dominates([1, 1], [1, 2]) and not dominates([1, 2], [1, 1])
    assert not dominates([1, 1], [1, 1])
    assert not dominates([0, 2], [1, 1])


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="NaN"):
        non_dominated_mask([[0.0, np.nan]])
    with pytest.raises(ValueError, match="2-D"):
        non_dominated_mask([1.0, 2.0])
    with pytest.raises(ValueError, match="equal length"):
        dominates([1, 2], [1, 2, 3])


def test_empty_and_list_input() -> None:
    assert non_dominated_mask(np.empty((0, 3))).shape == (0,)
    assert non_dominated_mask([[1, 2], [2, 1], [2, 2]]).tolist() == [True, True, False]


@pytest.mark.parametrize("kind", ["continuous", "anti"])
def test_20k_points_in_3d_is_fast(kind: str) -> None:
    pts = random_points(np.random.default_rng(7), 20_000, 3, kind)
    start = time.perf_counter()
    mask = non_dominated_mask(pts)
    elapsed = time.perf_counter() - start
    # Generous bound for a shared CI core; it takes ~10-40 ms on a quiet one.
    assert elapsed < 0.5, elapsed
    sample = np.random.default_rng(8).choice(len(pts), 50, replace=False)
    for i in sample:  # spot-check against the definition
        assert mask[i] == (not is_dominated(pts, pts[i]))


@pytest.mark.parametrize("widths", [(0.0, 0.0), (0.03, 0.01), (0.2, 0.1)])
@pytest.mark.parametrize("seed", range(5))
def test_a_frontier_extended_one_row_at_a_time_is_the_frontier_of_all_rows(widths, seed):
    """`Objectives.extend_front` (what an engine does on each result) against `front` of
    every row told so far, with and without a noise tolerance; rows on a coarse grid tie."""
    names = ("decoder_params", "latency_ms", "memory_mb")
    tolerance = {"latency_ms": widths[0], "memory_mb": widths[1]}
    objectives = Objectives(names, Constraints(), tolerance)
    rng = np.random.default_rng(seed)
    rows, front = [], []  # front: indices into rows, in order
    for _ in range(150):
        row = dict(zip(names, rng.integers(1, 12, size=3).astype(float) * [1e6, 3, 20]))
        values = minimised(names, [rows[i] for i in front] + [row])
        low, high = objectives.bounds(values)
        joins, stays = objectives.extend_front((low[:-1], high[:-1]), (low[-1:], high[-1:]))
        rows.append(row)
        if joins:
            front = [i for i, keep in zip(front, stays) if keep] + [len(rows) - 1]
        assert front == list(np.flatnonzero(objectives.front(rows))), len(rows)
