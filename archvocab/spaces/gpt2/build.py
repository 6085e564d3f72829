"""spec -> torch.nn.Module: a GPT-2 decoder with per-layer widths and adaptive input/output.

The layout follows LTS's GPT-2 backbone so that parameter counts match its published logs:
pre-LayerNorm blocks (attention 4d^2+4d, feed-forward 2*d*d_inner+d_inner+d, two LayerNorms
each, one final LayerNorm), learned positions, adaptive input embedding with projections, and
an adaptive softmax whose cluster weights are tied to the input embedding (the head cluster's
projection is untied, as in LTS's `tie_projs=[False, True, ...]`).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from archvocab.spaces.attention_build import Attend
from archvocab.spaces.gpt2.spec import GPT2Spec


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.attend = Attend()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        shape = (batch, seq, self.n_head, width // self.n_head)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = self.attend(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(batch, seq, width))


class Block(nn.Module):
    def __init__(self, d_model: int, d_inner: int, n_head: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head)
        self.ln_2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_inner), nn.GELU(), nn.Linear(d_inner, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.ff(self.ln_2(x))


class AdaptiveEmbedding(nn.Module):
    """Adaptive input (Baevski & Auli): cluster i has width d_embed / k^i, projected to d_model."""

    def __init__(self, spec: GPT2Spec) -> None:
        super().__init__()
        self.scale = math.sqrt(spec.d_model)
        if spec.div_val == 1:
            # One table for the whole vocabulary; projected only if its width differs.
            self.bounds, widths = [0, spec.vocab_size], [spec.d_embed]
        else:
            self.bounds, widths = [0, *spec.cutoffs, spec.vocab_size], spec.embedding_widths()
        self.layers = nn.ModuleList(
            nn.Embedding(hi - lo, w) for lo, hi, w in zip(self.bounds, self.bounds[1:], widths)
        )
        needs_proj = spec.div_val > 1 or spec.d_embed != spec.d_model
        self.projs = nn.ParameterList(
            nn.Parameter(torch.randn(spec.d_model, w) * 0.02)
            for w in (widths if needs_proj else [])
        )
        self.d_model = spec.d_model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if len(self.layers) == 1:
            out = self.layers[0](tokens)
            out = F.linear(out, self.projs[0]) if len(self.projs) else out
            return out * self.scale
        flat = tokens.reshape(-1)
        out = torch.zeros(flat.numel(), self.d_model, dtype=self.projs[0].dtype, device=flat.device)
        for i, (lo, hi) in enumerate(zip(self.bounds, self.bounds[1:])):
            mask = (flat >= lo) & (flat < hi)
            index = mask.nonzero().squeeze(1)
            if index.numel():
                out.index_copy_(0, index, F.linear(self.layers[i](flat[index] - lo), self.projs[i]))
        return out.view(*tokens.shape, self.d_model) * self.scale


class AdaptiveSoftmax(nn.Module):
    """Log-probabilities over the whole vocabulary from a head cluster and tail clusters."""

    def __init__(self, spec: GPT2Spec, embedding: AdaptiveEmbedding) -> None:
        super().__init__()
        self.embedding = embedding  # weights and tail projections are tied to it
        self.n_clusters = len(spec.cutoffs)
        self.bounds = [0, *spec.cutoffs, spec.vocab_size]
        self.bias = nn.Parameter(torch.zeros(spec.vocab_size))
        self.cluster_weight = nn.Parameter(torch.zeros(self.n_clusters, spec.d_embed))
        self.cluster_bias = nn.Parameter(torch.zeros(self.n_clusters))
        self.head_proj = (
            nn.Parameter(torch.randn(spec.d_model, spec.d_embed) * 0.02)
            if len(embedding.projs)
            else None
        )

    def _weight(self, i: int) -> torch.Tensor:
        layers = self.embedding.layers
        if len(layers) == 1:
            return layers[0].weight[self.bounds[i] : self.bounds[i + 1]]
        return layers[i].weight

    def _project(self, hidden: torch.Tensor, i: int) -> torch.Tensor:
        projs = self.embedding.projs
        if i == 0:
            proj = self.head_proj
        else:  # tails share the embedding's projection: one per cluster, or one in all
            proj = projs[min(i, len(projs) - 1)] if len(projs) else None
        return hidden if proj is None else hidden @ proj

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        head_weight = self._weight(0)
        head_bias = self.bias[: self.bounds[1]]
        if self.n_clusters:
            head_weight = torch.cat([head_weight, self.cluster_weight])
            head_bias = torch.cat([head_bias, self.cluster_bias])
        head = F.log_softmax(F.linear(self._project(hidden, 0), head_weight, head_bias), dim=-1)
        if not self.n_clusters:
            return head
        parts = [head[..., : self.bounds[1]]]
        for i in range(1, self.n_clusters + 1):
            lo, hi = self.bounds[i], self.bounds[i + 1]
            logits = F.linear(self._project(hidden, i), self._weight(i), self.bias[lo:hi])
            parts.append(
                head[..., self.bounds[1] + i - 1 : self.bounds[1] + i] + F.log_softmax(logits, -1)
            )
        return torch.cat(parts, dim=-1)


class GPT2(nn.Module):
    """Decoder-only GPT-2; forward takes token ids (batch, seq) and returns log-probs:
    (batch, seq, vocab_size), or (batch, 1, vocab_size) with `output` "last" (the output
    layer run on the last position only; `archvocab.registry.set_output`)."""

    output = "all"

    def __init__(self, spec: GPT2Spec) -> None:
        super().__init__()
        self.spec = spec
        self.embed = AdaptiveEmbedding(spec)
        self.pos = nn.Embedding(spec.n_positions, spec.d_model)
        self.blocks = nn.ModuleList(
            Block(spec.d_model, d_inner, n_head)
            for d_inner, n_head in zip(spec.d_inner, spec.n_head)
        )
        self.ln_f = nn.LayerNorm(spec.d_model)
        self.head = AdaptiveSoftmax(spec, self.embed)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        seq = tokens.shape[1]
        if seq > self.spec.n_positions:
            raise ValueError(f"sequence length {seq} exceeds n_positions={self.spec.n_positions}")
        positions = torch.arange(seq, device=tokens.device)
        x = self.embed(tokens) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        if self.output == "last":
            x = x[:, -1:]
        return self.head(self.ln_f(x))

    def decoder_modules(self) -> list[nn.Module]:
        """The modules whose parameters LTS counts as 'decoder parameters'."""
        return [*self.blocks, self.ln_f]


def build_model(spec: GPT2Spec) -> GPT2:
    """Build the torch module for `spec` (random weights; nothing is loaded or executed)."""
    return GPT2(spec)


def example_inputs(
    spec: GPT2Spec, batch_size: int, seq_len: int, generator: torch.Generator
) -> tuple[torch.Tensor]:
    """Random token ids, shape (batch_size, seq_len)."""
    return (torch.randint(0, spec.vocab_size, (batch_size, seq_len), generator=generator),)


_PRIMER_VOCAB = 256


def primer_spec(spec: GPT2Spec, seq_len: int) -> GPT2Spec:
    """A 1-layer, d_model 64, 256-token GPT-2 taking the same code paths as `spec`
    (adaptive clusters or not, embedding projection or not)."""
    return GPT2Spec(
        n_layer=1,
        d_model=64,
        d_inner=(64,),
        n_head=(1,),
        d_embed=64 if spec.d_embed == spec.d_model else 32,
        div_val=min(spec.div_val, 2),
        cutoffs=(64, 128) if spec.cutoffs else (),
        vocab_size=_PRIMER_VOCAB,
        n_positions=seq_len,
    )


def count_parameters(modules: list[nn.Module] | nn.Module) -> int:
    """Distinct parameters of the given modules (tied tensors counted once)."""
    mods = modules if isinstance(modules, list) else [modules]
    seen = {id(p): p.numel() for m in mods for p in m.parameters()}
    return sum(seen.values())
