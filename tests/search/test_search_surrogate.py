"""search.surrogate: exact recovery, relative vs absolute fits, spread, shifts, features."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from search_factories import score, small_space

from archvocab.spaces.gpt2.space import GPT2Space
from proxies.flops import flops
from search.surrogate import CostModel, analytic_features


def gpt2_features(n: int, seed: int) -> list[list[float]]:
    """Analytic features of n random members of the default GPT-2 space (with flops)."""
    space, rng = GPT2Space(), random.Random(seed)
    specs = [space.sample(rng) for _ in range(n)]
    return [analytic_features(s, {**score(s), "flops": float(flops(s))}) for s in specs]


def test_analytic_features_order_and_skipped_counts() -> None:
    spec = small_space().sample(random.Random(0))
    proxies = score(spec)
    assert analytic_features(spec, proxies) == [
        1.0,
        proxies["decoder_params"],
        proxies["total_params"],
        float(spec.n_layer),
    ]
    shuffled = {"flops": 7.0, "synflow": -3.0, "total_params": 5.0, "decoder_params": 3.0}
    assert analytic_features(spec, shuffled) == [1.0, 3.0, 5.0, 7.0, float(spec.n_layer)]
    assert analytic_features(spec, {}) == [1.0, float(spec.n_layer)]


def test_recovers_an_exactly_linear_target_on_real_counts() -> None:
    """decoder_params, total_params and flops are nearly collinear and differ by 1e3 in scale."""
    train, test = gpt2_features(40, seed=1), gpt2_features(200, seed=2)
    coef = np.array([3.0, 2e-6, 5e-7, 1e-9, 0.4])

    def target(x):
        return np.asarray(x) @ coef

    model = CostModel(train, target(train))
    assert model.relative and model.n == 40
    assert model.spread < 1e-9
    predicted = model.predict(test)
    assert np.max(np.abs(predicted / target(test) - 1)) < 1e-9


def test_recovers_a_linear_target_with_exactly_collinear_features() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.uniform(1, 10, 30), rng.uniform(100, 1000, 30)
    # Columns 2 and 4 are combinations of others: the system is rank-deficient.
    x = np.column_stack([np.ones(30), a, 2 * a, b, a + b / 100])
    y = 5 + 3 * a + 0.01 * b
    model = CostModel(x[:20], y[:20])
    assert model.spread < 1e-9
    assert np.max(np.abs(model.predict(x[20:]) / y[20:] - 1)) < 1e-9
    # An absolute-mode target (values on both sides of 0) is recovered exactly too.
    centred = y - np.median(y)
    absolute = CostModel(x[:20], centred[:20])
    assert not absolute.relative and absolute.spread < 1e-9 * y.max()
    assert np.max(np.abs(absolute.predict(x[20:]) - centred[20:])) < 1e-9 * y.max()


def test_relative_fit_for_positive_targets_and_absolute_fit_otherwise() -> None:
    """With only an intercept the fit is a constant c, derivable by hand: relative least
    squares minimises sum (1 - c / y)^2, so c = sum(1/y) / sum(1/y^2); absolute least squares
    gives the mean."""
    ones = [[1.0], [1.0]]
    relative = CostModel(ones, [1.0, 2.0])
    assert relative.relative
    c = (1 + 1 / 2) / (1 + 1 / 4)
    assert relative.predict([[1.0]])[0] == pytest.approx(c)  # 1.2, not the mean 1.5
    assert relative.spread == pytest.approx(
        math.sqrt((math.log(1 / c) ** 2 + math.log(2 / c) ** 2) / 2)
    )

    zero = CostModel(ones, [0.0, 2.0])
    assert not zero.relative and zero.predict([[1.0]])[0] == pytest.approx(1.0)
    negative = CostModel(ones, [-1.0, 3.0])
    assert not negative.relative
    assert negative.predict([[1.0]])[0] == pytest.approx(1.0)
    assert negative.spread == pytest.approx(2.0)


def test_relative_mode_is_scale_free_and_absolute_mode_shift_free() -> None:
    rng = np.random.default_rng(1)
    x = np.column_stack([np.ones(50), rng.uniform(1, 5, 50)])
    y = (2 + x[:, 1]) * np.exp(rng.normal(0, 0.2, 50))
    base = CostModel(x, y)
    scaled = CostModel(x, 1000 * y)
    assert base.relative and scaled.relative
    assert scaled.spread == pytest.approx(base.spread, rel=1e-9)
    assert scaled.predict(x) == pytest.approx(1000 * base.predict(x), rel=1e-9)

    z = y - 4  # crosses zero: absolute errors, so shifting the targets shifts the fit
    assert z.min() < 0 < z.max()
    low = CostModel(x, z)
    shifted = CostModel(x, z - 10)
    assert not shifted.relative
    assert shifted.spread == pytest.approx(low.spread, rel=1e-9)
    assert shifted.predict(x) == pytest.approx(low.predict(x) - 10, rel=1e-9)
    assert CostModel(x, 1000 * z).spread == pytest.approx(1000 * low.spread, rel=1e-9)


def test_spread_on_exact_data_and_on_log_normal_noise() -> None:
    """y = f(x) exp(e), e ~ N(0, s^2). Relative least squares settles at c f(x) with
    c = E[exp(-e)] / E[exp(-2e)] = exp(-1.5 s^2), so the log-residuals are e + 1.5 s^2 and
    their root mean square tends to sqrt(s^2 + 2.25 s^4)."""
    rng = np.random.default_rng(2)
    n, s = 20_000, 0.3
    x = np.column_stack([np.ones(n), rng.uniform(1, 10, n), rng.uniform(0, 3, n)])
    f = x @ np.array([2.0, 1.5, 4.0])
    assert CostModel(x, f).spread < 1e-9
    model = CostModel(x, f * np.exp(rng.normal(0, s, n)))
    expected = math.sqrt(s**2 + 2.25 * s**4)  # 0.329; the plain s would be 0.3
    assert model.spread == pytest.approx(expected, rel=0.02)
    assert np.median(model.predict(x) / f) == pytest.approx(math.exp(-1.5 * s**2), rel=0.02)

    # Absolute mode: Gaussian noise of known sigma around a line through zero.
    y = x @ np.array([-10.0, 2.0, 1.0]) + rng.normal(0, 0.7, n)
    absolute = CostModel(x, y)
    assert not absolute.relative
    assert absolute.spread == pytest.approx(0.7, rel=0.02)


def test_shifted_moves_by_the_spread_in_the_stated_direction() -> None:
    rng = np.random.default_rng(3)
    x = np.column_stack([np.ones(100), rng.uniform(1, 5, 100)])
    y = (1 + x[:, 1]) * np.exp(rng.normal(0, 0.1, 100))
    relative = CostModel(x, y)
    absolute = CostModel(x, y - 3)
    assert relative.relative and not absolute.relative
    for model in (relative, absolute):
        assert model.spread > 0
        values = model.predict(x)
        up, down = model.shifted(values, 1.0), model.shifted(values, -2.0)
        assert (up > values).all() and (down < values).all()
        assert (model.shifted(values, 0.0) == values).all()
        if model.relative:
            assert up / values == pytest.approx(np.full(100, math.exp(model.spread)))
            assert down / values == pytest.approx(np.full(100, math.exp(-2 * model.spread)))
        else:
            assert up - values == pytest.approx(np.full(100, model.spread))
            assert values - down == pytest.approx(np.full(100, 2 * model.spread))


def test_relative_predictions_stay_positive_when_extrapolating() -> None:
    x = np.column_stack([np.ones(20), np.linspace(10, 20, 20)])
    y = x[:, 1] - 9  # positive on the data, negative below x = 9
    model = CostModel(x, y)
    far_below = model.predict([[1.0, 0.0], [1.0, -100.0]])
    assert (far_below > 0).all()
    assert model.predict([[1.0, 15.0]])[0] == pytest.approx(6.0)


def test_too_few_or_mismatched_targets_are_rejected() -> None:
    with pytest.raises(ValueError, match="n >= 2"):
        CostModel([[1.0, 2.0]], [3.0])
    with pytest.raises(ValueError):
        CostModel([], [])
    with pytest.raises(ValueError):
        CostModel([[1.0], [1.0], [1.0]], [1.0, 2.0])
    with pytest.raises(ValueError):
        CostModel([1.0, 2.0], [1.0, 2.0])  # features must be 2-D


def test_the_form_with_the_smaller_leave_one_out_error_is_chosen() -> None:
    rng = np.random.default_rng(4)
    params = rng.uniform(1e5, 1e8, 200)
    layers = rng.integers(2, 17, 200).astype(float)
    features = np.column_stack([np.ones(200), params, layers])
    noise = np.exp(rng.normal(0, 0.01, 200))
    additive = (3.0 + 2e-6 * params + 0.5 * layers) * noise
    multiplicative = 1e-3 * params**0.7 * layers**1.3 * noise
    linear, power = CostModel(features, additive), CostModel(features, multiplicative)
    assert linear.form == "linear" and power.form == "power"
    for model, target in ((linear, additive), (power, multiplicative)):
        relative_error = np.abs(model.predict(features) / target - 1)
        assert np.median(relative_error) < 0.02
    negative = CostModel(features, additive - np.median(additive))
    assert negative.form == "linear" and not negative.relative
