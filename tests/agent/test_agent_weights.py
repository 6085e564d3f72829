"""Cheap weights: the same model as `build_model`, with tiled instead of drawn init values."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from agent.weights import PATTERN_LEN, build_fast, deferred_init, fill
from archvocab.registry import parse_spec
from archvocab.spaces.gpt2.build import build_model, count_parameters

ADAPTIVE: dict[str, Any] = {"cutoffs": [200, 500], "div_val": 2, "d_embed": 64}
CPU = torch.device("cpu")


def params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return dict(model.named_parameters())


@pytest.mark.parametrize("changes", [{}, ADAPTIVE, {"d_embed": 32}])
def test_same_shapes_and_ties_as_the_builder(tiny_spec: dict[str, Any], changes: Any) -> None:
    spec = parse_spec({**tiny_spec, **changes})
    fast, reference = build_fast(spec, CPU), build_model(spec)
    assert {n: p.shape for n, p in params(fast).items()} == {
        n: p.shape for n, p in params(reference).items()
    }
    assert count_parameters(fast) == count_parameters(reference)
    assert fast.head.embedding is fast.embed  # the tied output layer still shares the table
    assert not fast.training


@pytest.mark.parametrize("changes", [{}, ADAPTIVE])
def test_weights_are_finite_never_denormal_and_scaled_like_the_init(
    tiny_spec: dict[str, Any], changes: Any
) -> None:
    spec = parse_spec({**tiny_spec, **changes})
    fast, reference = params(build_fast(spec, CPU)), params(build_model(spec))
    tiny = torch.finfo(torch.float32).tiny
    for name, weight in fast.items():
        assert torch.isfinite(weight).all(), name
        magnitude = weight.abs()
        assert not ((magnitude > 0) & (magnitude < tiny)).any(), name
        expected = reference[name]
        if not expected.numel():
            continue
        # same range and spread as the real init (zeros and ones stay exactly so)
        assert weight.abs().max() <= expected.abs().max() * 1.5 + 1e-6, name
        if expected.numel() >= 1000:
            assert weight.std().item() == pytest.approx(expected.std().item(), rel=0.1), name


def test_same_values_every_build(tiny_spec: dict[str, Any]) -> None:
    spec = parse_spec(tiny_spec)
    first, second = params(build_fast(spec, CPU)), params(build_fast(spec, CPU))
    assert all(torch.equal(first[name], second[name]) for name in first)


def test_the_model_computes_proper_log_probabilities(tiny_spec: dict[str, Any]) -> None:
    model = build_fast(parse_spec({**tiny_spec, **ADAPTIVE}), CPU)
    tokens = torch.randint(0, 1000, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        logp = model(tokens)
    assert logp.shape == (2, 16, 1000) and torch.isfinite(logp).all()
    assert torch.allclose(logp.exp().sum(-1), torch.ones(2, 16), atol=1e-4)


def test_deferred_init_records_and_restores_even_on_error() -> None:
    before = (torch.Tensor.uniform_, torch.Tensor.normal_)
    with pytest.raises(RuntimeError, match="boom"), deferred_init() as records:
        weight = torch.empty(3, 4)
        assert weight.uniform_(-0.5, 0.5) is weight
        torch.nn.init.normal_(torch.empty(5), mean=1.0, std=2.0)
        raise RuntimeError("boom")
    assert (torch.Tensor.uniform_, torch.Tensor.normal_) == before
    assert [(r.kind, r.a, r.b) for r in records] == [("uniform_", -0.5, 0.5), ("normal_", 1.0, 2.0)]


def test_fill_tiles_the_block_across_long_tensors() -> None:
    with deferred_init() as records:
        long = torch.empty(2 * PATTERN_LEN + 7).uniform_(-1.0, 1.0)
    fill(records)
    assert torch.equal(long[:PATTERN_LEN], long[PATTERN_LEN : 2 * PATTERN_LEN])
    assert torch.equal(long[-7:], long[:7])
    assert -1.0 <= long.min() and long.max() <= 1.0 and long.std() > 0.5
