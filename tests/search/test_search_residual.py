"""ResidualModel: a Gaussian process of a cost model's residuals corrects what the counts miss,
is surer near its results than far from them, fits deterministically, and refuses what it
cannot fit."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from search_factories import score

from archvocab.spaces.gpt2.space import GPT2Space, IntRange
from search.residual import MIN_RESULTS, ResidualModel
from search.surrogate import CostModel, analytic_features


def rows_of(n: int, seed: int, space: GPT2Space | None = None) -> np.ndarray:
    rng = random.Random(seed)
    space = space or GPT2Space(n_layer=IntRange(2, 8))
    specs = [space.sample(rng) for _ in range(n)]
    return np.array([analytic_features(s, score(s)) for s in specs])


def latency(rows: np.ndarray) -> np.ndarray:
    """Linear in the counts, times a smooth effect of depth the linear model cannot fit
    (a per-layer overhead that saturates), times 1% noise seeded by the row."""
    n_layer = rows[:, -1]
    noise = np.random.default_rng(0).normal(0, 0.01, len(rows))
    return rows[:, 1] * 1e-5 * np.exp(0.15 * np.sin(n_layer) + noise)


def test_corrects_a_smooth_residual_the_cost_model_misses() -> None:
    train, test = rows_of(80, 0), rows_of(300, 1)
    y_train, y_test = latency(train), latency(test)
    base = CostModel(train, y_train)
    model = ResidualModel(base, train, y_train)
    plain = np.log(y_test / base.predict(test))
    corrected = np.log(y_test / model.predict(test))
    assert np.sqrt(np.mean(corrected**2)) < 0.5 * np.sqrt(np.mean(plain**2))
    # Its uncertainty is about the noise left, not the cost model's larger residual.
    _, std = model.posterior(test)
    assert np.median(std) < 0.5 * base.spread


def test_each_candidate_gets_its_own_uncertainty_larger_far_from_the_results() -> None:
    shallow = GPT2Space(n_layer=IntRange(2, 4))
    train = rows_of(40, 0, shallow)
    y = latency(train)
    model = ResidualModel(CostModel(train, y), train, y)
    _, near = model.posterior(rows_of(50, 1, shallow))
    _, far = model.posterior(rows_of(50, 1, GPT2Space(n_layer=IntRange(12, 16))))
    assert np.median(far) > 1.5 * np.median(near)


def test_shifted_predictions_move_by_each_candidates_deviation() -> None:
    train = rows_of(40, 0)
    y = latency(train)
    model = ResidualModel(CostModel(train, y), train, y)
    test = rows_of(20, 1)
    _, std = model.posterior(test)
    ratio = model.predict_shifted(test, -2.0) / model.predict(test)
    assert np.allclose(ratio, np.exp(-2.0 * std))


def test_fitting_is_deterministic() -> None:
    train, test = rows_of(60, 0), rows_of(30, 1)
    y = latency(train)
    first = ResidualModel(CostModel(train, y), train, y).predict_shifted(test, 1.0)
    again = ResidualModel(CostModel(train, y), train, y).predict_shifted(test, 1.0)
    assert np.array_equal(first, again)


def test_too_few_results_or_residuals_that_are_not_finite_are_refused() -> None:
    train = rows_of(MIN_RESULTS - 1, 0)
    y = latency(train)
    with pytest.raises(ValueError, match=f"fewer than the {MIN_RESULTS} it needs"):
        ResidualModel(CostModel(train, y), train, y)
    train = rows_of(20, 0)
    y = latency(train)
    base = CostModel(train, y)
    y[3] = math.inf
    with pytest.raises(ValueError, match="residuals are not finite"):
        ResidualModel(base, train, y)
