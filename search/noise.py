"""How far a measured value may move when measured again: a device class's noise model.

A measurement's own samples say how well one process knew its median; they say nothing of
what a new process, later, will read (clocks, allocator layout, thermal state and whatever
else runs on the machine differ between processes and over minutes). The spread that matters
is learned from *repeated* measurements of the same architecture in separate processes: the
agents' periodic readings of a reference architecture, and any candidate measured more than
once. Values are modelled on the log scale (noise is relative: a 2 ms model and a 200 ms
model both move by a few percent), with a pooled within-architecture variance shrunk towards
a prior per device while evidence is scarce.

The stated interval is a prediction interval for one later re-measurement: if a value is the
mean (on the log scale) of `k` measurements and a re-measurement has the same spread, their
log-ratio has variance sigma^2 (1 + 1/k); its quantile is Student's t with the estimate's
degrees of freedom, so an interval from few readings is honestly wider.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from scipy.stats import t as student_t

from archvocab.registry import SearchSpace

METRICS = ("latency_ms", "memory_mb")

# Relative (log-scale) spread between fresh processes before any reading, per device: CPU
# latency moved 5-10% between repeated measurements here (issue 17), an H100's at batch 1 by
# 8-20%; memory read in its own pass repeats within 0.4% (bench/memory_repeat.py,
# bench/reproducibility.py), 2% leaves room for other allocators.
PRIOR_SIGMA: dict[str, dict[str, float]] = {
    "cpu": {"latency_ms": 0.05, "memory_mb": 0.02},
    "cuda": {"latency_ms": 0.10, "memory_mb": 0.02},
}
# The prior counts as this many degrees of freedom of evidence: weak, so that a few reference
# readings mostly replace it (and Student's t keeps the first intervals honestly wide).
PRIOR_DOF = 2
# What a candidate moves between fresh processes beyond what the reference's own readings
# show (log scale). Re-measured later, candidates spread more than the reference does: the
# reference is read every few jobs all through a search, a candidate once, and small models
# moved more than large ones. Two 200-candidate runs here (bench/reproducibility.py) needed a
# total spread of 3.0% and 4.5% for 95% coverage where the reference readings spread by 2.1%
# and 1.7%: an extra 2-4%. CUDA's is a guess until re-measurements on a GPU say more.
PRIOR_EXTRA: dict[str, dict[str, float]] = {
    "cpu": {"latency_ms": 0.03, "memory_mb": 0.0},
    "cuda": {"latency_ms": 0.05, "memory_mb": 0.0},
}
# Evidence the extra's prior counts as: the search's own re-measured candidates soon outweigh it.
PRIOR_EXTRA_DOF = 4


# Seeds the draw of a space's reference architecture: the same space, the same reference.
REFERENCE_SEED = 17


def reference_architecture(space: SearchSpace) -> Any:
    """The architecture every agent of a search re-measures at intervals: one fixed draw from
    the space, so a typical member of it, the same for every search of that space."""
    return space.sample(random.Random(REFERENCE_SEED))


@dataclass(frozen=True)
class NoiseModel:
    """Per metric: the log-scale standard deviation of a candidate between fresh-process
    measurements (the reference's spread and the extra candidates show beyond it), the
    degrees of freedom it rests on (the priors' included), and the reference's own part."""

    sigma: Mapping[str, float]
    dof: Mapping[str, float]
    readings: Mapping[str, int] = field(default_factory=dict)  # repeated values it learned from
    reference_sigma: Mapping[str, float] = field(default_factory=dict)

    def half_width(self, metric: str, confidence: float, repeats: int = 1) -> float:
        """Log-scale half-width of the `confidence` prediction interval of a re-measurement
        around a value that is the geometric mean of `repeats` measurements."""
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        if repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {repeats}")
        quantile = _t_quantile(confidence, self.dof[metric])
        return quantile * self.sigma[metric] * math.sqrt(1.0 + 1.0 / repeats)

    def interval(
        self, metric: str, value: float, confidence: float, repeats: int = 1
    ) -> tuple[float, float]:
        """(low, high) meant to contain a later fresh-process re-measurement of `value`."""
        half = self.half_width(metric, confidence, repeats)
        return value * math.exp(-half), value * math.exp(half)


@lru_cache(maxsize=1024)
def _t_quantile(confidence: float, dof: float) -> float:
    """Student's two-sided `confidence` quantile (scipy's ppf costs ~0.5 ms: cached)."""
    return float(student_t.ppf(0.5 + confidence / 2, dof))


def prior(device: str) -> NoiseModel:
    """The model before any repeated measurement: the reference's prior spread and the
    candidates' prior extra."""
    return fit({}, device)


def pooled_log_variance(groups: Iterable[Sequence[float]]) -> tuple[float, int, int]:
    """(variance, degrees of freedom, values used) of log values pooled within groups.

    Each group holds repeated measurements of one architecture; a group of one says nothing
    about spread and is skipped, as are non-positive values (no logarithm)."""
    squares, dof, used = 0.0, 0, 0
    for group in groups:
        logs = [math.log(v) for v in group if v > 0]
        if len(logs) < 2:
            continue
        mean = sum(logs) / len(logs)
        squares += sum((x - mean) ** 2 for x in logs)
        dof += len(logs) - 1
        used += len(logs)
    return (squares / dof if dof else 0.0), dof, used


def fit(
    groups: Mapping[str, Iterable[Sequence[float]]],
    device: str = "cpu",
    prior_dof: int = PRIOR_DOF,
    candidates: Mapping[str, Iterable[Sequence[float]]] | None = None,
) -> NoiseModel:
    """The noise model of one device class from repeated measurements, by metric.

    `groups[metric]` is a list of groups, each the values of one reference architecture
    measured in separate processes; `candidates[metric]` the same for candidates measured
    more than once. The reference's spread is their pooled variance shrunk towards the
    device's prior, (prior_dof * prior^2 + dof * pooled) / (prior_dof + dof). The extra a
    candidate shows is what the candidates' pooled variance exceeds that by (never below 0),
    shrunk the same way towards `PRIOR_EXTRA`. A candidate's spread adds the two variances;
    its degrees of freedom are Welch-Satterthwaite's for that sum.
    """
    sigma_prior = PRIOR_SIGMA.get(device, PRIOR_SIGMA["cpu"])
    extra_prior = PRIOR_EXTRA.get(device, PRIOR_EXTRA["cpu"])
    sigma, dofs, readings, reference = {}, {}, {}, {}
    for metric in METRICS:
        variance, dof, used = pooled_log_variance(groups.get(metric, ()))
        ref_var = (prior_dof * sigma_prior[metric] ** 2 + dof * variance) / (prior_dof + dof)
        ref_dof = float(prior_dof + dof)
        cand_var, cand_dof, cand_used = pooled_log_variance((candidates or {}).get(metric, ()))
        beyond = max(0.0, cand_var - ref_var)
        extra_var = (PRIOR_EXTRA_DOF * extra_prior[metric] ** 2 + cand_dof * beyond) / (
            PRIOR_EXTRA_DOF + cand_dof
        )
        extra_dof = float(PRIOR_EXTRA_DOF + cand_dof)
        total = ref_var + extra_var
        reference[metric] = math.sqrt(ref_var)
        sigma[metric] = math.sqrt(total)
        dofs[metric] = total**2 / (ref_var**2 / ref_dof + extra_var**2 / extra_dof)
        readings[metric] = used + cand_used
    return NoiseModel(sigma=sigma, dof=dofs, readings=readings, reference_sigma=reference)


def steering_widths(device: str, confidence: float) -> dict[str, float]:
    """Log half-widths within which an engine cannot tell two single measurements apart: the
    device's prior spread (not the learned one) at a normal `confidence` quantile, times
    sqrt(2) for two values. Fixed for a search, so that a restored engine proposes exactly as
    the live one did whatever readings arrived since."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    quantile = _t_quantile(confidence, math.inf)
    sigma = PRIOR_SIGMA.get(device, PRIOR_SIGMA["cpu"])
    return {metric: quantile * s * math.sqrt(2.0) for metric, s in sigma.items()}


def drift_factor(reading: float | None, level: float | None) -> float:
    """What a value measured next to a reference `reading` is multiplied by to put it at the
    reference's `level` (the median of all its readings): 1 when either is unknown."""
    if not reading or not level or reading <= 0 or level <= 0:
        return 1.0
    return level / reading
