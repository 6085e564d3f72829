"""FLOPs, analytic: 2 x the multiply-accumulates of the decoder's matrix products (linear
layers and attention's score and mixing products) in one forward pass, no model built.

One sequence of REFERENCE_TOKENS tokens (fewer if the model takes fewer); Transformer-XL
also attends over its mem_len memory, which its keys, values and position projections cover
too (hwnas's builder runs every segment with a full memory). Embedding lookups, the softmax
head, norms, activations and softmax are not counted: like decoder parameters, this is the
decoder's size in compute. Attention products are counted in full (T x T), as the kernels
compute them, causal or not. Checked against torch's FlopCounterMode in the tests.
"""

from __future__ import annotations

from archvocab.registry import ArchSpec

REFERENCE_TOKENS = 64
KINDS = ("gpt2", "transxl")


def flops(spec: ArchSpec) -> int:
    if spec.kind == "gpt2":
        return _gpt2(spec)
    if spec.kind == "transxl":
        return _transxl(spec)
    raise ValueError(f"flops is defined for {', '.join(KINDS)}, not {spec.kind!r}")


def _gpt2(spec) -> int:
    t, d = min(REFERENCE_TOKENS, spec.n_positions), spec.d_model
    total = 0
    for d_inner in spec.d_inner:
        linear = 3 * d * d + d * d + 2 * d * d_inner  # qkv, output, feed-forward in and out
        attention = 2 * t * d  # q.k over t keys and the mix of t values, per query
        total += 2 * t * (linear + attention)
    return total


def _transxl(spec) -> int:
    t, d = min(REFERENCE_TOKENS, spec.tgt_len), spec.d_model
    k = t + spec.mem_len  # keys: the memory, then the segment
    total = 0
    for width, d_inner in zip(spec.attention_widths(), spec.d_inner, strict=True):
        keyed = k * (3 * d * width + d * width)  # q, k, v of the whole context; positions
        per_query = width * d + 2 * d * d_inner + 3 * k * width  # out, feed-forward, 3 products
        total += 2 * (keyed + t * per_query)
    return total
