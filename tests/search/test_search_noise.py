"""The noise model (search.noise) and the frontier beyond noise (search.pareto)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from search.noise import (
    PRIOR_EXTRA,
    PRIOR_SIGMA,
    drift_factor,
    fit,
    pooled_log_variance,
    prior,
)
from search.pareto import (
    NoisyFront,
    beyond_doubt,
    dominated_by,
    front_beyond_noise,
    non_dominated_mask,
)


def test_pooled_variance_ignores_singletons_and_pools_within_groups() -> None:
    variance, dof, used = pooled_log_variance([[1.0, math.e], [5.0], [2.0, 2.0, 2.0]])
    # group 1: logs 0 and 1, squares 0.5, dof 1; group 3: squares 0, dof 2
    assert dof == 3 and used == 5
    assert variance == pytest.approx(0.5 / 3)


def test_fit_without_repeats_is_the_prior() -> None:
    model = fit({"latency_ms": [[3.0], [4.0]]}, device="cuda")
    assert model.sigma == prior("cuda").sigma
    assert model.readings["latency_ms"] == 0
    # a candidate's prior spread: the reference's and the extra candidates show, added
    expected = math.hypot(PRIOR_SIGMA["cuda"]["latency_ms"], PRIOR_EXTRA["cuda"]["latency_ms"])
    assert model.sigma["latency_ms"] == pytest.approx(expected)


def test_fit_moves_from_the_prior_towards_the_evidence() -> None:
    rng = random.Random(1)
    true_sigma = 0.02
    groups = [[10.0 * math.exp(rng.gauss(0, true_sigma)) for _ in range(5)] for _ in range(40)]
    model = fit({"latency_ms": groups, "memory_mb": groups})
    # 160 degrees of freedom of evidence against 2 of prior: close to the truth, not the prior
    assert model.reference_sigma["latency_ms"] == pytest.approx(true_sigma, rel=0.35)
    assert model.reference_sigma["latency_ms"] < prior("cpu").reference_sigma["latency_ms"] / 2
    # with no candidate measured twice, candidates keep the prior extra on top
    extra = PRIOR_EXTRA["cpu"]["latency_ms"]
    assert model.sigma["latency_ms"] == pytest.approx(
        math.hypot(model.reference_sigma["latency_ms"], extra)
    )
    # candidates that spread no more than the reference pull the extra towards 0
    taught = fit({"latency_ms": groups}, candidates={"latency_ms": groups})
    assert taught.sigma["latency_ms"] == pytest.approx(true_sigma, rel=0.35)
    assert taught.sigma["latency_ms"] < 0.7 * model.sigma["latency_ms"]


@pytest.mark.parametrize(
    ("reference_sigma", "extra", "readings", "pairs", "low", "high"),
    [
        (0.02, 0.03, 12, 0, 0.94, 0.99),  # the prior's extra is the truth, but weak: wide
        (0.02, 0.03, 40, 40, 0.93, 0.97),  # ... and the candidates' repeats confirm it
        (0.02, 0.08, 40, 60, 0.92, 0.97),  # more extra than the prior: the repeats teach it
        (0.05, 0.03, 12, 0, 0.93, 0.99),  # a noisier reference
        (0.02, 0.0, 40, 60, 0.95, 0.995),  # no extra at all: the prior's keeps it a bit wide
    ],
)
def test_prediction_intervals_cover_re_measurements_at_their_rate(
    reference_sigma: float, extra: float, readings: int, pairs: int, low: float, high: float
) -> None:
    """Simulated devices with log-normal noise, where a candidate spreads by the reference's
    sigma plus an extra of its own: each device learns its model from its reference readings
    and `pairs` candidates measured twice, then states a 95% interval around a measurement;
    over devices, how often a later re-measurement falls inside."""
    rng = random.Random(7)
    spread = math.hypot(reference_sigma, extra)
    devices, trials, inside = 300, 20, 0
    for _ in range(devices):
        reference = [[math.exp(rng.gauss(0, reference_sigma)) for _ in range(readings)]]
        twice = [[math.exp(rng.gauss(0, spread)) for _ in range(2)] for _ in range(pairs)]
        model = fit({"latency_ms": reference}, candidates={"latency_ms": twice})
        for _ in range(trials):
            true = rng.uniform(1, 100)
            first, again = (true * math.exp(rng.gauss(0, spread)) for _ in range(2))
            start, end = model.interval("latency_ms", first, 0.95)
            inside += start <= again <= end
    assert low <= inside / (devices * trials) <= high


def test_more_repeats_and_lower_confidence_narrow_the_interval() -> None:
    model = prior("cpu")
    one = model.half_width("latency_ms", 0.95, 1)
    assert model.half_width("latency_ms", 0.95, 4) < one
    assert model.half_width("latency_ms", 0.8, 1) < one
    with pytest.raises(ValueError, match="confidence"):
        model.half_width("latency_ms", 1.0)


def test_drift_factor() -> None:
    assert drift_factor(2.0, 1.0) == 0.5
    assert drift_factor(None, 1.0) == 1.0
    assert drift_factor(0.0, 1.0) == 1.0


def test_front_beyond_noise_keeps_what_the_noise_cannot_separate() -> None:
    # (params negated, latency): B is nominally dominated by A, but only by 1%
    nominal = np.array([[-10.0, 1.00], [-10.0, 1.01], [-5.0, 3.0], [-10.0, 2.0]])
    rel = np.array([[0, 0.05]] * 4)
    low, high = nominal * (1 - rel), nominal * (1 + rel)
    low[:, 0] = high[:, 0] = nominal[:, 0]  # the parameter count is exact
    mask, group = front_beyond_noise(nominal, low, high)
    assert list(non_dominated_mask(nominal)) == [True, False, False, False]
    # B cannot be told from A; C (fewer params, slower) and D (2x slower) are beyond the noise
    assert list(mask) == [True, True, False, False]
    assert list(group) == [0, 0, -1, -1]


def test_front_beyond_noise_is_the_plain_front_without_noise() -> None:
    rng = np.random.default_rng(3)
    points = rng.random((300, 3))
    mask, group = front_beyond_noise(points, points, points)
    plain = non_dominated_mask(points)
    assert (mask == plain).all()
    assert (group[plain] == np.flatnonzero(plain)).all()


def test_front_beyond_noise_grows_with_the_intervals() -> None:
    rng = np.random.default_rng(4)
    points = rng.random((400, 3)) + 1
    sizes = [
        front_beyond_noise(points, points * (1 - w), points * (1 + w))[0].sum()
        for w in (0.0, 0.02, 0.1)
    ]
    assert sizes[0] < sizes[1] < sizes[2]


def test_front_beyond_noise_rejects_intervals_missing_their_value() -> None:
    with pytest.raises(ValueError, match="contain"):
        front_beyond_noise([[1.0, 1.0]], [[1.1, 1.0]], [[1.2, 1.0]])


def test_beyond_doubt_keeps_only_what_no_rival_could_dominate() -> None:
    # (params negated, latency): A and B are 1% apart, E has the most parameters
    nominal = np.array([[-10.0, 1.00], [-10.0, 1.01], [-5.0, 3.0], [-20.0, 5.0]])
    rel = np.array([[0, 0.05]] * 4)
    low, high = nominal * (1 - rel), nominal * (1 + rel)
    low[:, 0] = high[:, 0] = nominal[:, 0]
    mask, _ = front_beyond_noise(nominal, low, high)
    assert list(mask) == [True, True, False, True]
    # A or B could be the faster one; nothing has E's parameter count
    assert list(beyond_doubt(low, high, mask)) == [False, False, False, True]


def _doubted_brute_force(low: np.ndarray, high: np.ndarray, members: np.ndarray) -> np.ndarray:
    n = len(low)
    out = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(members):
        rivals = [j for j in range(n) if j != i]  # every other point, not only members
        le = np.all(low[rivals] <= high[i], axis=1)
        lt = np.any(low[rivals] < high[i], axis=1)
        out[i] = not (le & lt).any()
    return out


@pytest.mark.parametrize("width", [0.0, 0.01, 0.05])
def test_beyond_doubt_matches_its_definition_across_blocks(width: float) -> None:
    rng = np.random.default_rng(5)
    points = rng.random((700, 3)) + 1
    points[:, 2] = 4 - points[:, 0] - points[:, 1] + 0.3 * rng.random(700)  # a wide front
    points[10] = points[11]  # an exact copy
    low, high = points * (1 - width), points * (1 + width)
    mask, _ = front_beyond_noise(points, low, high)
    assert mask.sum() > 256  # more members than one block
    certain = beyond_doubt(low, high, mask)
    assert (certain == _doubted_brute_force(low, high, mask)).all()
    assert not (certain & ~non_dominated_mask(points)).any()  # a subset of the plain front
    if width == 0.0:
        assert (certain == non_dominated_mask(points)).all()


def test_beyond_doubt_checks_a_leader_against_what_only_it_dominates() -> None:
    # A's best case dominates B's, so A leads; B's best case still dominates A's worst case.
    low = np.array([[1.0, 1.0], [2.0, 2.0]])
    high = np.array([[3.0, 3.0], [2.5, 2.5]])
    assert list(beyond_doubt(low, high, np.array([True, True]))) == [False, False]
    assert list(beyond_doubt(low, high, np.array([True, False]))) == [True, False]


@pytest.mark.parametrize("width", [0.0, 0.03, 0.2])
def test_front_beyond_noise_groups_each_point_with_its_first_nominal_dominator(
    width: float,
) -> None:
    rng = np.random.default_rng(7)
    points = rng.random((600, 3)) + 1
    points[:, 2] = 4 - points[:, 0] - points[:, 1] + 0.3 * rng.random(600)
    low, high = points * (1 - width), points * (1 + width)
    mask, group = front_beyond_noise(points, low, high)
    plain = np.flatnonzero(non_dominated_mask(points))
    for i in range(len(points)):
        off = any(
            np.all(high[j] <= low[i]) and np.any(high[j] < low[i]) for j in range(len(points))
        )
        assert mask[i] == (not off)
        if not mask[i]:
            assert group[i] == -1
            continue
        dominators = [
            j for j in plain if np.all(points[j] <= points[i]) and np.any(points[j] < points[i])
        ]
        assert group[i] == (dominators[0] if dominators else i)


@pytest.mark.parametrize(("seed", "width"), [(8, 0.0), (9, 0.02), (10, 0.1), (11, 0.3)])
def test_a_front_extended_point_by_point_is_the_one_built_at_once(seed: int, width: float) -> None:
    rng = np.random.default_rng(seed)
    points = rng.random((500, 3)) + 1
    points[:, 2] = 4 - points[:, 0] - points[:, 1] + 0.3 * rng.random(500)
    points[40] = points[39]  # an exact copy
    points[60, 0] = points[59, 0]  # a tie in one objective
    widths = width * rng.random((500, 1))  # each its own width, as repeats give
    low, high = points * (1 - widths), points * (1 + widths)
    _, front = NoisyFront.of(points[:1], low[:1], high[:1])
    members = [0]
    for i in range(1, len(points)):
        joined = front.insert(i, points[i], low[i], high[i])
        if joined is None:
            continue
        front, stays = joined
        members = [m for m, s in zip(members, stays, strict=True) if s] + [i]
    mask, whole = NoisyFront.of(points, low, high)
    assert members == list(np.flatnonzero(mask))
    assert_same_front(front, whole)
    assert 0 < whole.plain.sum() <= len(whole)


def assert_same_front(front: NoisyFront, whole: NoisyFront) -> None:
    for name in ("keys", "nominal", "low", "high", "group", "certain", "leading", "worst"):
        assert (getattr(front, name) == getattr(whole, name)).all(), name


@pytest.mark.parametrize(("seed", "width"), [(12, 0.0), (13, 0.02), (14, 0.1), (15, 0.3)])
def test_a_front_whose_points_move_one_at_a_time_is_the_one_built_at_once(
    seed: int, width: float
) -> None:
    # A point measured again moves and narrows: it is removed (what it held off may come
    # back) and inserted at its place in the arrival order, which is not the end.
    rng = np.random.default_rng(seed)
    n = 300
    points = rng.random((n, 3)) + 1
    points[:, 2] = 4 - points[:, 0] - points[:, 1] + 0.3 * rng.random(n)
    points[40] = points[39]  # an exact copy
    points[60, 0] = points[59, 0]  # a tie in one objective
    widths = width * rng.random((n, 1))
    low, high = points * (1 - widths), points * (1 + widths)
    mask, front = NoisyFront.of(points, low, high)
    returned = 0
    for step in range(150):
        # Mostly members, as re-measurements are; sometimes a point off the front.
        members = front.keys
        i = int(rng.choice(members) if step % 4 else rng.integers(n))
        if i in members:
            held = dominated_by(low, high[i : i + 1]) & ~np.isin(np.arange(n), members)
            rivals = np.flatnonzero(held)
            size = len(front)
            front = front.remove(i, (rivals, points[rivals], low[rivals], high[rivals]))
            returned += len(front) - (size - 1)
        # values move, and the interval narrows (once in a while the point jumps: behind,
        # where what it held off comes back, or ahead)
        jump = {0: 1.3, 5: 0.85}.get(step % 10, 1.0)
        points[i] *= jump * (1 + width * rng.normal(0, 1, 3))
        widths[i] *= 0.8
        low[i], high[i] = points[i] * (1 - widths[i]), points[i] * (1 + widths[i])
        joined = front.insert(i, points[i], low[i], high[i])
        if joined is not None:
            front, _ = joined
        mask, whole = NoisyFront.of(points, low, high)
        assert_same_front(front, whole)
    assert returned > 0 and 1 < whole.plain.sum() <= len(whole) < n


def test_beyond_doubt_shrinks_as_the_intervals_grow() -> None:
    rng = np.random.default_rng(6)
    points = rng.random((300, 3)) + 1
    sizes = []
    for w in (0.0, 0.02, 0.1):
        low, high = points * (1 - w), points * (1 + w)
        sizes.append(beyond_doubt(low, high, front_beyond_noise(points, low, high)[0]).sum())
    assert sizes[0] > sizes[1] > sizes[2]


def test_beyond_doubt_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="members"):
        beyond_doubt([[1.0, 1.0]], [[1.0, 1.0]], [True, False])
