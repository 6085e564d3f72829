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
    """A model of one objective on analytic features, fitted by least squares.

    Positive targets get two forms, and the one with the smaller leave-one-out error wins:
    linear in the counts (latency as FLOPs plus per-layer overhead; memory as parameters plus
    activations: what CPUs measure) and a power law (log target linear in log counts: costs
    that grow multiplicatively, as a depth x width interaction does). Other targets get the
    linear form on absolute error.
    """

    def __init__(self, features: Sequence[Sequence[float]], targets: Sequence[float]) -> None:
        x = np.asarray(features, dtype=float)
        y = np.asarray(targets, dtype=float)
        if x.ndim != 2 or len(x) != len(y) or len(y) < 2:
            raise ValueError("need an (n, k) feature array and n >= 2 targets")
        self.relative = bool((y > 0).all())
        self._scale = np.abs(x).max(axis=0)
        self._scale[self._scale == 0] = 1.0
        varying = x.max(axis=0) > x.min(axis=0)
        self._logged = varying & (x > 0).all(axis=0)
        self._floor = float(y.min()) * 0.5 if self.relative else -math.inf
        self.form = "linear"
        self._coef, loo = self._fit_linear(x / self._scale, y)
        if self.relative and self._logged.any():
            coef, loo_power = self._fit_power(x, y)
            if loo_power < loo:
                self.form, self._coef = "power", coef
        fitted = self.predict(x)
        residual = np.log(y / fitted) if self.relative else y - fitted
        self.spread = float(np.sqrt(np.mean(residual**2)))
        self.n = len(y)

    def _fit_linear(
        self, xs: NDArray[np.float64], y: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], float]:
        weights = 1.0 / y if self.relative else np.ones(len(y))
        # Plain least squares (minimum norm where under-determined): the counts are nearly
        # collinear, and a ridge penalty shrinks exactly the coefficients that matter
        # (it cost the search several percent of hypervolume on bench/data's table).
        a = xs * weights[:, None]
        coef, *_ = np.linalg.lstsq(a, y * weights, rcond=None)
        return coef, _loo_rms(a, y * weights - a @ coef)

    def _power_design(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        out = x / self._scale
        out[:, self._logged] = np.log(np.maximum(out[:, self._logged], 1e-12))
        return out

    def _fit_power(
        self, x: NDArray[np.float64], y: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], float]:
        a = self._power_design(x)
        coef, *_ = np.linalg.lstsq(a, np.log(y), rcond=None)
        return coef, _loo_rms(a, np.log(y) - a @ coef)

    def predict(self, features: Sequence[Sequence[float]]) -> NDArray[np.float64]:
        x = np.asarray(features, dtype=float).reshape(-1, len(self._scale))
        if self.form == "power":
            return np.exp(self._power_design(x) @ self._coef)
        return np.maximum((x / self._scale) @ self._coef, self._floor)

    def predict_shifted(
        self, features: Sequence[Sequence[float]], sigmas: float
    ) -> NDArray[np.float64]:
        """Predictions moved by `sigmas` typical residuals, the same for every candidate
        (a `search.residual.ResidualModel` moves each by its own)."""
        return self.shifted(self.predict(features), sigmas)

    def shifted(self, values: NDArray[np.float64], sigmas: float) -> NDArray[np.float64]:
        """Predictions moved by `sigmas` typical residuals (positive: larger values)."""
        if self.relative:
            return values * math.exp(sigmas * self.spread)
        return values + sigmas * self.spread


def _loo_rms(a: NDArray[np.float64], residual: NDArray[np.float64]) -> float:
    """Root-mean-square leave-one-out residual of a least-squares fit (via the hat matrix)."""
    u, sv, _ = np.linalg.svd(a, full_matrices=False)
    rank = int((sv > sv.max() * 1e-10).sum()) if len(sv) else 0
    leverage = (u[:, :rank] ** 2).sum(axis=1)
    if (leverage > 1 - 1e-9).any():
        return math.inf  # as many features as results: no estimate of what it would miss
    return float(np.sqrt(np.mean((residual / (1 - leverage)) ** 2)))
