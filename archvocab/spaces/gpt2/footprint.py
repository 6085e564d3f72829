"""The activations of a GPT-2 forward pass, counted from the spec (see `archvocab.footprint`)."""

from __future__ import annotations

from archvocab.footprint import head_weight_copy, output_head
from archvocab.spaces.gpt2.spec import GPT2Spec


def activations(spec: GPT2Spec, batch: int, seq: int, head_tokens: int) -> int:
    """An upper bound on the elements alive at once; the head scores `head_tokens` positions."""
    tokens, d = batch * seq, spec.d_model
    embedding = 4 * tokens * max(d, spec.d_embed)  # lookups, projections, scale, positions
    attention = 9 * tokens * d
    feed_forward = 2 * tokens * d + 2 * tokens * max(spec.d_inner)  # Linear, GELU
    head = output_head(head_tokens, spec.vocab_size, bool(spec.cutoffs))
    head += 2 * head_tokens * spec.d_embed + head_weight_copy(spec, always=False)
    return 2 * tokens * d + embedding + attention + feed_forward + head
