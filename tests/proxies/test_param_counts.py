"""The analytic counts equal the parameters of the model archvocab.spaces.gpt2.build builds."""

from __future__ import annotations

import math
import random

import pytest

from archvocab.errors import InvalidSpec
from archvocab.spaces.gpt2.space import GPT2Space, IntRange
from archvocab.spaces.gpt2.spec import GPT2Spec
from proxies import PROXIES, get_proxy
from proxies.params import decoder_params, total_params

torch = pytest.importorskip("torch", reason="counting a built model needs torch")
from archvocab.spaces.gpt2.build import build_model, count_parameters  # noqa: E402

SMALL = dict(
    n_layer=IntRange(1, 4),
    d_model=IntRange(32, 128, 32),
    d_inner=IntRange(64, 512, 32),
    d_embed=(32, 64, 128),
    vocab_size=1000,
    n_positions=64,
)


def assert_counts_match(spec: GPT2Spec, model: torch.nn.Module) -> None:
    assert decoder_params(spec) == count_parameters(model.decoder_modules()), spec
    assert total_params(spec) == count_parameters(model), spec


def test_counts_match_built_models() -> None:
    spaces = [
        GPT2Space(**SMALL, cutoffs=(200, 500)),  # div_val 1/2/4, d_embed = and != d_model
        GPT2Space(**SMALL, cutoffs=(900,), d_inner_min_factor=1.7),
        GPT2Space(**SMALL, cutoffs=()),  # one cluster, projected when k > 1 (LTS lm1b's shape)
    ]
    rng = random.Random(0)
    seen = set()
    for i in range(501):
        spec = spaces[i % len(spaces)].sample(rng)
        assert_counts_match(spec, build_model(spec))
        seen.add((spec.div_val, spec.d_embed == spec.d_model, len(spec.cutoffs)))
    # Every adaptive-embedding layout was exercised.
    assert seen >= {(k, same, n) for k in (1, 2, 4) for same in (True, False) for n in (0, 1, 2)}


def test_counts_match_full_size_models() -> None:
    # Full vocabulary and widths; built on the meta device so no memory is allocated.
    rng = random.Random(1)
    for space in (GPT2Space(), GPT2Space(d_inner_min_factor=1.7)):
        for _ in range(10):
            spec = space.sample(rng)
            with torch.device("meta"):
                model = build_model(spec)
            assert_counts_match(spec, model)


def test_tied_weights_are_counted_once() -> None:
    spec = GPT2Space(**SMALL, cutoffs=(200, 500)).sample(random.Random(2))
    model = build_model(spec)
    # The softmax reuses the embedding's tables and tail projections: a count that does not
    # deduplicate sees them twice.
    naive = sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))
    assert count_parameters(model) == total_params(spec) < naive


def test_decoder_params_by_hand() -> None:
    spec = GPT2Spec(
        n_layer=2,
        d_model=4,
        d_inner=(8, 6),
        n_head=(2, 4),
        d_embed=4,
        cutoffs=(),
        vocab_size=10,
        n_positions=3,
    )
    attention = 3 * 4 * 4 + 3 * 4 + 4 * 4 + 4
    feed_forward = [4 * 8 + 8 + 8 * 4 + 4, 4 * 6 + 6 + 6 * 4 + 4]
    layer_norms = 2 * (2 * 4) * 2 + 2 * 4
    assert decoder_params(spec) == 2 * attention + sum(feed_forward) + layer_norms
    # Tables, positions and the output bias (weights tied, no projection when d_embed = d_model).
    assert total_params(spec) == decoder_params(spec) + 10 * 4 + 3 * 4 + 10


# -- the registry contract ------------------------------------------------------------------
ZERO_COST = [name for name, proxy in PROXIES.items() if proxy.cost == "zero"]


def test_cost_classes_are_declared() -> None:
    assert {proxy.cost for proxy in PROXIES.values()} <= {"zero", "low"}
    assert {"decoder_params", "total_params"} <= set(ZERO_COST)


@pytest.mark.parametrize("name", ZERO_COST)
def test_every_zero_cost_proxy_honours_the_contract(name: str) -> None:
    proxy = get_proxy(name)
    assert proxy.name == name
    assert proxy.description
    rng = random.Random(name)
    space = GPT2Space()
    for _ in range(50):
        spec = space.sample(rng)
        score = proxy.score(spec)
        assert isinstance(score, (int, float)) and math.isfinite(score)
        assert proxy.score(GPT2Spec.from_dict(spec.to_dict())) == score  # a pure function


def test_unknown_proxy_lists_the_valid_ones() -> None:
    with pytest.raises(InvalidSpec) as info:
        get_proxy("no_such_proxy")
    assert info.value.field == "proxy"
    assert info.value.message == f"unknown proxy 'no_such_proxy'; allowed: {', '.join(PROXIES)}"
