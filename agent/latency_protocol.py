"""The latency protocol: warm up until stable, then sample until the median is known well enough.

Runtime-neutral: it drives a `TimeRuns` callable that runs the model n times back to back and
returns the elapsed seconds (perf_counter around eager PyTorch or ONNX Runtime on a CPU, CUDA
events on a GPU). No torch here, so the ONNX Runtime child can use it too.

The stopping rule uses a distribution-free confidence interval of the median (order
statistics of a Binomial(n, 1/2)), which needs no normality: latency samples are skewed, with
a long tail from preemption.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from archvocab.wire import LatencyStats, MeasurementSettings

TimeRuns = Callable[[int], float]
"""Run the model `n` times back to back; the elapsed wall time in seconds."""

STABLE_WINDOW = 2  # warm-up is stable when two consecutive windows of runs agree
STABLE_TOLERANCE = 0.05  # ... to within 5% of each other's median
MAX_INNER_REPEATS = 100_000
_EXACT_BINOMIAL_MAX_N = 1000


def median_ci_ranks(n: int, confidence: float) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the sorted samples bounding the median with >= `confidence`.

    The interval [x_(j), x_(n-1-j)] covers the true median with probability
    1 - 2 P(Binom(n, 1/2) <= j - 1); j is the largest rank keeping that >= confidence. With too
    few samples for the confidence asked, (0, n - 1): the whole range.
    """
    if n < 1:
        raise ValueError("median_ci_ranks needs at least one sample")
    tail = (1.0 - confidence) / 2.0
    if n <= _EXACT_BINOMIAL_MAX_N:
        log_half_n = n * math.log(0.5)
        cdf, j = 0.0, 0
        while j < n // 2:
            pmf = math.exp(
                math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + log_half_n
            )
            if cdf + pmf > tail:
                break
            cdf += pmf
            j += 1
    else:  # normal approximation of the binomial, accurate at this size
        z = NormalDist().inv_cdf(1.0 - tail)
        j = max(0, math.floor((n - z * math.sqrt(n)) / 2))
    # j is now the largest 1-based rank with P(Binom(n, 1/2) <= j - 1) <= tail.
    if j < 1:
        return 0, n - 1
    return j - 1, n - j


def median_ci(samples: Sequence[float], confidence: float) -> tuple[float, float]:
    """Distribution-free `confidence` interval of the median of `samples`."""
    ordered = sorted(samples)
    lo, hi = median_ci_ranks(len(ordered), confidence)
    return ordered[lo], ordered[hi]


def relative_half_width(samples: Sequence[float], confidence: float) -> float:
    """The CI's larger half-width relative to the median (inf for a zero median)."""
    median = float(np.median(samples))
    lo, hi = median_ci(samples, confidence)
    if median <= 0:
        return math.inf
    return max(median - lo, hi - median) / median


@dataclass
class Warmup:
    runs: int = 0
    seconds: float = 0.0
    stable: bool = False
    per_run_s: list[float] = field(default_factory=list)

    def typical_run_s(self) -> float | None:
        """Median of the last window of warm-up runs: what one run costs now."""
        if not self.per_run_s:
            return None
        return float(np.median(self.per_run_s[-STABLE_WINDOW:]))


def is_stable(per_run_s: Sequence[float]) -> bool:
    """The last two windows of runs have medians within STABLE_TOLERANCE of each other."""
    if len(per_run_s) < 2 * STABLE_WINDOW:
        return False
    last = float(np.median(per_run_s[-STABLE_WINDOW:]))
    before = float(np.median(per_run_s[-2 * STABLE_WINDOW : -STABLE_WINDOW]))
    return before > 0 and abs(last - before) / before <= STABLE_TOLERANCE


def warm_up(
    time_runs: TimeRuns, settings: MeasurementSettings, clock: Callable[[], float]
) -> Warmup:
    """Single runs until stable with at least `warmup` runs and `warmup_min_s` seconds, or
    until `warmup_max_s` seconds are spent."""
    state = Warmup()
    start = clock()
    while True:
        elapsed = clock() - start
        enough = state.runs >= settings.warmup and elapsed >= settings.warmup_min_s
        state.stable = is_stable(state.per_run_s)
        if (enough and state.stable) or elapsed >= settings.warmup_max_s:
            break
        state.per_run_s.append(time_runs(1))
        state.runs += 1
    state.seconds = clock() - start
    return state


def inner_repeats(typical_run_s: float | None, min_sample_ms: float) -> int:
    """Runs per sample so that one sample lasts at least `min_sample_ms`."""
    if not typical_run_s or typical_run_s <= 0 or min_sample_ms <= 0:
        return 1
    return max(1, min(MAX_INNER_REPEATS, math.ceil(min_sample_ms / 1000.0 / typical_run_s)))


def _check_every(n: int) -> int:
    """Recompute the CI about 10 times per doubling of n, not after every sample."""
    return max(1, n // 10)


def sample(
    time_runs: TimeRuns,
    settings: MeasurementSettings,
    inner: int,
    clock: Callable[[], float],
) -> tuple[list[float], str, float]:
    """Timed samples (seconds per run) until the stopping rule fires; (samples, reason, secs)."""
    samples: list[float] = []
    start = clock()
    next_check = settings.min_samples
    while True:
        samples.append(time_runs(inner) / inner)
        n, elapsed = len(samples), clock() - start
        if n >= settings.max_samples:
            return samples, "max_samples", elapsed
        if n >= settings.min_samples and elapsed >= settings.max_time_s:
            return samples, "time_cap", elapsed
        if n >= next_check and elapsed >= settings.min_time_s:
            if relative_half_width(samples, settings.confidence) <= settings.ci_target:
                return samples, "ci_target", elapsed
            next_check = n + _check_every(n)


def summarize(
    samples_ms: Sequence[float],
    *,
    confidence: float,
    inner: int,
    stop_reason: str,
    warmup: Warmup,
    timed_s: float,
) -> LatencyStats:
    values = np.asarray(samples_ms, dtype=float)
    p25, median, p75, p90 = np.percentile(values, [25, 50, 75, 90])
    lo, hi = median_ci(samples_ms, confidence)
    return LatencyStats(
        median_ms=float(median),
        p90_ms=float(p90),
        min_ms=float(values.min()),
        iqr_ms=float(p75 - p25),
        ci_low_ms=float(lo),
        ci_high_ms=float(hi),
        ci_rel=relative_half_width(samples_ms, confidence) if median > 0 else 0.0,
        confidence=confidence,
        samples=len(samples_ms),
        inner_repeats=inner,
        samples_ms=[float(v) for v in samples_ms],
        stop_reason=stop_reason,
        warmup_runs=warmup.runs,
        warmup_s=warmup.seconds,
        warmup_stable=warmup.stable,
        timed_s=timed_s,
    )


def run_protocol(
    time_runs: TimeRuns,
    settings: MeasurementSettings,
    clock: Callable[[], float] = time.perf_counter,
) -> LatencyStats:
    """Warm up, choose the inner repetition, sample until the median's CI is tight enough."""
    warmup = warm_up(time_runs, settings, clock)
    typical = warmup.typical_run_s()
    if typical is None:  # no warm-up asked for: one run to size the inner repetition
        typical = time_runs(1)
    inner = inner_repeats(typical, settings.min_sample_ms)
    samples_s, reason, timed_s = sample(time_runs, settings, inner, clock)
    return summarize(
        [s * 1000.0 for s in samples_s],
        confidence=settings.confidence,
        inner=inner,
        stop_reason=reason,
        warmup=warmup,
        timed_s=timed_s,
    )
