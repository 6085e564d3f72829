"""The activations of a FlexiBERT forward pass, counted from the spec (see
`archvocab.footprint`)."""

from __future__ import annotations

from archvocab.spaces.flexibert.spec import EncoderLayer, FlexiBERTSpec


def _mixing(hidden: int, layer: EncoderLayer, batch: int, seq: int) -> int:
    tokens, heads = batch * seq, layer.num_operation_heads
    if layer.operation_type == "SA":  # q (and W q), k, v, split copies, merged output
        return 9 * tokens * hidden
    if layer.operation_type == "LT":  # projection, complex FFT (2 floats each) or DCT matmuls
        width = hidden // heads
        return 8 * tokens * hidden + seq * seq + width * width
    kernel = int(layer.operation_parameter)  # DSC: k-wide windows of the values, einsum copy
    return (2 * kernel + 8) * tokens * hidden + 2 * tokens * heads * kernel


def activations(spec: FlexiBERTSpec, batch: int, seq: int, _head_tokens: int) -> int:
    """An encoder: every position's hidden state is the output, whatever `output` says."""
    tokens, hidden = batch * seq, spec.hidden_size
    embedding = 6 * tokens * max(hidden, spec.embedding_size)
    mixing = max(_mixing(hidden, layer, batch, seq) for layer in spec.layers)
    feed_forward = max(2 * tokens * layer.feed_forward_dimension for layer in spec.layers)
    return 4 * tokens * hidden + embedding + mixing + feed_forward
