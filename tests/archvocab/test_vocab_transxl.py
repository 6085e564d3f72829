"""The Transformer-XL space kind: spec, space, builder, and LTS's published parameter counts.

LTS's random_TransXL_* logs (wt103, lm1b, wt103_homogeneous; 485 models) are reproduced
exactly, every count of every model: `nonembedding` = decoder_params() (attention 5dw + 2w
with w = n_head x d_head, i.e. bias-free QKV, relative-position projection r_net and output
projection plus the per-layer u, v biases; feed-forward 2df + f + d; two LayerNorms 4d per
layer; no final LayerNorm), and `Attn`, `FFN`, `AdaEmb`, `total` likewise. The sets differ
only in what their configs say (cutoffs, vocabulary, tie_projs: wt103 ties the tail
projections, lm1b ties none), so no set needs an explanation beyond the spec. The same
counts also reproduce random_GPT2_lm1b's logs: those models were counted as Transformer-XLs.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import replace
from typing import Any

import pytest

from archvocab.errors import InvalidSpec
from archvocab.grid import IntRange
from archvocab.registry import get_kind, parse_space, parse_spec
from archvocab.spaces.gpt2.spec import GPT2Spec
from archvocab.spaces.transxl.space import TransXLSpace
from archvocab.spaces.transxl.spec import (
    TransXLSpec,
    attention_params,
    embedding_params,
    feed_forward_params,
)
from hwnas.ground_truth import ground_truth_dir

LTS_DIR = ground_truth_dir() / "lts"
LTS_SETS = ("random_TransXL_wt103", "random_TransXL_lm1b", "random_TransXL_wt103_homogeneous")

BASE: dict[str, Any] = {
    "kind": "transxl",
    "n_layer": 2,
    "d_model": 64,
    "d_inner": [100, 70],
    "n_head": [2, 4],
    "d_embed": 32,
    "div_val": 2,
    "cutoffs": [100, 300],
    "vocab_size": 1000,
    "tgt_len": 16,
    "mem_len": 8,
}
TINY = TransXLSpace(
    n_layer=IntRange(1, 3),
    d_model=IntRange(32, 96, 32),
    d_inner=IntRange(64, 256, 32),
    d_embed=(32, 64),
    cutoffs=(100, 300),
    vocab_size=1000,
    tgt_len=16,
    mem_len=8,
)


def random_spec(rng: random.Random, max_vocab: int = 60000, max_width: int = 96) -> TransXLSpec:
    """Any self-consistent spec, also far outside the grid (odd widths, explicit d_head...)."""
    n_layer = rng.randint(1, 4)
    d_model = rng.choice([1, 2, 4]) * rng.randint(2, max_width // 4)
    heads = [h for h in (1, 2, 4, 8) if d_model % h == 0]
    vocab_size = rng.randint(2, max_vocab)
    cutoffs = tuple(
        sorted(rng.sample(range(1, vocab_size), rng.randint(0, min(3, vocab_size - 1))))
    )
    div_val = rng.randint(1, 4)
    return TransXLSpec(
        n_layer=n_layer,
        d_model=d_model,
        d_inner=tuple(rng.randint(1, 3 * max_width) for _ in range(n_layer)),
        n_head=tuple(rng.choice(heads) for _ in range(n_layer)),
        d_head=tuple(rng.randint(1, 40) for _ in range(n_layer)) if rng.random() < 0.3 else (),
        d_embed=rng.randint(div_val ** len(cutoffs), 2 * max_width),
        div_val=div_val,
        cutoffs=cutoffs,
        vocab_size=vocab_size,
        tgt_len=rng.randint(1, 512),
        mem_len=rng.choice([0, rng.randint(1, 512)]),
        tie_projs=tuple(rng.random() < 0.5 for _ in range(len(cutoffs) + 1)),
        pre_lnorm=rng.random() < 0.3,
    )


def load_lts(name: str) -> list[dict[str, Any]]:
    path = LTS_DIR / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"shared LTS log {path} not found ($HWNAS_GROUND_TRUTH/lts)")
    models: list[dict[str, Any]] = json.loads(path.read_text())["models"]
    return models


# -- the spec ----------------------------------------------------------------------------------
def test_round_trip_and_stable_ids_over_random_specs() -> None:
    rng = random.Random(1)
    specs = [random_spec(rng) for _ in range(500)]
    for spec in specs:
        text = spec.canonical_json()
        again = TransXLSpec.from_dict(json.loads(text))
        assert again == spec and again.canonical_json() == text
        assert again.arch_id == hashlib.sha256(text.encode()).hexdigest()[:16] == spec.arch_id
        assert parse_spec(spec.to_dict()) == spec  # the registry finds the kind
    assert len({s.arch_id for s in specs}) == len(set(specs))


def test_arch_id_is_not_a_gpt2_specs() -> None:
    shared = {k: BASE[k] for k in ("n_layer", "d_model", "d_inner", "n_head", "d_embed")}
    gpt2 = GPT2Spec.from_dict({**shared, "kind": "gpt2"})
    transxl = TransXLSpec.from_dict({**shared, "kind": "transxl"})
    assert transxl.kind == "transxl" and gpt2.kind == "gpt2"
    assert transxl.arch_id != gpt2.arch_id


def test_defaults_are_stored_once_so_equal_models_share_an_id() -> None:
    implicit = TransXLSpec.from_dict(BASE)
    assert implicit.d_head == () and implicit.head_dims() == (32, 16)  # d_model // n_head
    assert implicit.tie_projs == () and implicit.projection_ties() == (False, True, True)
    explicit = TransXLSpec.from_dict({**BASE, "d_head": [32, 16], "tie_projs": [False, True, True]})
    assert explicit == implicit and explicit.arch_id == implicit.arch_id
    assert TransXLSpec.from_dict({k: v for k, v in BASE.items() if k != "kind"}) == implicit
    assert replace(implicit, n_head=(4, 8)).head_dims() == (16, 8)  # no stale head widths


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"d_inner": [100]}, "d_inner", "needs one value per layer: 2, got 1"),
        ({"n_head": [2, 4, 8]}, "n_head", "needs one value per layer: 2, got 3"),
        ({"d_head": [8]}, "d_head", "needs one value per layer: 2, got 1"),
        ({"n_head": [2, 3]}, "n_head", "layer 1: 3 heads must divide d_model"),
        ({"n_positions": 16}, "n_positions", "unknown field"),
        ({"kind": "gpt2"}, "kind", "'gpt2' is not 'transxl'"),
        ({"n_layer": True}, "n_layer", "must be an integer >= 1"),
        ({"mem_len": -1}, "mem_len", "must be an integer >= 0"),
        ({"tgt_len": 0}, "tgt_len", "must be an integer >= 1"),
        ({"d_inner": [100, "70"]}, "d_inner", "must be a list of positive integers"),
        ({"cutoffs": [300, 1000]}, "cutoffs", "ascending and inside (0, 1000)"),
        ({"div_val": 8}, "div_val", "d_embed=32 / div_val^2 is 0"),
        ({"tie_projs": [False, True]}, "tie_projs", "one true/false per cluster (3)"),
        ({"tie_projs": [0, 1, 1]}, "tie_projs", "one true/false per cluster"),
        ({"pre_lnorm": "no"}, "pre_lnorm", "must be true or false"),
    ],
)
def test_bad_input_names_the_field(changes: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        TransXLSpec.from_dict({**BASE, **changes})
    assert info.value.field == field
    assert fragment in info.value.message


def test_missing_field_is_named() -> None:
    with pytest.raises(InvalidSpec) as info:
        TransXLSpec.from_dict({k: v for k, v in BASE.items() if k != "d_model"})
    assert (info.value.field, info.value.message) == ("d_model", "is required")


def test_explicit_d_head_need_not_split_d_model() -> None:
    spec = TransXLSpec.from_dict({**BASE, "n_head": [3, 5], "d_head": [10, 7]})
    assert spec.attention_widths() == [30, 35]
    assert spec.decoder_params() == sum(
        attention_params(64, w) + feed_forward_params(64, f) + 4 * 64
        for w, f in zip([30, 35], [100, 70])
    )


@pytest.mark.parametrize(
    ("flag", "value"),
    [("attn_type", 2), ("tie_weight", False), ("primer_conv", True), ("primer_square", True)],
)
def test_lts_configs_for_modules_not_built_are_refused(flag: str, value: Any) -> None:
    config = {**load_lts("random_TransXL_wt103")[0]["config"], flag: value}
    with pytest.raises(InvalidSpec) as info:
        TransXLSpec.from_lts_config(config)
    assert info.value.field == flag


# -- the space ---------------------------------------------------------------------------------
@pytest.mark.parametrize("space", [TransXLSpace(), TINY], ids=["default", "tiny"])
def test_operators_return_members(space: TransXLSpace) -> None:
    rng = random.Random("breed")
    population = [space.sample(rng) for _ in range(40)]
    for _ in range(300):
        children = [
            space.mutate(rng.choice(population), rng, p=rng.choice([0.1, 0.3, 1.0])),
            space.crossover(rng.choice(population), rng.choice(population), rng),
            # With p = 1 every gene is redrawn: any spec, however far outside, gives a member.
            space.mutate(random_spec(rng), rng, p=1.0),
        ]
        for child in children:
            space.check_member(child)
            assert all(f >= 2 * child.d_model for f in child.d_inner)
    for spec in population:
        space.check_member(spec)
    assert len({s.n_layer for s in population}) > 1 and len({s.d_model for s in population}) > 1


def test_operators_are_deterministic_for_a_seed() -> None:
    def run(seed: int) -> list[str]:
        rng = random.Random(seed)
        a, b = TransXLSpace().sample(rng), TransXLSpace().sample(rng)
        children = [TransXLSpace().mutate(a, rng), TransXLSpace().crossover(a, b, rng)]
        return [s.arch_id for s in (a, b, *children)]

    assert run(7) == run(7) != run(8)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"d_head": (16, 16)}, "d_head"),  # 2 x 16 and 8 x 16: not d_model // n_head
        ({"tgt_len": 64}, "tgt_len"),
        ({"mem_len": 0}, "mem_len"),
        ({"tie_projs": (False,) * 4}, "tie_projs"),  # LTS's lm1b ties: not this space's
        ({"pre_lnorm": True}, "pre_lnorm"),
        ({"n_layer": 1, "d_inner": (1024,), "n_head": (2,)}, "n_layer"),
        ({"d_inner": (1000, 1024)}, "d_inner"),
        ({"d_embed": 64}, "d_embed"),
        ({"vocab_size": 300000}, "vocab_size"),
    ],
)
def test_check_member_names_the_field(changes: dict[str, Any], field: str) -> None:
    space = TransXLSpace()
    member = TransXLSpec(n_layer=2, d_model=512, d_inner=(1024, 2048), n_head=(2, 8), d_embed=128)
    space.check_member(member)
    outsider = replace(member, **changes)
    with pytest.raises(InvalidSpec) as info:
        space.check_member(outsider)
    assert info.value.field == field
    assert not space.contains(outsider)


def test_space_plain_data_round_trip() -> None:
    for space in (TransXLSpace(), TINY, TransXLSpace(mem_len=0, tie_projs=(False,) * 4)):
        data = json.loads(json.dumps(space.to_dict()))
        assert data["kind"] == "transxl"
        assert TransXLSpace.from_dict(data) == space == parse_space(data)
    partial = TransXLSpace.from_dict({"kind": "transxl", "n_layer": {"max": 4}, "mem_len": 32})
    assert partial == TransXLSpace(n_layer=IntRange(2, 4, 1), mem_len=32)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"n_positions": 16}, "n_positions"),
        ({"kind": "gpt2"}, "kind"),
        ({"tgt_len": 0}, "tgt_len"),
        ({"mem_len": 2_000_000}, "mem_len"),
        ({"tie_projs": [True]}, "tie_projs"),
        ({"d_model": {"min": 0}}, "d_model.min"),
    ],
)
def test_bad_space_settings_name_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        TransXLSpace.from_dict(data)
    assert info.value.field == field


def test_baseline_scales_only_the_depth() -> None:
    space, k4 = TransXLSpace(), TransXLSpace(div_val=(4,))  # LTS searches with k = 4
    assert not space.contains(space.baseline(1))  # LTS scales 1..16 layers; the space: 2..16
    for n_layer in range(2, 17):
        for grid in (space, k4):
            spec = grid.baseline(n_layer)
            grid.check_member(spec)
            assert (spec.d_model, set(spec.d_inner), set(spec.n_head)) == (512, {2048}, {8})
            assert spec.d_embed == 512 and spec.head_dims() == (64,) * n_layer
            assert spec.decoder_params() == n_layer * grid.baseline(1).decoder_params()
        assert (space.baseline(n_layer).div_val, k4.baseline(n_layer).div_val) == (1, 4)
    wide = TransXLSpace(baseline_d_model=1024, baseline_d_inner=4096, baseline_n_head=16)
    assert wide.baseline(3).attention_widths() == [1024] * 3


def test_baseline_settings_are_checked_by_name() -> None:
    with pytest.raises(InvalidSpec) as info:
        TransXLSpace.from_dict({"kind": "transxl", "baseline_n_head": 3})
    assert info.value.field == "baseline_n_head" and "must divide" in info.value.message


def test_registered() -> None:
    kind = get_kind("transxl")
    assert kind.spec_type is TransXLSpec and kind.space_type is TransXLSpace
    assert kind.runtimes == ("torch", "onnxruntime")  # exports: see test_onnx_export_...
    assert kind.parse_space({"kind": "transxl"}) == TransXLSpace()


# -- the builder -------------------------------------------------------------------------------
def builder() -> Any:
    pytest.importorskip("torch", reason="transxl's builder needs torch (the agent extra)")
    return get_kind("transxl").load_builder()


def run(spec: TransXLSpec, tokens: Any, model: Any = None) -> Any:
    import torch

    model = model if model is not None else builder().build_model(spec).eval()
    with torch.inference_mode():
        return model(tokens)


def test_counts_equal_the_built_model_over_random_specs() -> None:
    from archvocab.spaces.gpt2.build import count_parameters

    rng = random.Random(3)
    specs = [random_spec(rng, max_vocab=3000, max_width=64) for _ in range(40)]
    specs += [TINY.sample(rng) for _ in range(10)]
    for spec in specs:
        model = builder().build_model(spec)
        assert count_parameters(model) == spec.total_params(), spec
        assert count_parameters(model.decoder_modules()) == spec.decoder_params(), spec


CASES = {
    "wt103-like": TransXLSpec.from_dict(BASE),
    "lm1b-like-ties": TransXLSpec.from_dict({**BASE, "div_val": 4, "tie_projs": [False] * 3}),
    "one-table-projected": TransXLSpec.from_dict({**BASE, "div_val": 1}),
    "one-table-no-cutoffs": TransXLSpec.from_dict(
        {**BASE, "div_val": 1, "d_embed": 64, "cutoffs": []}
    ),
    "pre-norm-no-memory": TransXLSpec.from_dict({**BASE, "pre_lnorm": True, "mem_len": 0}),
    "odd-heads": TransXLSpec.from_dict({**BASE, "n_head": [3, 1], "d_head": [7, 20]}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_forward_returns_log_probs_and_is_causal(name: str) -> None:
    import torch

    spec = CASES[name]
    tokens = builder().example_inputs(spec, 2, 12, torch.Generator().manual_seed(0))[0]
    assert tokens.shape == (2, 12) and 0 <= int(tokens.min()) and int(tokens.max()) < 1000
    torch.manual_seed(0)
    model = builder().build_model(spec).eval()
    out = run(spec, tokens, model)
    assert out.shape == (2, 12, 1000) and torch.isfinite(out).all()
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(2, 12), atol=1e-4, rtol=0)
    changed = tokens.clone()
    changed[:, 7] = (tokens[:, 7] + 1) % 1000
    after = run(spec, changed, model)
    torch.testing.assert_close(out[:, :7], after[:, :7])
    assert not torch.allclose(out[:, 7:], after[:, 7:])


def test_relative_positions_make_attention_order_aware() -> None:
    """In one layer without positions, the last token's output is a softmax-weighted sum over
    the earlier tokens that does not depend on their order."""
    import torch

    spec = TransXLSpec.from_dict({**BASE, "n_layer": 1, "d_inner": [64], "n_head": [4]})
    tokens = torch.tensor([[5, 900, 42, 7]])
    swapped = tokens[:, [1, 0, 2, 3]]
    torch.manual_seed(0)
    model = builder().build_model(spec).eval()
    assert not torch.allclose(run(spec, tokens, model)[0, 3], run(spec, swapped, model)[0, 3])


def test_the_zero_memory_is_attended() -> None:
    import torch

    with_memory = CASES["wt103-like"]
    torch.manual_seed(0)
    model = builder().build_model(with_memory).eval()
    without = builder().build_model(replace(with_memory, mem_len=0)).eval()
    without.load_state_dict(model.state_dict())  # same weights: mem_len adds no parameter
    tokens = torch.arange(10).view(1, 10)
    assert not torch.allclose(run(with_memory, tokens, model), run(with_memory, tokens, without))


def test_rel_shift_aligns_each_query_with_its_distance() -> None:
    import torch

    from archvocab.spaces.transxl.build import rel_shift

    qlen, klen = 4, 7
    scores = torch.randn(2, 3, qlen, klen)  # column j: the distance klen - 1 - j
    shifted = rel_shift(scores)
    for i in range(qlen):
        for j in range(klen - qlen + i + 1):  # the keys query i may see
            distance = klen - qlen + i - j
            assert torch.equal(shifted[..., i, j], scores[..., i, klen - 1 - distance])


def test_sequence_longer_than_tgt_len_is_refused() -> None:
    import torch

    with pytest.raises(ValueError, match="sequence length 17 exceeds tgt_len=16"):
        run(CASES["wt103-like"], torch.zeros(1, 17, dtype=torch.long))


@pytest.mark.parametrize("name", list(CASES))
def test_primer_takes_the_same_code_paths(name: str) -> None:
    import torch

    spec, primer = CASES[name], builder().primer_spec(CASES[name], 8)
    assert primer.n_layer == 1 and primer.vocab_size == 256 and primer.max_seq_len == 8
    assert bool(primer.cutoffs) == bool(spec.cutoffs) and primer.pre_lnorm == spec.pre_lnorm
    assert (primer.div_val > 1) == (spec.div_val > 1) and bool(primer.mem_len) == bool(spec.mem_len)
    assert (primer.d_embed == primer.d_model) == (spec.d_embed == spec.d_model)
    assert primer.projection_ties()[:2] == spec.projection_ties()[:2]
    assert run(primer, torch.zeros(1, 8, dtype=torch.long)).shape == (1, 8, 256)


# -- LTS's published counts ---------------------------------------------------------------------
@pytest.mark.parametrize("name", LTS_SETS)
def test_every_lts_model_loads_and_its_counts_match(name: str) -> None:
    models = load_lts(name)
    for model in models:
        spec, logged = TransXLSpec.from_lts_config(model["config"]), model["params"]
        widths, d = spec.attention_widths(), spec.d_model
        assert spec.decoder_params() == logged["nonembedding"], model["id"]
        assert sum(attention_params(d, w) for w in widths) == logged["Attn"], model["id"]
        assert sum(feed_forward_params(d, f) for f in spec.d_inner) == logged["FFN"], model["id"]
        assert embedding_params(spec) == logged["AdaEmb"], model["id"]
        assert spec.total_params() == logged["total"], model["id"]
        assert TransXLSpec.from_dict(spec.to_dict()) == spec
    assert models  # a run over nothing would prove nothing


def test_gpt2_lm1b_logs_count_a_transformer_xl() -> None:
    """random_GPT2_lm1b's logged counts are not GPT-2's (tests/proxies/test_lts_logs.py): its
    configs carry Transformer-XL fields, and read as Transformer-XL every count matches."""
    models = load_lts("random_GPT2_lm1b")
    for model in models:
        spec, logged = TransXLSpec.from_lts_config(model["config"]), model["params"]
        assert spec.decoder_params() == logged["nonembedding"], model["id"]
        assert spec.total_params() == logged["total"], model["id"]
    assert models


@pytest.mark.parametrize("name", LTS_SETS)
def test_every_lts_model_built_matches_its_log(name: str) -> None:
    import torch

    from archvocab.spaces.gpt2.build import count_parameters

    for model in load_lts(name):
        spec = TransXLSpec.from_lts_config(model["config"])
        with torch.device("meta"):  # the real module layout, no memory for ~100M weights
            built = builder().build_model(spec)
        assert count_parameters(built) == model["params"]["total"], model["id"]
        assert count_parameters(built.decoder_modules()) == model["params"]["nonembedding"]
