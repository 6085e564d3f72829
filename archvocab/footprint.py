"""How much memory a spec's model needs to run, counted from the spec: no model is built.

Weights: the analytic `total_params()` every kind keeps (exact: tests compare it with built
models) times the bytes of one element; every builder makes float32 weights.

Activations: an upper bound on the elements of the tensors alive at once during one forward
pass in inference mode (intermediates are freed as soon as nothing refers to them), per kind,
for a (batch_size, seq_len) input. The bound adds up the peaks of the phases of a forward (the
embedding, the widest layer's token mixing, its feed-forward, the output head) instead of
taking their maximum, and counts attention scores as if the kernel materialised them
(B x heads x queries x keys, twice for the softmax), so it holds whichever kernel runs. A
language model's output head dominates it: log-probabilities over the vocabulary are
(batch x seq x vocab), built from logits of the same size and concatenated from clusters.

A kind without an entry in `_ACTIVATIONS` is assumed to need as much for activations as for
its weights (tests/archvocab checks every registered kind has one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from archvocab.registry import ArchSpec
    from archvocab.spaces.flexibert.spec import EncoderLayer, FlexiBERTSpec
    from archvocab.spaces.gpt2.spec import GPT2Spec
    from archvocab.spaces.nasbench_nlp.spec import RNNCellSpec
    from archvocab.spaces.transxl.spec import TransXLSpec

FLOAT32_BYTES = 4  # every builder's weights and activations


def weight_bytes(spec: ArchSpec, element_bytes: int = FLOAT32_BYTES) -> int:
    """The bytes of the spec's parameters (tied tensors once)."""
    return spec.total_params() * element_bytes


def activation_elements(spec: ArchSpec, batch_size: int, seq_len: int, output: str = "all") -> int:
    """An upper bound on the activation elements alive at once in one forward pass; with
    `output` "last" a vocabulary head scores the last position only (MeasurementSettings)."""
    count = _ACTIVATIONS.get(spec.kind)
    if count is None:
        return spec.total_params()
    head_tokens = batch_size if output == "last" else batch_size * seq_len
    return count(spec, batch_size, seq_len, head_tokens)


def activation_bytes(
    spec: ArchSpec,
    batch_size: int,
    seq_len: int,
    element_bytes: int = FLOAT32_BYTES,
    output: str = "all",
) -> int:
    return activation_elements(spec, batch_size, seq_len, output) * element_bytes


def _scores(batch: int, heads: int, queries: int, keys: int) -> int:
    """Attention scores and their softmax, materialised: what SDPA does with a float mask on
    CPU (measured; without a mask its fused kernels work in blocks and hold none of this)."""
    return 2 * batch * heads * queries * keys


def _output_head(tokens: int, vocab_size: int, clustered: bool) -> int:
    """Log-probabilities over the vocabulary from logits of the same size; an adaptive head
    (clusters) also holds every cluster's logits and log-softmax until they are concatenated
    (measured: about 4x the output, with the allocator's fragmentation)."""
    return (4 if clustered else 3) * tokens * vocab_size


def _head_weight_copy(spec: GPT2Spec | TransXLSpec, always: bool) -> int:
    """The head cluster's weight with the cluster logits' rows appended: a copy per forward."""
    cutoffs = spec.cutoffs
    if not cutoffs and not always:
        return 0
    return ((cutoffs[0] if cutoffs else spec.vocab_size) + len(cutoffs)) * spec.d_embed


def _gpt2(spec: GPT2Spec, batch: int, seq: int, head_tokens: int) -> int:
    tokens, d = batch * seq, spec.d_model
    embedding = 4 * tokens * max(d, spec.d_embed)  # lookups, projections, scale, positions
    attention = 9 * tokens * d
    feed_forward = 2 * tokens * d + 2 * tokens * max(spec.d_inner)  # Linear, GELU
    head = _output_head(head_tokens, spec.vocab_size, bool(spec.cutoffs))
    head += 2 * head_tokens * spec.d_embed + _head_weight_copy(spec, always=False)
    return 2 * tokens * d + embedding + attention + feed_forward + head


def _flexibert_mixing(hidden: int, layer: EncoderLayer, batch: int, seq: int) -> int:
    tokens, heads = batch * seq, layer.num_operation_heads
    if layer.operation_type == "SA":  # q (and W q), k, v, split copies, merged output
        return 9 * tokens * hidden
    if layer.operation_type == "LT":  # projection, complex FFT (2 floats each) or DCT matmuls
        width = hidden // heads
        return 8 * tokens * hidden + seq * seq + width * width
    kernel = int(layer.operation_parameter)  # DSC: k-wide windows of the values, einsum copy
    return (2 * kernel + 8) * tokens * hidden + 2 * tokens * heads * kernel


def _flexibert(spec: FlexiBERTSpec, batch: int, seq: int, _head_tokens: int) -> int:
    """An encoder: every position's hidden state is the output, whatever `output` says."""
    tokens, hidden = batch * seq, spec.hidden_size
    embedding = 6 * tokens * max(hidden, spec.embedding_size)
    mixing = max(_flexibert_mixing(hidden, layer, batch, seq) for layer in spec.layers)
    feed_forward = max(2 * tokens * layer.feed_forward_dimension for layer in spec.layers)
    return 4 * tokens * hidden + embedding + mixing + feed_forward


def _transxl(spec: TransXLSpec, batch: int, seq: int, head_tokens: int) -> int:
    tokens, d = batch * seq, spec.d_model
    keys = seq + spec.mem_len
    width = max(spec.attention_widths())
    context = batch * keys * (2 * d + 3 * width) + keys * (d + width)  # memory, cat, qkv, pos
    # position scores, their shifted pad and copy, scaled, masked; the kernel's own scores
    heads = max(spec.n_head)
    scores = 4 * batch * heads * seq * (keys + 1) + _scores(batch, heads, seq, keys)
    attention = context + scores + seq * keys + 6 * tokens * max(d, width)
    feed_forward = 2 * tokens * d + 2 * tokens * max(spec.d_inner)  # Linear, ReLU
    embedding = 4 * tokens * max(d, spec.d_embed)
    head = _output_head(head_tokens, spec.vocab_size, bool(spec.cutoffs))
    head += 2 * head_tokens * spec.d_embed + _head_weight_copy(spec, always=True)
    return 2 * tokens * d + embedding + attention + feed_forward + head


def _rnncell(spec: RNNCellSpec, batch: int, seq: int, head_tokens: int) -> int:
    tokens = batch * seq
    widths = spec.layer_widths()
    states = spec.cell.n_states * batch * sum(d_out for _, d_out in widths)
    # every layer's step outputs and their stacked copy (run_layers keeps each layer's)
    outputs = 2 * tokens * sum(d_out for _, d_out in widths)
    step = (len(spec.cell.nodes) + 2) * batch * max(d_out for _, d_out in widths)
    head = _output_head(head_tokens, spec.vocab_size, clustered=False)
    return tokens * spec.d_embed + 3 * states + outputs + step + head


# kind -> (spec, batch, seq, tokens the output head scores) -> elements
_ACTIVATIONS: dict[str, Callable[[Any, int, int, int], int]] = {
    "gpt2": _gpt2,
    "flexibert": _flexibert,
    "transxl": _transxl,
    "nasbench_nlp": _rnncell,
}


def estimated_kinds() -> list[str]:
    """The kinds with an activation estimate of their own."""
    return list(_ACTIVATIONS)
