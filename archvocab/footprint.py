"""How much memory a spec's model needs to run, counted from the spec: no model is built.

Weights: the analytic `total_params()` every kind keeps (exact: tests compare it with built
models) times the bytes of one element; every builder makes float32 weights.

Activations: an upper bound on the elements of the tensors alive at once during one forward
pass in inference mode (intermediates are freed as soon as nothing refers to them), for a
(batch_size, seq_len) input. Each kind counts its own in `archvocab/spaces/<kind>/footprint.py`
(its `SpaceKind.activations`), from the pieces here that several kinds share. A count adds up
the peaks of the phases of a forward (the embedding, the widest layer's token mixing, its
feed-forward, the output head) instead of taking their maximum, and counts attention scores as
if the kernel materialised them (B x heads x queries x keys, twice for the softmax), so it
holds whichever kernel runs. A language model's output head dominates it: log-probabilities
over the vocabulary are (batch x seq x vocab), built from logits of the same size and
concatenated from clusters.

A kind without an activation count is assumed to need as much for activations as for its
weights (tests/archvocab checks every registered kind has one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from archvocab.registry import get_kind, kind_names

if TYPE_CHECKING:
    from archvocab.registry import ArchSpec

FLOAT32_BYTES = 4  # every builder's weights and activations


def weight_bytes(spec: ArchSpec, element_bytes: int = FLOAT32_BYTES) -> int:
    """The bytes of the spec's parameters (tied tensors once)."""
    return spec.total_params() * element_bytes


def activation_elements(spec: ArchSpec, batch_size: int, seq_len: int, output: str = "all") -> int:
    """An upper bound on the activation elements alive at once in one forward pass; with
    `output` "last" a vocabulary head scores the last position only (MeasurementSettings)."""
    count = get_kind(spec.kind).activations
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


def estimated_kinds() -> list[str]:
    """The kinds with an activation count of their own."""
    return [name for name in kind_names() if get_kind(name).activations is not None]


# -- pieces several kinds' counts share ---------------------------------------------------------
def attention_scores(batch: int, heads: int, queries: int, keys: int) -> int:
    """Attention scores and their softmax, materialised: what SDPA does with a float mask on
    CPU (measured; without a mask its fused kernels work in blocks and hold none of this)."""
    return 2 * batch * heads * queries * keys


def output_head(tokens: int, vocab_size: int, clustered: bool) -> int:
    """Log-probabilities over the vocabulary from logits of the same size; an adaptive head
    (clusters) also holds every cluster's logits and log-softmax until they are concatenated
    (measured: about 4x the output, with the allocator's fragmentation)."""
    return (4 if clustered else 3) * tokens * vocab_size


class AdaptiveHead(Protocol):
    """A spec with an adaptive softmax (GPT-2's and Transformer-XL's)."""

    @property
    def cutoffs(self) -> tuple[int, ...]: ...

    @property
    def vocab_size(self) -> int: ...

    @property
    def d_embed(self) -> int: ...


def head_weight_copy(spec: AdaptiveHead, always: bool) -> int:
    """The head cluster's weight with the cluster logits' rows appended: a copy per forward."""
    cutoffs = spec.cutoffs
    if not cutoffs and not always:
        return 0
    return ((cutoffs[0] if cutoffs else spec.vocab_size) + len(cutoffs)) * spec.d_embed
