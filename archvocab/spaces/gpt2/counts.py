"""Analytic parameter counts of a GPT2Spec, no model instantiated.

The counts mirror `archvocab.spaces.gpt2.build` exactly (tests compare them over hundreds of
specs) and reproduce LTS's published `params` for random_GPT2_wt103.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archvocab.spaces.gpt2.spec import GPT2Spec


def attention_params(d_model: int) -> int:
    """Fused QKV (3d^2+3d) and output projection (d^2+d), all with biases."""
    return 4 * d_model * d_model + 4 * d_model


def feed_forward_params(d_model: int, d_inner: int) -> int:
    return 2 * d_model * d_inner + d_inner + d_model


def decoder_params(spec: GPT2Spec) -> int:
    """LTS's proxy: attention + feed-forward + layer norms (two per layer, one final)."""
    d = spec.d_model
    per_layer = sum(attention_params(d) + feed_forward_params(d, f) + 4 * d for f in spec.d_inner)
    return per_layer + 2 * d


def embedding_params(spec: GPT2Spec) -> int:
    """Adaptive input embedding with its projections, plus learned positions."""
    d = spec.d_model
    if spec.div_val == 1:
        tables = spec.vocab_size * spec.d_embed
        projections = spec.d_embed * d if spec.d_embed != d else 0
    else:
        bounds = [0, *spec.cutoffs, spec.vocab_size]
        widths = spec.embedding_widths()
        tables = sum((hi - lo) * w for lo, hi, w in zip(bounds, bounds[1:], widths))
        projections = sum(w * d for w in widths)
    return tables + projections + spec.n_positions * d


def output_head_params(spec: GPT2Spec) -> int:
    """Adaptive softmax beyond the tied weights: biases, cluster logits, untied head projection."""
    n_clusters = len(spec.cutoffs)
    has_projection = spec.div_val > 1 or spec.d_embed != spec.d_model
    head_projection = spec.d_embed * spec.d_model if has_projection else 0
    return spec.vocab_size + n_clusters * (spec.d_embed + 1) + head_projection


def total_params(spec: GPT2Spec) -> int:
    return decoder_params(spec) + embedding_params(spec) + output_head_params(spec)
