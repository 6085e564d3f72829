"""Residual models: where a cost model is off, and how sure that is, candidate by candidate.

A `CostModel` predicts latency and memory from analytic counts within a few percent, but
its error is not the same everywhere in a space, and its one typical residual (`spread`)
says nothing about where it knows little. A `ResidualModel` fits scikit-learn's Gaussian
process to the cost model's residuals (log(measured / predicted) for positive targets,
measured - predicted otherwise) over the candidate's standardised log counts. Its
posterior gives each candidate its own correction and its own uncertainty. A residual is
a small, smooth function, so it takes far fewer results than the raw objective would.

Fitting is deterministic: one run of the optimiser from fixed starting hyperparameters,
no random restarts, a fixed random_state. Its cost grows with the cube of the results,
so it fits the `MAX_RESULTS` last ones in proposal order (the search's latest region).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Kernel, Matern, WhiteKernel
from threadpoolctl import ThreadpoolController

from search.surrogate import CostModel

MIN_RESULTS = 8  # as many as the cost models need on five counts (hwnas._fit_models)
MAX_RESULTS = 150  # a fit on 150 results takes about 0.2 s (docs/benchmarks.md, issue 22)


def _kernel(dimensions: int) -> Kernel:
    """A smooth trend with one length scale per input, plus measurement noise.

    The residuals are standardised (`normalize_y`), so the bounds are in units of their
    spread: the noise may explain anything from all of it down to 1% of it (a device never
    repeats itself exactly); length scales stay within the scale of the standardised inputs
    (shorter would memorise single results, longer is a constant).
    """
    return ConstantKernel(1.0, (1e-2, 1e1)) * Matern(
        length_scale=np.ones(dimensions), length_scale_bounds=(5e-2, 2e1), nu=2.5
    ) + WhiteKernel(noise_level=0.1, noise_level_bounds=(1e-4, 1.0))


@functools.cache
def _blas() -> ThreadpoolController:
    """The BLAS libraries loaded (looked up once: it takes milliseconds). A threaded BLAS on
    matrices this small mostly waits for its threads: on 2 shared cores one thread fitted
    200 results in 0.2 s, all of them in 3.5 s."""
    return ThreadpoolController()


def structure(features: Sequence[Sequence[float]]) -> NDArray[np.float64]:
    """The residual model's inputs from `analytic_features` rows: the logs of the counts and
    the depth (costs scale multiplicatively with them), the constant column dropped."""
    x = np.asarray(features, dtype=float)
    return np.log(np.maximum(x[:, 1:], 1e-12))


class ResidualModel:
    """A `CostModel` corrected by a Gaussian process of its residuals.

    Raises ValueError when it cannot be fitted (too few results, residuals or a fit that are
    not finite, a kernel matrix that is not positive definite); a strategy then falls back on
    the plain cost model.
    """

    def __init__(
        self, base: CostModel, features: Sequence[Sequence[float]], targets: Sequence[float]
    ) -> None:
        x = np.asarray(features, dtype=float)[-MAX_RESULTS:]
        y = np.asarray(targets, dtype=float)[-MAX_RESULTS:]
        if len(y) < MIN_RESULTS:
            raise ValueError(f"{len(y)} results, fewer than the {MIN_RESULTS} it needs")
        self.base = base
        self.relative = base.relative
        with np.errstate(divide="ignore", invalid="ignore"):
            fitted = base.predict(x)
            residual = np.log(y / fitted) if self.relative else y - fitted
        if not np.isfinite(residual).all():
            raise ValueError("the cost model's residuals are not finite")
        inputs = structure(x)
        self._varying = inputs.std(axis=0) > 0
        inputs = inputs[:, self._varying]
        self._centre = inputs.mean(axis=0)
        self._scale = inputs.std(axis=0)
        self._gp = GaussianProcessRegressor(
            _kernel(inputs.shape[1]), normalize_y=True, n_restarts_optimizer=0, random_state=0
        )
        with warnings.catch_warnings(), _blas().limit(limits=1, user_api="blas"):
            # A hyperparameter at its bound is a fit all the same (pure noise, a flat trend).
            warnings.simplefilter("ignore", ConvergenceWarning)
            self._gp.fit(self._inputs(x), residual)
        mean, std = self.posterior(x)
        if not (np.isfinite(mean).all() and np.isfinite(std).all()):
            raise ValueError("the fitted posterior is not finite")
        self.n = len(y)

    def _inputs(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        return (structure(x)[:, self._varying] - self._centre) / self._scale

    def posterior(
        self, features: Sequence[Sequence[float]]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The residual's posterior mean and standard deviation (log-ratio or absolute) per
        candidate; the deviation includes the measurement noise, as the cost model's
        `spread` does."""
        x = np.asarray(features, dtype=float).reshape(-1, len(self._varying) + 1)
        if not len(x):
            return np.zeros(0), np.zeros(0)
        with _blas().limit(limits=1, user_api="blas"):
            mean, std = self._gp.predict(self._inputs(x), return_std=True)
        return mean, std

    def predict(self, features: Sequence[Sequence[float]]) -> NDArray[np.float64]:
        return self.predict_shifted(features, 0.0)

    def predict_shifted(
        self, features: Sequence[Sequence[float]], sigmas: float
    ) -> NDArray[np.float64]:
        """Predictions moved by `sigmas` posterior deviations of each candidate (positive:
        larger values)."""
        base = self.base.predict(features)
        mean, std = self.posterior(features)
        shift = mean + sigmas * std
        return base * np.exp(shift) if self.relative else base + shift
