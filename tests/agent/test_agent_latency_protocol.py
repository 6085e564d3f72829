"""The latency protocol with a fake clock and fake models: deterministic, no real timing."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
from scipy.stats import binom

from agent import latency_protocol
from agent.latency_protocol import median_ci, median_ci_ranks, run_protocol
from archvocab.wire import MeasurementSettings

FAST = {"warmup": 3, "warmup_min_s": 0.0, "warmup_max_s": 5.0, "min_time_s": 0.0}


class FakeModel:
    """A model whose n back-to-back runs advance a fake clock by n * per_run(i) seconds."""

    def __init__(self, per_run: Callable[[int], float]) -> None:
        self.per_run = per_run
        self.now = 0.0
        self.runs = 0
        self.calls: list[int] = []

    def clock(self) -> float:
        return self.now

    def time_runs(self, n: int) -> float:
        self.calls.append(n)
        elapsed = 0.0
        for _ in range(n):
            elapsed += self.per_run(self.runs)
            self.runs += 1
        self.now += elapsed
        return elapsed


def noisy(base_s: float, sigma: float, seed: int = 0) -> Callable[[int], float]:
    rng = random.Random(seed)
    return lambda i: base_s * math.exp(rng.gauss(0.0, sigma))


def settings(**changes: float) -> MeasurementSettings:
    return MeasurementSettings(**{**FAST, **changes})


def run(model: FakeModel, **changes: float) -> latency_protocol.LatencyStats:
    return run_protocol(model.time_runs, settings(**changes), clock=model.clock)


# -- the confidence interval of the median ----------------------------------------------------
def expected_j(n: int, confidence: float) -> int:
    """Largest 1-based rank j <= n // 2 with P(Binom(n, 1/2) <= j - 1) <= (1 - confidence) / 2."""
    tail = (1.0 - confidence) / 2.0
    best = 0
    for j in range(1, n // 2 + 1):
        if binom.cdf(j - 1, n, 0.5) <= tail:
            best = j
    return best


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 9, 10, 20, 51, 100, 333, 1000])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99])
def test_median_ci_ranks_match_the_binomial(n: int, confidence: float) -> None:
    lo, hi = median_ci_ranks(n, confidence)
    j = expected_j(n, confidence)
    if j == 0:  # too few samples for this confidence: the whole range
        assert (lo, hi) == (0, n - 1)
        return
    assert (lo, hi) == (j - 1, n - j)
    coverage = 1 - 2 * binom.cdf(j - 1, n, 0.5)
    assert coverage >= confidence - 1e-12
    if j + 1 <= n // 2:  # one rank tighter would fall short
        assert 1 - 2 * binom.cdf(j, n, 0.5) < confidence


@pytest.mark.parametrize("n", [1500, 5000, 10000])
def test_large_n_normal_approximation_is_within_one_rank(n: int) -> None:
    lo, hi = median_ci_ranks(n, 0.95)
    j = expected_j(n, 0.95)
    assert abs((lo + 1) - j) <= 1 and lo + hi == n - 1


def test_median_ci_brackets_the_median_of_sorted_samples() -> None:
    samples = [5.0, 1.0, 4.0, 2.0, 3.0, 9.0, 7.0, 8.0, 6.0, 10.0, 11.0]
    lo, hi = median_ci(samples, 0.95)
    ordered = sorted(samples)
    j = expected_j(len(samples), 0.95)
    assert (lo, hi) == (ordered[j - 1], ordered[len(samples) - j])
    assert lo <= 6.0 <= hi
    with pytest.raises(ValueError, match="at least one sample"):
        median_ci_ranks(0, 0.95)


# -- stopping ---------------------------------------------------------------------------------
def test_low_noise_stops_at_the_ci_target() -> None:
    model = FakeModel(noisy(0.010, 0.002))
    stats = run(model, min_samples=10, ci_target=0.02)
    assert stats.stop_reason == "ci_target"
    assert stats.samples == len(stats.samples_ms) == 10  # tight at the first check
    assert stats.ci_rel <= 0.02
    assert stats.ci_low_ms <= stats.median_ms <= stats.ci_high_ms
    assert stats.median_ms == pytest.approx(10.0, rel=0.01)


def test_high_noise_stops_at_the_time_cap() -> None:
    model = FakeModel(noisy(0.010, 0.5))
    stats = run(model, min_samples=10, ci_target=0.001, max_time_s=2.0)
    assert stats.stop_reason == "time_cap"
    assert 2.0 <= stats.timed_s < 2.0 + 0.2  # one sample past the cap at most
    assert stats.ci_rel > 0.001 and stats.samples >= 10


def test_max_samples_stops_first_when_lower() -> None:
    model = FakeModel(noisy(0.010, 0.5))
    stats = run(model, min_samples=5, max_samples=20, ci_target=0.001, max_time_s=100.0)
    assert stats.stop_reason == "max_samples" and stats.samples == 20


def test_min_samples_and_min_time_are_honoured_before_stopping() -> None:
    model = FakeModel(lambda i: 0.010)  # no noise at all: the CI is zero wide
    stats = run(model, min_samples=7, min_time_s=1.0)
    assert stats.stop_reason == "ci_target"
    assert stats.timed_s >= 1.0 and stats.samples >= 100  # 10 ms each


# -- warm-up ----------------------------------------------------------------------------------
def slow_start(i: int) -> float:
    """Cold for 20 runs, getting faster (caches, clocks, lazy init): 50 ms down to 12 ms, then
    10 ms. (A cold phase of constant speed would look stable: no protocol could tell.)"""
    return 0.010 + 0.040 * (1 - i / 20) if i < 20 else 0.010


def test_warm_up_lasts_until_the_time_per_run_is_stable() -> None:
    model = FakeModel(slow_start)
    stats = run(model, min_samples=10)
    assert stats.warmup_stable
    assert (
        stats.warmup_runs >= 20 + latency_protocol.STABLE_WINDOW
    )  # a window of fast runs at least
    assert stats.warmup_s == pytest.approx(sum(slow_start(i) for i in range(stats.warmup_runs)))
    assert max(stats.samples_ms) == pytest.approx(10.0)  # no slow run was timed


def test_warm_up_gives_up_at_its_time_cap_unstable() -> None:
    model = FakeModel(slow_start)
    stats = run(model, warmup_max_s=0.5, min_samples=5)
    assert not stats.warmup_stable
    spent = [sum(slow_start(i) for i in range(n)) for n in range(30)]
    runs = next(n for n, s in enumerate(spent) if s >= 0.5)  # the first run past the cap
    assert stats.warmup_runs == runs and stats.warmup_s == pytest.approx(spent[runs])


def test_warm_up_runs_at_least_the_minimum_count_and_time() -> None:
    model = FakeModel(lambda i: 0.010)
    stats = run(model, warmup=50, warmup_min_s=0.8)
    assert stats.warmup_runs >= 80 and stats.warmup_stable


def test_no_warm_up_still_sizes_the_inner_repetition() -> None:
    model = FakeModel(lambda i: 0.0001)
    stats = run(model, warmup=0, warmup_max_s=0.0, min_samples=5)
    assert (stats.warmup_runs, stats.warmup_stable) == (0, False)
    assert stats.inner_repeats == 10


# -- inner repetition -------------------------------------------------------------------------
def test_sub_millisecond_models_are_timed_in_groups() -> None:
    model = FakeModel(lambda i: 0.00005)  # 50 microseconds
    stats = run(model, min_samples=5, min_sample_ms=1.0)
    assert stats.inner_repeats == 20
    timed_calls = model.calls[stats.warmup_runs :]
    assert timed_calls and set(timed_calls) == {20}
    assert all(s == pytest.approx(0.05) for s in stats.samples_ms)  # per run, not per group


@pytest.mark.parametrize(
    ("run_s", "min_sample_ms", "expected"),
    [
        (0.010, 1.0, 1),
        (0.0004, 1.0, 3),
        (1e-9, 1.0, latency_protocol.MAX_INNER_REPEATS),
        (0.001, 0.0, 1),
    ],
)
def test_inner_repeats(run_s: float, min_sample_ms: float, expected: int) -> None:
    assert latency_protocol.inner_repeats(run_s, min_sample_ms) == expected
    assert latency_protocol.inner_repeats(None, min_sample_ms) == 1


def test_summary_statistics_are_consistent() -> None:
    model = FakeModel(noisy(0.010, 0.2, seed=3))
    stats = run(model, min_samples=30, max_samples=30)
    values = sorted(stats.samples_ms)
    assert stats.min_ms == values[0]
    assert stats.min_ms <= stats.median_ms <= stats.p90_ms <= values[-1]
    assert stats.median_ms == pytest.approx((values[14] + values[15]) / 2)
    assert stats.iqr_ms > 0 and stats.confidence == 0.95
