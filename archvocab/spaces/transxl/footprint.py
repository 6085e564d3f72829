"""The activations of a Transformer-XL forward pass, counted from the spec (see
`archvocab.footprint`)."""

from __future__ import annotations

from archvocab.footprint import attention_scores, head_weight_copy, output_head
from archvocab.spaces.transxl.spec import TransXLSpec


def activations(spec: TransXLSpec, batch: int, seq: int, head_tokens: int) -> int:
    """An upper bound on the elements alive at once; the head scores `head_tokens` positions."""
    tokens, d = batch * seq, spec.d_model
    keys = seq + spec.mem_len
    width = max(spec.attention_widths())
    context = batch * keys * (2 * d + 3 * width) + keys * (d + width)  # memory, cat, qkv, pos
    # position scores, their shifted pad and copy, scaled, masked; the kernel's own scores
    heads = max(spec.n_head)
    scores = 4 * batch * heads * seq * (keys + 1) + attention_scores(batch, heads, seq, keys)
    attention = context + scores + seq * keys + 6 * tokens * max(d, width)
    feed_forward = 2 * tokens * d + 2 * tokens * max(spec.d_inner)  # Linear, ReLU
    embedding = 4 * tokens * max(d, spec.d_embed)
    head = output_head(head_tokens, spec.vocab_size, bool(spec.cutoffs))
    head += 2 * head_tokens * spec.d_embed + head_weight_copy(spec, always=True)
    return 2 * tokens * d + embedding + attention + feed_forward + head
