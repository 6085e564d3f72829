"""FlexiBERTSpec -> torch.nn.Module: a heterogeneous post-LayerNorm BERT encoder.

Embeddings as ELECTRA-small's: word, position and token-type tables of width
`embedding_size`, summed, LayerNorm, then a linear projection to the hidden size when the
widths differ. Each layer: operation -> output projection -> residual -> LayerNorm, then the
feed-forward stack -> residual -> LayerNorm (BERT's layout, which FlexiBERT keeps; its stack of
`num_feed_forward` dense layers sits inside one residual, as in FlexiBERT's and the
benchmark's code). The operations, all with `num_operation_heads` heads of hidden/heads each:
- SA SDP: BERT's scaled dot-product self-attention.
- SA WMA: multiplicative attention, score q W k^T: a bias-free hidden x hidden W applied to
  the queries (the benchmark's layout; FlexiBERT's own code shares one head x head W).
- LT DFT / DCT: an input projection, then per head the real part of the 2-D Fourier
  transform (FNet) or the orthonormal 2-D DCT-II over (sequence, head width).
- DSC k: ConvBERT's span-based dynamic convolution: per position and head, a softmax kernel
  of size k generated from query * separable-convolved key, applied to a window of k values.
Dropout is left out: models are only ever timed, in eval mode.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from archvocab.spaces.attention_build import Attend
from archvocab.spaces.flexibert.spec import EncoderLayer, FlexiBERTSpec


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(batch, seq, hidden) -> (batch, heads, seq, hidden / heads)."""
    batch, seq, width = x.shape
    return x.view(batch, seq, heads, width // heads).transpose(1, 2)


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    batch, heads, seq, width = x.shape
    return x.transpose(1, 2).reshape(batch, seq, heads * width)


class SelfAttention(nn.Module):
    """Bidirectional multi-head attention; `multiplicative` puts a learned W between q and k."""

    def __init__(self, hidden: int, heads: int, multiplicative: bool) -> None:
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.query_weight = nn.Linear(hidden, hidden, bias=False) if multiplicative else None
        self.attend = Attend()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        query = self.query(x)
        if self.query_weight is not None:
            query = self.query_weight(query)
        q, k, v = (_split_heads(t, self.heads) for t in (query, self.key(x), self.value(x)))
        return _merge_heads(self.attend(q, k, v))


def _dct_matrix(n: int, like: torch.Tensor) -> torch.Tensor:
    """The orthonormal DCT-II matrix C (n x n): C @ x transforms x along its first axis."""
    position = torch.arange(n, dtype=like.dtype, device=like.device)
    basis = torch.cos(math.pi * (2 * position[None, :] + 1) * position[:, None] / (2 * n))
    scale = torch.full((n, 1), math.sqrt(2 / n), dtype=like.dtype, device=like.device)
    scale[0] = math.sqrt(1 / n)
    return basis * scale


class LinearTransform(nn.Module):
    """Projection, then a fixed 2-D transform per head over (sequence, head width)."""

    def __init__(self, hidden: int, heads: int, transform: str) -> None:
        super().__init__()
        self.heads, self.transform = heads, transform
        self.input = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        per_head = _split_heads(self.input(x), self.heads)
        if self.transform == "DFT":  # FNet: the real part of the 2-D FFT
            mixed = torch.fft.fft2(per_head.float(), dim=(-2, -1)).real.to(x.dtype)
        else:
            seq, width = per_head.shape[-2:]
            mixed = _dct_matrix(seq, x) @ per_head @ _dct_matrix(width, x).T
        return _merge_heads(mixed)


class DynamicConvolution(nn.Module):
    """ConvBERT's span-based dynamic convolution with `heads` heads and kernel size `kernel`."""

    def __init__(self, hidden: int, heads: int, kernel: int) -> None:
        super().__init__()
        self.heads, self.kernel = heads, kernel
        self.query = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        # The separable convolution over the sequence that makes the key span-aware.
        self.key_depthwise = nn.Conv1d(
            hidden, hidden, kernel, padding=kernel // 2, groups=hidden, bias=False
        )
        self.key_pointwise = nn.Conv1d(hidden, hidden, 1)
        self.kernel_generator = nn.Linear(hidden, heads * kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        span_key = self.key_pointwise(self.key_depthwise(x.transpose(1, 2))).transpose(1, 2)
        kernels = self.kernel_generator(self.query(x) * span_key)
        kernels = kernels.view(batch, seq, self.heads, self.kernel).softmax(dim=-1)
        pad = self.kernel // 2
        # windows[b, s, c, j] = value[b, s + j - pad, c] (zeros beyond the ends)
        windows = F.pad(self.value(x), (0, 0, pad, pad)).unfold(1, self.kernel, 1)
        windows = windows.reshape(batch, seq, self.heads, hidden // self.heads, self.kernel)
        out = torch.einsum("bsnck,bsnk->bsnc", windows, kernels)
        return out.reshape(batch, seq, hidden)


def build_operation(hidden: int, layer: EncoderLayer) -> nn.Module:
    heads, parameter = layer.num_operation_heads, layer.operation_parameter
    if layer.operation_type == "SA":
        return SelfAttention(hidden, heads, multiplicative=parameter == "WMA")
    if layer.operation_type == "LT":
        return LinearTransform(hidden, heads, str(parameter))
    return DynamicConvolution(hidden, heads, int(parameter))


class FeedForwardStack(nn.Module):
    """hidden -> f, (stacks - 1) x (f -> f), GELU after each; then f -> hidden."""

    def __init__(self, hidden: int, width: int, stacks: int) -> None:
        super().__init__()
        inner: list[nn.Module] = [nn.Linear(hidden, width), nn.GELU()]
        for _ in range(stacks - 1):
            inner += [nn.Linear(width, width), nn.GELU()]
        self.inner = nn.Sequential(*inner)
        self.output = nn.Linear(width, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.inner(x))


class EncoderBlock(nn.Module):
    def __init__(self, hidden: int, layer: EncoderLayer) -> None:
        super().__init__()
        self.operation = build_operation(hidden, layer)
        self.operation_output = nn.Linear(hidden, hidden)
        self.operation_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.feed_forward = FeedForwardStack(
            hidden, layer.feed_forward_dimension, layer.num_feed_forward
        )
        self.feed_forward_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.operation_norm(x + self.operation_output(self.operation(x)))
        return self.feed_forward_norm(x + self.feed_forward(x))


class Embeddings(nn.Module):
    """Word + position + token-type tables, LayerNorm, projection to the hidden size."""

    def __init__(self, spec: FlexiBERTSpec) -> None:
        super().__init__()
        width = spec.embedding_size
        self.words = nn.Embedding(spec.vocab_size, width)
        self.positions = nn.Embedding(spec.max_position_embeddings, width)
        self.token_types = nn.Embedding(spec.type_vocab_size, width)
        self.norm = nn.LayerNorm(width, eps=1e-12)
        self.project = nn.Linear(width, spec.hidden_size) if width != spec.hidden_size else None

    def tables(self) -> list[nn.Embedding]:
        return [self.words, self.positions, self.token_types]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        segment = torch.zeros_like(tokens)  # one segment: every token has type 0
        x = self.words(tokens) + self.positions(positions) + self.token_types(segment)
        x = self.norm(x)
        return x if self.project is None else self.project(x)


class FlexiBERT(nn.Module):
    """The encoder; forward takes token ids (batch, seq), returns (batch, seq, hidden).

    No `output` mode (`archvocab.registry.set_output` leaves it as it is): an encoder's
    output is every position's hidden state, no vocabulary distribution, and what a deployed
    encoder hands its task head."""

    def __init__(self, spec: FlexiBERTSpec) -> None:
        super().__init__()
        self.spec = spec
        self.embeddings = Embeddings(spec)
        self.blocks = nn.ModuleList(EncoderBlock(spec.hidden_size, layer) for layer in spec.layers)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        seq, limit = tokens.shape[1], self.spec.max_position_embeddings
        if seq > limit:
            raise ValueError(f"sequence length {seq} exceeds max_position_embeddings={limit}")
        x = self.embeddings(tokens)
        for block in self.blocks:
            x = block(x)
        return x


def build_model(spec: FlexiBERTSpec) -> FlexiBERT:
    """Build the torch module for `spec` (random weights; nothing is loaded)."""
    if not isinstance(spec, FlexiBERTSpec):
        raise TypeError(f"expected a FlexiBERTSpec, got {type(spec).__name__}")
    return FlexiBERT(spec)


def example_inputs(
    spec: FlexiBERTSpec, batch_size: int, seq_len: int, generator: torch.Generator
) -> tuple[torch.Tensor]:
    """Random token ids, shape (batch_size, seq_len); no padding, so no attention mask."""
    return (torch.randint(0, spec.vocab_size, (batch_size, seq_len), generator=generator),)


_PRIMER_HIDDEN = 32
_PRIMER_VOCAB = 256


def primer_spec(spec: FlexiBERTSpec, seq_len: int) -> FlexiBERTSpec:
    """A tiny spec with one layer per distinct operation of `spec` (same heads, kernel and
    stack depth), and an embedding projection exactly when `spec` has one."""
    first_of_each: dict[tuple[str, str | int], EncoderLayer] = {}
    for layer in spec.layers:
        first_of_each.setdefault(layer.operation, layer)
    layers = tuple(
        EncoderLayer(
            layer.operation_type,
            layer.operation_parameter,
            math.gcd(layer.num_operation_heads, _PRIMER_HIDDEN),
            _PRIMER_HIDDEN,
            layer.num_feed_forward,
        )
        for layer in first_of_each.values()
    )
    projected = spec.embedding_size != spec.hidden_size
    return FlexiBERTSpec(
        hidden_size=_PRIMER_HIDDEN,
        n_layer=len(layers),
        layers=layers,
        vocab_size=_PRIMER_VOCAB,
        max_position_embeddings=seq_len,
        type_vocab_size=spec.type_vocab_size,
        embedding_size=_PRIMER_HIDDEN // 2 if projected else _PRIMER_HIDDEN,
    )
