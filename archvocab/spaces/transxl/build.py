"""TransXLSpec -> torch.nn.Module: a Transformer-XL decoder as LTS trained it (archai's
MemTransformerLM, attn_type 0), with per-layer heads and widths.

Each layer: relative multi-head attention (Dai et al. 2019, section 3.3): scores are the
content term (q + u) . k plus the position term (q + v) . W_r R_{i-j}, R the sinusoid of the
relative distance, u and v learned per layer; then a ReLU feed-forward. Post-LayerNorm
(LTS's pre_lnorm = False) unless the spec asks for pre-norm; no final LayerNorm.

Memory: a forward is one segment of at most tgt_len tokens attending to a memory of mem_len
cached hidden states per layer. Measurement has no previous segment, so the memory is
zero-filled (not empty): each forward does the work over mem_len + seq keys that the model
does in steady state (dense kernels cost the same for zeros). The new memory is not returned.

The adaptive input is `archvocab.spaces.gpt2.build.AdaptiveEmbedding` (same layout as archai's); the
adaptive softmax is built here because its projections are tied per cluster (`tie_projs`:
LTS's WikiText-103 runs tie the tails, its LM1B runs tie none), which GPT-2's is not.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from archvocab.spaces.attention_build import Attend
from archvocab.spaces.gpt2.build import AdaptiveEmbedding
from archvocab.spaces.gpt2.spec import GPT2Spec
from archvocab.spaces.transxl.spec import TransXLSpec


def _init(*shape: int) -> nn.Parameter:
    # normal_ (not randn): agent.weights.build_fast defers in-place init of big models.
    return nn.Parameter(torch.empty(*shape).normal_(0.0, 0.02))


def relative_positions(klen: int, d_model: int, device: torch.device) -> torch.Tensor:
    """Sinusoid embeddings of the distances klen-1 .. 0, shape (klen, d_model)."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0.0, d_model, 2.0, device=device) / d_model))
    angles = torch.outer(torch.arange(klen - 1, -1, -1.0, device=device), inv_freq)
    return torch.cat([angles.sin(), angles.cos()], dim=-1)[:, :d_model]


def rel_shift(scores: torch.Tensor) -> torch.Tensor:
    """(b, h, q, k) scores against the distances k-1..0 -> each query's own distances.

    Query i sits at key index k - q + i (the memory comes first); after the shift its score
    at key j is the one against distance k - q + i - j. Dai et al.'s zero-pad-and-reshape
    trick; the entries for future keys are garbage and masked by the caller.
    """
    b, h, q, k = scores.shape
    padded = F.pad(scores, (1, 0)).view(b, h, k + 1, q)
    return padded[:, :, 1:].reshape(b, h, q, k)


class RelativeAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, d_head: int, pre_lnorm: bool) -> None:
        super().__init__()
        self.n_head, self.d_head, self.pre_lnorm = n_head, d_head, pre_lnorm
        width = n_head * d_head
        self.qkv = nn.Linear(d_model, 3 * width, bias=False)
        self.r_net = nn.Linear(d_model, width, bias=False)  # W_r: positions to keys
        self.o_net = nn.Linear(width, d_model, bias=False)
        self.layer_norm = nn.LayerNorm(d_model)
        self.attend = Attend()
        self.u = _init(n_head, d_head)  # r_w_bias: content bias
        self.v = _init(n_head, d_head)  # r_r_bias: position bias

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor | None, pos: torch.Tensor
    ) -> torch.Tensor:
        batch, qlen, _ = x.shape
        context = x if memory is None else torch.cat([memory, x], dim=1)
        klen = context.shape[1]
        heads = self.qkv(self.layer_norm(context) if self.pre_lnorm else context)
        q, k, v = (t.view(batch, klen, self.n_head, self.d_head) for t in heads.chunk(3, -1))
        q = q[:, -qlen:]
        r = self.r_net(pos).view(klen, self.n_head, self.d_head)
        position = rel_shift(torch.einsum("bihd,jhd->bhij", q + self.v, r))
        future = torch.ones(qlen, klen, dtype=torch.bool, device=x.device).triu(1 + klen - qlen)
        bias = position.mul(self.d_head**-0.5).masked_fill(future, float("-inf"))
        # softmax(((q + u) . k + position) / sqrt(d_head)): the content term fused.
        out = self.attend(
            (q + self.u).transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=bias
        )
        out = self.o_net(out.transpose(1, 2).reshape(batch, qlen, self.n_head * self.d_head))
        return x + out if self.pre_lnorm else self.layer_norm(x + out)


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_inner: int, pre_lnorm: bool) -> None:
        super().__init__()
        self.pre_lnorm = pre_lnorm
        self.core = nn.Sequential(
            nn.Linear(d_model, d_inner), nn.ReLU(), nn.Linear(d_inner, d_model)
        )
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_lnorm:
            return x + self.core(self.layer_norm(x))
        return self.layer_norm(x + self.core(x))


class DecoderLayer(nn.Module):
    def __init__(self, spec: TransXLSpec, layer: int) -> None:
        super().__init__()
        heads, width = spec.n_head[layer], spec.head_dims()[layer]
        self.attn = RelativeAttention(spec.d_model, heads, width, spec.pre_lnorm)
        self.ff = FeedForward(spec.d_model, spec.d_inner[layer], spec.pre_lnorm)

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor | None, pos: torch.Tensor
    ) -> torch.Tensor:
        return self.ff(self.attn(x, memory, pos))


class ProjectedAdaptiveLogSoftmax(nn.Module):
    """Log-probabilities over the vocabulary from a head cluster and tail clusters; weights
    tied to the embedding tables, cluster i's projection tied to the embedding's if
    tie_projs[i], else its own (archai's ProjectedAdaptiveLogSoftmax with tie_weight)."""

    def __init__(self, spec: TransXLSpec, embedding: AdaptiveEmbedding) -> None:
        super().__init__()
        self.embedding = embedding
        self.bounds = [0, *spec.cutoffs, spec.vocab_size]
        self.n_clusters = len(spec.cutoffs)
        self.bias = nn.Parameter(torch.zeros(spec.vocab_size))
        self.cluster_weight = _init(self.n_clusters, spec.d_embed)
        self.cluster_bias = nn.Parameter(torch.zeros(self.n_clusters))
        projected = len(embedding.projs) > 0
        self.own_projs = nn.ParameterDict(
            {
                str(i): _init(spec.d_model, width)
                for i, (width, tied) in enumerate(
                    zip(spec.embedding_widths(), spec.projection_ties())
                )
                if projected and not tied
            }
        )

    def _logits(
        self, hidden: torch.Tensor, i: int, weight: torch.Tensor, bias: torch.Tensor
    ) -> torch.Tensor:
        projs = self.embedding.projs
        if str(i) in self.own_projs:
            hidden = hidden @ self.own_projs[str(i)]
        elif len(projs):  # tied: one projection per cluster, or one for the single table
            hidden = hidden @ projs[min(i, len(projs) - 1)]
        return F.linear(hidden, weight, bias)

    def _weight(self, i: int) -> torch.Tensor:
        layers = self.embedding.layers
        if len(layers) == 1:
            return layers[0].weight[self.bounds[i] : self.bounds[i + 1]]
        return layers[i].weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        head_weight = torch.cat([self._weight(0), self.cluster_weight])
        head_bias = torch.cat([self.bias[: self.bounds[1]], self.cluster_bias])
        head = F.log_softmax(self._logits(hidden, 0, head_weight, head_bias), dim=-1)
        parts = [head[..., : self.bounds[1]]]
        for i in range(1, self.n_clusters + 1):
            lo, hi = self.bounds[i], self.bounds[i + 1]
            tail = F.log_softmax(self._logits(hidden, i, self._weight(i), self.bias[lo:hi]), -1)
            cluster = self.bounds[1] + i - 1  # the head's logit for "in cluster i"
            parts.append(head[..., cluster : cluster + 1] + tail)
        return torch.cat(parts, dim=-1)


class TransformerXL(nn.Module):
    """Forward takes token ids (batch, seq <= tgt_len) and returns log-probs (batch, seq,
    vocab_size), the segment attending to a zero-filled memory of mem_len states per layer;
    with `output` "last", (batch, 1, vocab_size): the adaptive softmax over the last
    position only (`archvocab.registry.set_output`)."""

    output = "all"

    def __init__(self, spec: TransXLSpec) -> None:
        super().__init__()
        self.spec = spec
        self.embed = AdaptiveEmbedding(_embedding_shape(spec))
        self.layers = nn.ModuleList(DecoderLayer(spec, i) for i in range(spec.n_layer))
        self.head = ProjectedAdaptiveLogSoftmax(spec, self.embed)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        batch, seq = tokens.shape
        if seq > self.spec.tgt_len:
            raise ValueError(f"sequence length {seq} exceeds tgt_len={self.spec.tgt_len}")
        x = self.embed(tokens)
        mem_len, d_model = self.spec.mem_len, self.spec.d_model
        # Every layer's memory is zeros of the same shape: one tensor serves them all.
        memory = x.new_zeros(batch, mem_len, d_model) if mem_len else None
        pos = relative_positions(mem_len + seq, d_model, x.device).to(x.dtype)
        for layer in self.layers:
            x = layer(x, memory, pos)
        return self.head(x[:, -1:] if self.output == "last" else x)

    def decoder_modules(self) -> list[nn.Module]:
        """The modules whose parameters LTS counts as 'decoder parameters' (nonembedding)."""
        return list(self.layers)


def _embedding_shape(spec: TransXLSpec) -> GPT2Spec:
    """The GPT-2 embedding reads only the embedding fields of a spec: the same ones here."""
    return GPT2Spec(
        n_layer=1,
        d_model=spec.d_model,
        d_inner=(1,),
        n_head=(1,),
        d_embed=spec.d_embed,
        div_val=spec.div_val,
        cutoffs=spec.cutoffs,
        vocab_size=spec.vocab_size,
    )


def build_model(spec: TransXLSpec) -> TransformerXL:
    """Build the torch module for `spec` (random weights; nothing is loaded or executed)."""
    return TransformerXL(spec)


def example_inputs(
    spec: TransXLSpec, batch_size: int, seq_len: int, generator: torch.Generator
) -> tuple[torch.Tensor]:
    """Random token ids, shape (batch_size, seq_len)."""
    return (torch.randint(0, spec.vocab_size, (batch_size, seq_len), generator=generator),)


def primer_spec(spec: TransXLSpec, seq_len: int) -> TransXLSpec:
    """A 1-layer, d_model 64, 256-token Transformer-XL taking the same code paths as `spec`
    (clusters or not, projections and their ties, memory or not, norm placement)."""
    cutoffs = (64, 128) if spec.cutoffs else ()
    ties = spec.projection_ties()
    tails = ties[1] if len(ties) > 1 else True
    return TransXLSpec(
        n_layer=1,
        d_model=64,
        d_inner=(64,),
        n_head=(1,),
        d_embed=64 if spec.d_embed == spec.d_model else 32,
        div_val=min(spec.div_val, 2),
        cutoffs=cutoffs,
        vocab_size=256,
        tgt_len=seq_len,
        mem_len=min(spec.mem_len, seq_len),
        tie_projs=(ties[0], *[tails] * len(cutoffs)),
        pre_lnorm=spec.pre_lnorm,
    )
