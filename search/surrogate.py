"""Online cost models: what a candidate will measure, predicted from its analytic counts.

On a given device, latency and peak memory of a Transformer follow its analytic counts
closely (FLOPs, parameters, depth: a few percent off on the table in bench/data). A
`CostModel` is a least-squares fit of one measured objective on those counts, refitted as
results arrive; it costs microseconds, so a strategy can screen hundreds of offspring per
measurement. Positive targets (latency, memory) are fitted on relative error, so a 5 ms and
a 500 ms model weigh alike; others (a low-cost proxy that can be negative) on absolute error.
`spread` is the typical residual (log-ratio or absolute), used for optimism and reporting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from archvocab.registry import ArchSpec

# The zero-cost counts a model may use, when the space's scorer provides them.
COUNTS = ("decoder_params", "total_params", "flops")


def analytic_features(spec: ArchSpec, proxies: Mapping[str, float]) -> list[float]:
    """[1, decoder_params, total_params, flops, n_layer], skipping counts the kind lacks."""
    return [1.0, *(float(proxies[c]) for c in COUNTS if c in proxies), float(spec.n_layer)]


class CostModel:
    """A linear model of one objective on analytic features, fitted by least squares."""

    def __init__(self, features: Sequence[Sequence[float]], targets: Sequence[float]) -> None:
        x = np.asarray(features, dtype=float)
        y = np.asarray(targets, dtype=float)
        if x.ndim != 2 or len(x) != len(y) or len(y) < 2:
            raise ValueError("need an (n, k) feature array and n >= 2 targets")
        self.relative = bool((y > 0).all())
        self._scale = np.abs(x).max(axis=0)
        self._scale[self._scale == 0] = 1.0
        xs = x / self._scale
        weights = 1.0 / y if self.relative else np.ones(len(y))
        a = xs * weights[:, None]
        b = y * weights
        # Plain least squares (minimum norm where under-determined): the counts are nearly
        # collinear, and a ridge penalty shrinks exactly the coefficients that matter
        # (it cost the search several percent of hypervolume on bench/data's table).
        self._coef, *_ = np.linalg.lstsq(a, b, rcond=None)
        self._floor = float(y.min()) * 0.5 if self.relative else -math.inf
        fitted = self._raw(xs)
        if self.relative:
            residual = np.log(y / fitted)
        else:
            residual = y - fitted
        self.spread = float(np.sqrt(np.mean(residual**2)))
        self.n = len(y)

    def _raw(self, xs: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.maximum(xs @ self._coef, self._floor)

    def predict(self, features: Sequence[Sequence[float]]) -> NDArray[np.float64]:
        x = np.asarray(features, dtype=float).reshape(-1, len(self._scale))
        return self._raw(x / self._scale)

    def shifted(self, values: NDArray[np.float64], sigmas: float) -> NDArray[np.float64]:
        """Predictions moved by `sigmas` typical residuals (positive: larger values)."""
        if self.relative:
            return values * math.exp(sigmas * self.spread)
        return values + sigmas * self.spread
