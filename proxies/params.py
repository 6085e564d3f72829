"""Zero-cost proxies: analytic parameter counts of a spec of any space kind, no model built.

Each space kind counts its own parameters (`ArchSpec.decoder_params` / `total_params`, tested
against the built models); the GPT-2 parts are re-exported for LTS's log comparisons.
"""

from __future__ import annotations

from archvocab.registry import ArchSpec
from archvocab.spaces.gpt2.counts import (
    attention_params,
    embedding_params,
    feed_forward_params,
    output_head_params,
)

__all__ = [
    "attention_params",
    "decoder_params",
    "embedding_params",
    "feed_forward_params",
    "output_head_params",
    "total_params",
]


def decoder_params(spec: ArchSpec) -> int:
    """LTS's proxy: the non-embedding parameters (attention, feed-forward, norms; cells)."""
    return spec.decoder_params()


def total_params(spec: ArchSpec) -> int:
    """Every parameter of the model, embeddings and output head included."""
    return spec.total_params()
