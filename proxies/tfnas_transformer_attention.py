"""The paper's attention-head scores (section 3.6), one term per attention head.

For a minibatch X = {x_n} and a head h with output Att_h (its softmax(q k^T / sqrt(d)) v,
before the heads are merged) and attention probabilities sigma_h:
- confidence (after Voita et al.): mean over n of |max Att_h(x_n)|;
- softmax confidence (after Behnke & Heafield): mean over n of max sigma_h(x_n);
- importance (Michel et al.): mean over n of |<Att_h(x_n), dL/dAtt_h(x_n)>|.
"max" of a matrix is taken over the sequence axis it attends along, then averaged over the
rest, as the authors' code reduces (positions for Att_h; for sigma_h each query's largest
attention weight, Voita's confidence). The network's score is the sum over every head of
every layer; its "_normalized" variant divides by the number of heads H, the paper's
A(X) = sum_h A_h(X) / H.

Heads are found by a hook on each layer's `archvocab.spaces.attention_build.Attend`: FlexiBERT
layers without one (LT, DSC) contribute no term, and a model with no attention head scores 0.0.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from archvocab.spaces.attention_build import Attend
from proxies.tfnas_transformer_probe import Probe

ATTENTION_SCORES = ("attention_confidence", "softmax_confidence", "attention_importance")


@dataclass(frozen=True)
class HeadCall:
    """One call of an Attend module: its per-head output and probabilities."""

    output: torch.Tensor  # (batch, heads, queries, d_head)
    probabilities: torch.Tensor  # (batch, heads, queries, keys)


def probabilities(
    q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, causal: bool
) -> torch.Tensor:
    """The attention weights scaled_dot_product_attention applies (its default scale)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    if mask is not None:
        scores = (
            scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
        )
    return scores.softmax(dim=-1)


@contextmanager
def head_calls(model: nn.Module) -> Iterator[list[HeadCall]]:
    """Record every Attend call of `model` during the block, in call order."""
    calls: list[HeadCall] = []

    def hook(_module: nn.Module, args: tuple, kwargs: dict, output: torch.Tensor) -> None:
        q, k = args[0], args[1]
        mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
        causal = bool(args[4] if len(args) > 4 else kwargs.get("is_causal", False))
        calls.append(HeadCall(output, probabilities(q.detach(), k.detach(), mask, causal)))

    handles = [
        m.register_forward_hook(hook, with_kwargs=True)
        for m in model.modules()
        if isinstance(m, Attend)
    ]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


def head_terms(name: str, probe: Probe) -> list[float]:
    """The per-head values A_h of attention score `name`, every layer's heads in order."""
    needs_grad = name == "attention_importance"
    with torch.set_grad_enabled(needs_grad), head_calls(probe.model) as calls:
        output = probe.model(*probe.inputs)
    if not calls:
        return []
    if name == "attention_confidence":
        per_head = [c.output.detach().amax(dim=2).abs().mean(dim=(0, 2)) for c in calls]
    elif name == "softmax_confidence":
        per_head = [c.probabilities.amax(dim=-1).mean(dim=(0, 2)) for c in calls]
    else:
        grads = torch.autograd.grad(probe.loss(output), [c.output for c in calls])
        per_head = [
            (c.output.detach() * g).sum(dim=(2, 3)).abs().mean(dim=0) for c, g in zip(calls, grads)
        ]
    return [float(v) for head in per_head for v in head.double()]
