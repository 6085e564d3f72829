"""The proxies against LTS's published GPT-2 training logs (../shared/data/lts).

random_GPT2_wt103: our GPT-2 counts reproduce every logged count exactly, and decoder
parameters rank the trained models like their validation perplexity (rho about -0.97).

random_GPT2_lm1b: its logged counts follow a different module layout, the one of LTS's
Transformer-XL backbone (the same formulas reproduce both random_TransXL_* sets):
- attention 5d^2 + 2d per layer: bias-free fused QKV (3d^2), a relative-position
  projection (d^2), a bias-free output projection (d^2), r_w_bias and r_r_bias (d each),
  instead of GPT-2's 4d^2 + 4d;
- two LayerNorms per layer and no final LayerNorm;
- no learned absolute position table; the configs' word-level cutoffs (59997, ...) all lie
  beyond the 50264-token vocabulary, so the adaptive embedding is one cluster:
  n_token x d, plus a d x d projection when div_val > 1; the output adds the n_token bias
  and, when div_val > 1, an untied d x d head projection.
So decoder_params (GPT-2 layout) matches none of lm1b's `nonembedding`, by exactly
n_layer x (d^2 - 2d) - 2d. The tests pin that layout down instead of loosening anything.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from scipy import stats

from archvocab.spaces.gpt2.spec import GPT2Spec
from hwnas.ground_truth import ground_truth_dir
from proxies.params import (
    attention_params,
    decoder_params,
    embedding_params,
    feed_forward_params,
    total_params,
)

LTS_DIR = ground_truth_dir() / "lts"


def load(name: str) -> list[tuple[GPT2Spec, dict[str, Any], float]]:
    path = LTS_DIR / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"shared LTS log {path} not found ($HWNAS_GROUND_TRUTH/lts)")
    models = json.loads(path.read_text())["models"]
    return [
        (GPT2Spec.from_lts_config(m["config"]), m["params"], m["perplexity"]["valid_ppl"])
        for m in models
    ]


@pytest.fixture(scope="module")
def wt103() -> list[tuple[GPT2Spec, dict[str, Any], float]]:
    return load("random_GPT2_wt103")


@pytest.fixture(scope="module")
def lm1b() -> list[tuple[GPT2Spec, dict[str, Any], float]]:
    return load("random_GPT2_lm1b")


# -- random_GPT2_wt103 ----------------------------------------------------------------------
def test_wt103_counts_are_reproduced_exactly(wt103: list) -> None:
    assert len(wt103) == 200
    for spec, params, _ in wt103:
        assert decoder_params(spec) == params["nonembedding"], spec
        assert total_params(spec) == params["total"], spec
        assert spec.n_layer * attention_params(spec.d_model) == params["Attn"]
        assert sum(feed_forward_params(spec.d_model, f) for f in spec.d_inner) == params["FFN"]
        assert embedding_params(spec) == params["AdaEmb"]


def test_wt103_built_models_have_the_logged_counts(wt103: list) -> None:
    torch = pytest.importorskip("torch", reason="building models needs torch")
    from archvocab.spaces.gpt2.build import build_model, count_parameters

    # Every 4th model: the analytic counts already cover all 200 and equal the built ones.
    for spec, params, _ in wt103[::4]:
        with torch.device("meta"):  # shapes only, nothing allocated
            model = build_model(spec)
        assert count_parameters(model.decoder_modules()) == params["nonembedding"], spec
        assert count_parameters(model) == params["total"], spec


def test_wt103_decoder_params_rank_like_perplexity(wt103: list) -> None:
    ours = stats.spearmanr([decoder_params(s) for s, _, _ in wt103], [p for _, _, p in wt103])
    logged = stats.spearmanr([c["nonembedding"] for _, c, _ in wt103], [p for _, _, p in wt103])
    assert ours.statistic < -0.9  # published: about -0.97
    assert ours.statistic == pytest.approx(logged.statistic, abs=1e-12)
    assert ours.pvalue < 1e-50


# -- random_GPT2_lm1b -----------------------------------------------------------------------
def transformer_xl_counts(spec: GPT2Spec) -> dict[str, int]:
    """LTS's Transformer-XL layout, which lm1b's logged GPT-2 counts follow (module docstring)."""
    d, n_layer = spec.d_model, spec.n_layer
    assert spec.cutoffs == () and spec.d_embed == d  # what every lm1b config turns into
    attn = n_layer * (5 * d * d + 2 * d)
    ffn = sum(feed_forward_params(d, f) for f in spec.d_inner)
    nonembedding = attn + ffn + n_layer * 4 * d
    projection = d * d if spec.div_val > 1 else 0
    embedding = spec.vocab_size * d + projection
    total = nonembedding + embedding + spec.vocab_size + projection
    return {
        "Attn": attn,
        "FFN": ffn,
        "nonembedding": nonembedding,
        "AdaEmb": embedding,
        "total": total,
    }


def test_lm1b_counts_follow_the_transformer_xl_layout(lm1b: list) -> None:
    assert len(lm1b) == 200
    for spec, params, _ in lm1b:
        assert transformer_xl_counts(spec) == {k: params[k] for k in transformer_xl_counts(spec)}


def test_lm1b_decoder_params_differ_by_the_layout_only(lm1b: list) -> None:
    matches = 0
    for spec, params, _ in lm1b:
        d = spec.d_model
        matches += decoder_params(spec) == params["nonembedding"]
        # GPT-2 attention has 4d^2 + 4d and a final LayerNorm (2d); Transformer-XL 5d^2 + 2d.
        gap = spec.n_layer * (d * d - 2 * d) - 2 * d
        assert params["nonembedding"] - decoder_params(spec) == gap, spec
        # Feed-forward blocks are identical in both layouts.
        assert sum(feed_forward_params(d, f) for f in spec.d_inner) == params["FFN"]
    assert matches == 0


def test_lm1b_decoder_params_still_rank_like_perplexity(lm1b: list) -> None:
    ppl = [p for _, _, p in lm1b]
    ours = stats.spearmanr([decoder_params(s) for s, _, _ in lm1b], ppl).statistic
    logged = stats.spearmanr([c["nonembedding"] for _, c, _ in lm1b], ppl).statistic
    assert ours < -0.95 and logged < -0.95  # published: about -0.99
    assert abs(ours - logged) < 0.01
