"""The attention kernel every transformer builder calls, as a module of its own (torch: named
*_build so that the torch-free vocabulary never imports it).

A parameter-free `nn.Module` around `scaled_dot_product_attention`, so that a forward hook
can see each head's output and the query, key and mask its probabilities come from (the
training-free attention proxies in proxies/tfnas_transformer_attention.py read them) while the
model keeps the fused kernel: timings, parameter counts and exports are unchanged.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class Attend(nn.Module):
    """(batch, heads, q, d) queries, (batch, heads, k, d) keys and values -> per-head outputs
    (batch, heads, q, d): softmax(q k^T / sqrt(d) + attn_mask) v, causal if asked."""

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)
