"""search.hypervolume against independent computations: box volumes, inclusion-exclusion,
leave-one-out, brute-force dominance and a Monte-Carlo estimate."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from search.hypervolume import (
    Normaliser,
    _cover_bounds,
    added_volume,
    best_improvement,
    contributions,
    epsilon_gaps,
    hypervolume,
    improvements,
)


def box(corner) -> float:
    """Volume of the box between `corner` and (1, ..., 1); empty when outside it."""
    return float(np.prod(np.clip(1.0 - np.asarray(corner, dtype=float), 0.0, None)))


def exact_hv(points) -> float:
    """Hypervolume by inclusion-exclusion over every subset (2^n terms: small n only).

    The boxes of a subset intersect in the box of their coordinate-wise maximum."""
    pts = [np.asarray(p, dtype=float) for p in points]
    total = 0.0
    for size in range(1, len(pts) + 1):
        for subset in combinations(pts, size):
            total += (-1) ** (size + 1) * box(np.max(subset, axis=0))
    return total


def weakly_dominated(c, front) -> bool:
    return any(np.all(np.asarray(f) <= c) for f in front)


def mutually_non_dominated(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """n points in [0, 1)^k none of which dominates another (rejection on brute force)."""
    kept: list[np.ndarray] = []
    while len(kept) < n:
        p = rng.random(k)
        if not any(np.all(q <= p) or np.all(p <= q) for q in kept):
            kept.append(p)
    return np.array(kept)


# -- hypervolume -----------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_single_point_is_its_box(k: int) -> None:
    rng = np.random.default_rng(k)
    for _ in range(20):
        p = rng.uniform(-0.5, 1.0, size=k)  # also better than the ideal in some coordinates
        assert hypervolume([p]) == pytest.approx(np.prod(1.0 - p), rel=1e-12)
    assert hypervolume(np.zeros((1, k))) == pytest.approx(1.0)
    assert hypervolume(np.empty((0, k))) == 0.0


def test_two_points_by_inclusion_exclusion() -> None:
    rng = np.random.default_rng(1)
    for k in (2, 3, 4):
        for _ in range(30):
            a, b = rng.random(k), rng.random(k)
            expected = box(a) + box(b) - box(np.maximum(a, b))
            assert hypervolume([a, b]) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    # By hand: (0.2, 0.6) and (0.5, 0.3) give 0.8*0.4 + 0.5*0.7 - 0.5*0.4.
    assert hypervolume([[0.2, 0.6], [0.5, 0.3]]) == pytest.approx(0.47)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_random_fronts_match_inclusion_exclusion(k: int) -> None:
    rng = np.random.default_rng(10 + k)
    for n in (3, 5, 8):
        points = rng.uniform(-0.2, 1.2, size=(n, k))  # some beyond the reference, some dominated
        assert hypervolume(points) == pytest.approx(exact_hv(points), rel=1e-10, abs=1e-14)


def test_points_beyond_the_reference_add_nothing() -> None:
    front = np.array([[0.2, 0.6, 0.4], [0.5, 0.3, 0.7]])
    base = hypervolume(front)
    beyond = np.array([[0.0, 0.0, 1.0], [-5.0, 0.1, 1.5], [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    assert hypervolume(np.vstack([front, beyond])) == pytest.approx(base, rel=1e-12)
    assert hypervolume(beyond) == 0.0
    for p in beyond:
        assert hypervolume([p]) == 0.0


def test_dominated_and_repeated_points_add_nothing() -> None:
    rng = np.random.default_rng(2)
    front = mutually_non_dominated(rng, 6, 3)
    base = hypervolume(front)
    worse = front + rng.uniform(0.0, 0.3, size=front.shape)  # each dominated by its origin
    assert hypervolume(np.vstack([front, worse, front])) == pytest.approx(base, rel=1e-12)


def test_monte_carlo_estimate_in_three_dimensions() -> None:
    rng = np.random.default_rng(3)
    samples = rng.random((200_000, 3))
    for n in (4, 15, 40):
        front = rng.random((n, 3)) ** 0.5  # points spread towards the reference
        covered = np.zeros(len(samples), dtype=bool)
        for p in front:
            covered |= np.all(samples >= p, axis=1)
        estimate = covered.mean()
        stderr = np.sqrt(estimate * (1 - estimate) / len(samples))
        assert abs(hypervolume(front) - estimate) < 5 * stderr + 1e-12


# -- improvements / contributions ------------------------------------------------------------
def test_improvements_are_the_added_volume() -> None:
    rng = np.random.default_rng(4)
    for k in (2, 3):
        front = mutually_non_dominated(rng, 5, k)
        candidates = rng.uniform(-0.1, 1.1, size=(25, k))
        gains = improvements(front, candidates)
        assert gains.shape == (25,)
        base = exact_hv(front)
        for c, gain in zip(candidates, gains, strict=True):
            expected = exact_hv([*front, c]) - base
            assert gain == pytest.approx(expected, abs=1e-12)
            if weakly_dominated(c, front) or np.any(c >= 1):
                assert gain == 0.0
            else:
                assert gain > 0.0


def test_the_added_volume_of_any_point_is_the_volume_it_adds() -> None:
    """Also where the points are not mutually non-dominated, lie beyond the reference, or
    dominate each other with the newcomer (what the engine hands in: its frontier within
    the noise, and a newcomer that may push members off)."""
    rng = np.random.default_rng(7)
    for k in (2, 3):
        for _ in range(20):
            points = rng.uniform(-0.1, 1.2, size=(6, k))
            point = rng.uniform(-0.1, 1.1, size=k)
            expected = exact_hv([*points, point]) - exact_hv(points)
            assert added_volume(points, point) == pytest.approx(expected, abs=1e-12)
        assert added_volume(np.empty((0, k)), np.full(k, 0.5)) == pytest.approx(0.5**k)
        assert added_volume(points, np.full(k, 1.0)) == 0.0


def test_the_added_volume_beside_a_large_frontier_is_the_volume_it_adds() -> None:
    """Many points around the newcomer, most of them shadowed once moved up to it (the pruned
    path), ties with it included: the same as the volume with it less the volume without."""
    rng = np.random.default_rng(11)
    for k in (2, 3, 4):
        for _ in range(10):
            points = rng.uniform(0.0, 1.0, size=(400, k))
            point = rng.uniform(0.1, 0.9, size=k)
            points[:3, 0] = point[0]  # equal to the newcomer in one objective
            expected = hypervolume(np.vstack([points, point])) - hypervolume(points)
            assert added_volume(points, point) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_the_best_improvement_is_the_first_largest_of_the_eligible(k: int) -> None:
    rng = np.random.default_rng(40 + k)
    for trial in range(30):
        front = mutually_non_dominated(rng, int(rng.integers(1, 120)), k)
        candidates = rng.uniform(-0.05, 1.05, size=(int(rng.integers(1, 200)), k))
        candidates[1::7] = candidates[0]  # ties: the first of them is the one
        eligible = rng.random(len(candidates)) < 0.8
        gains = improvements(front, candidates)
        gains[~eligible] = -1.0
        index, gain, _ = best_improvement(front, candidates, eligible)
        if gains.max() > 0:
            assert (index, gain) == (int(np.argmax(gains)), gains.max()), trial
        else:
            assert (index, gain) == (-1, 0.0)
    assert best_improvement([[0.1] * k], [[0.5] * k])[:2] == (-1, 0.0)  # dominated: adds nothing
    index, gain, _ = best_improvement(np.empty((0, k)), [[0.5] * k, [0.2] * k])
    assert index == 1 and gain == pytest.approx(0.8**k)  # no front: the larger box


@pytest.mark.parametrize("k", [2, 3, 4])
def test_with_costs_the_best_improvement_is_the_largest_per_unit_of_cost(k: int) -> None:
    rng = np.random.default_rng(50 + k)
    for trial in range(30):
        front = mutually_non_dominated(rng, int(rng.integers(1, 120)), k)
        candidates = rng.uniform(-0.05, 1.05, size=(int(rng.integers(2, 200)), k))
        eligible = rng.random(len(candidates)) < 0.8
        cost = rng.uniform(0.5, 8.0, size=len(candidates))
        gains = improvements(front, candidates)
        value = np.where(eligible, gains / cost, -1.0)
        index, gain, _ = best_improvement(front, candidates, eligible, cost=cost)
        if value.max() > 0:
            assert index == int(np.argmax(value)), trial
            assert gain == pytest.approx(gains[index], abs=1e-15)
        else:
            assert (index, gain) == (-1, 0.0)
    # the larger gain loses to the smaller one at a tenth of its cost
    big, small = [0.2] * k, [0.5] * k
    assert best_improvement(np.empty((0, k)), [big, small])[0] == 0
    assert best_improvement(np.empty((0, k)), [big, small], cost=[1.0, 0.1])[0] == 1


@pytest.mark.parametrize("k", [2, 3])
def test_greedy_picks_with_the_last_bounds_are_those_made_afresh(k: int) -> None:
    """Several picks from one pool, each joining the front: the bounds one call returns serve
    the next (what a point adds only shrinks as the front grows)."""
    rng = np.random.default_rng(60 + k)
    front = mutually_non_dominated(rng, 40, k)
    pool = rng.uniform(0.0, 1.0, size=(200, k))
    eligible = np.ones(len(pool), dtype=bool)
    upper = None
    for _ in range(12):
        fresh, fresh_gain, _ = best_improvement(front, pool, eligible)
        index, gain, upper = best_improvement(front, pool, eligible, upper)
        assert (index, gain) == (fresh, fresh_gain)
        if index < 0:
            break
        eligible[index] = False
        front = np.vstack([front, pool[index]])


def test_the_cover_bound_is_never_below_what_a_candidate_adds() -> None:
    rng = np.random.default_rng(9)
    for k in (2, 3):
        front = mutually_non_dominated(rng, 60, k)
        candidates = rng.uniform(0.0, 0.99, size=(300, k))
        bounds = _cover_bounds(front, candidates)
        gains = improvements(front, candidates)
        assert (bounds >= gains - 1e-12).all()
        assert (bounds <= np.prod(1 - candidates, axis=1) + 1e-12).all()


def test_improvements_of_dominated_equal_and_outside_candidates_are_zero() -> None:
    front = [[0.2, 0.6], [0.5, 0.3]]
    candidates = [
        [0.2, 0.6],  # equal to a member
        [0.3, 0.7],  # dominated
        [0.5, 0.9],  # weakly dominated (equal in one coordinate)
        [0.0, 1.0],  # on the reference
        [0.1, 0.5],  # adds the box (0.1..0.2 x 0.5..1) and (0.2..0.5 x 0.5..0.6): 0.05 + 0.03
    ]
    gains = improvements(front, candidates)
    assert list(gains[:4]) == [0.0, 0.0, 0.0, 0.0]
    assert gains[4] == pytest.approx(0.08)
    # With no front, a candidate adds its whole box; no candidates, no gains.
    assert improvements(np.empty((0, 2)), [[0.5, 0.5]])[0] == pytest.approx(0.25)
    assert improvements(front, np.empty((0, 2))).shape == (0,)
    # A front point beyond the reference does not shadow a candidate.
    assert improvements([[0.0, 1.2]], [[0.5, 0.5]])[0] == pytest.approx(0.25)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_contributions_are_leave_one_out_differences(k: int) -> None:
    rng = np.random.default_rng(20 + k)
    front = mutually_non_dominated(rng, 7, k)
    shares = contributions(front)
    total = exact_hv(front)
    for i in range(len(front)):
        rest = np.delete(front, i, axis=0)
        assert shares[i] == pytest.approx(total - exact_hv(rest), abs=1e-12)
    assert (shares >= 0).all() and shares.sum() <= total + 1e-12


def test_contributions_by_hand_and_edge_cases() -> None:
    # Exclusive boxes: (0.2..0.5) x (0.6..1) = 0.12 and (0.5..1) x (0.3..0.6) = 0.15; the
    # shared 0.5 x 0.4 = 0.2 makes up the rest of the 0.47 hypervolume.
    shares = contributions([[0.2, 0.6], [0.5, 0.3]])
    assert shares == pytest.approx([0.12, 0.15])
    assert shares.sum() + 0.2 == pytest.approx(hypervolume([[0.2, 0.6], [0.5, 0.3]]))
    # One point inside the box: its own box; points outside: 0.
    assert contributions([[1.2, 0.1], [0.2, 0.5], [0.3, 1.0]]) == pytest.approx([0.0, 0.4, 0.0])
    assert contributions(np.empty((0, 3))).shape == (0,)


def test_contributions_of_a_one_objective_front() -> None:
    # 1-D: the best point alone holds (second best - best); tied points hold nothing alone.
    assert contributions([[0.3], [0.5]]) == pytest.approx([0.2, 0.0])
    assert contributions([[0.3], [0.3]]) == pytest.approx([0.0, 0.0])


# -- epsilon gaps ----------------------------------------------------------------------------
def test_epsilon_gaps_by_hand() -> None:
    front = [[0.2, 0.6], [0.5, 0.3]]
    gaps = epsilon_gaps(front, [[0.6, 0.7], [0.1, 0.9], [0.2, 0.6]])
    # (0.6, 0.7) must improve by 0.1 to escape either member; (0.1, 0.9) is 0.1 better than
    # (0.2, 0.6) in its best coordinate; a member itself is 0 away.
    assert gaps == pytest.approx([0.1, -0.1, 0.0])
    assert (epsilon_gaps(np.empty((0, 2)), [[0.5, 0.5]]) == -np.inf).all()


def test_epsilon_gaps_against_brute_force_dominance() -> None:
    """Moving a candidate by t in every coordinate leaves it weakly dominated iff t <= gap."""
    rng = np.random.default_rng(5)
    for k in (2, 3):
        front = mutually_non_dominated(rng, 6, k)
        candidates = rng.uniform(-0.2, 1.2, size=(40, k))
        for c, gap in zip(candidates, epsilon_gaps(front, candidates), strict=True):
            assert weakly_dominated(c - (gap - 1e-9), front)
            assert not weakly_dominated(c - (gap + 1e-9), front)
            assert (gap > 0) == weakly_dominated(c - 1e-12, front)


# -- normaliser ------------------------------------------------------------------------------
def test_normaliser_maps_ideal_to_zero_and_reference_to_one_in_both_senses() -> None:
    norm = Normaliser(
        ["decoder_params", "latency_ms"],
        ideal={"decoder_params": 100.0, "latency_ms": 2.0},  # maximised: ideal is the larger
        reference={"decoder_params": 20.0, "latency_ms": 10.0},
    )
    assert norm({"decoder_params": 100.0, "latency_ms": 2.0}) == pytest.approx([0.0, 0.0])
    assert norm({"decoder_params": 20.0, "latency_ms": 10.0}) == pytest.approx([1.0, 1.0])
    assert norm({"decoder_params": 60.0, "latency_ms": 4.0}) == pytest.approx([0.5, 0.25])
    # Better than the ideal is negative, worse than the reference beyond 1; extra keys ignored.
    assert norm({"decoder_params": 120.0, "latency_ms": 14.0, "x": 1}) == pytest.approx(
        [-0.25, 1.5]
    )
    rows = [
        {"decoder_params": 100.0, "latency_ms": 10.0},
        {"decoder_params": 20.0, "latency_ms": 2},
    ]
    assert norm.points(rows) == pytest.approx(np.array([[0.0, 1.0], [1.0, 0.0]]))
    assert norm.points([]).shape == (0, 2)
    assert norm.to_dict() == {
        "ideal": {"decoder_params": 100.0, "latency_ms": 2.0},
        "reference": {"decoder_params": 20.0, "latency_ms": 10.0},
    }
    # A larger value of a maximised objective is a smaller coordinate: dominance is preserved.
    better = norm({"decoder_params": 90.0, "latency_ms": 3.0})
    worse = norm({"decoder_params": 80.0, "latency_ms": 5.0})
    assert (better < worse).all()
    assert hypervolume([better]) > hypervolume([worse])


def test_normaliser_rejects_missing_and_equal_bounds_naming_the_objective() -> None:
    objectives = ["decoder_params", "latency_ms", "memory_mb"]
    ideal = {"decoder_params": 100.0, "latency_ms": 2.0, "memory_mb": 1.0}
    reference = {"decoder_params": 20.0, "latency_ms": 10.0, "memory_mb": 8.0}
    with pytest.raises(ValueError, match="memory_mb") as info:
        Normaliser(objectives, {k: v for k, v in ideal.items() if k != "memory_mb"}, reference)
    assert "latency_ms" not in str(info.value)
    with pytest.raises(ValueError, match="latency_ms"):
        Normaliser(objectives, ideal, {k: v for k, v in reference.items() if k != "latency_ms"})
    with pytest.raises(ValueError, match="decoder_params") as info:
        Normaliser(objectives, ideal, {**reference, "decoder_params": 100.0})
    assert "memory_mb" not in str(info.value)
