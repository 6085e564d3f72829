"""The analytic FLOPs proxy against torch's own FLOP counter on the built decoders."""

from __future__ import annotations

import random

import pytest

from archvocab.registry import get_kind, parse_space
from proxies.flops import REFERENCE_TOKENS, flops
from proxies.registry import get_proxy
from tests.factories import TINY_SPACES

torch = pytest.importorskip("torch", reason="the check runs the built model")
from torch.nn import functional as F  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402


def _math_attention(q, k, v, attn_mask=None, is_causal=False, **_):
    """Scaled dot-product attention as plain matmuls, which FlopCounterMode counts (its CPU
    fused kernel is not counted). Same products as the fused kernel: q.k^T and the mix."""
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    if is_causal:
        n, m = scores.shape[-2:]
        future = torch.ones(n, m, dtype=torch.bool).triu(1 + m - n)
        scores = scores.masked_fill(future, float("-inf"))
    if attn_mask is not None:
        scores = scores + attn_mask
    return scores.softmax(-1) @ v


def _counted(spec, monkeypatch) -> int:
    """FLOPs torch counts in the decoder modules of one REFERENCE_TOKENS-token forward."""
    builder = get_kind(spec.kind).load_builder()
    model = builder.build_model(spec).eval()
    (tokens,) = builder.example_inputs(
        spec, 1, min(REFERENCE_TOKENS, spec.max_seq_len), torch.Generator().manual_seed(0)
    )
    monkeypatch.setattr(F, "scaled_dot_product_attention", _math_attention)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(tokens)
    names = {id(m): n for n, m in model.named_modules()}
    root = type(model).__name__
    per_module = counter.get_flop_counts()
    decoder = [f"{root}.{names[id(m)]}" for m in model.decoder_modules()]
    return sum(sum(per_module.get(name, {}).values()) for name in decoder)


@pytest.mark.parametrize("kind", ["gpt2", "transxl"])
def test_flops_equal_what_torch_counts_in_the_decoder(kind, monkeypatch) -> None:
    space = parse_space({**TINY_SPACES[kind], "n_layer": {"min": 1, "max": 4}})
    rng = random.Random(kind)
    for _ in range(4):
        spec = space.sample(rng)
        assert flops(spec) == _counted(spec, monkeypatch) > 0


def test_flops_is_a_registered_zero_cost_proxy_for_decoders() -> None:
    proxy = get_proxy("flops")
    assert proxy.cost == "zero" and proxy.kinds == ("gpt2", "transxl")
    small = parse_space(TINY_SPACES["gpt2"]).sample(random.Random(0))
    bigger = type(small).from_dict({**small.to_dict(), "d_inner": [4096] * small.n_layer})
    assert proxy.score(bigger) > proxy.score(small)
