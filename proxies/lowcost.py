"""LTS's low-cost proxies (section 3.1) on a built model: forward and backward passes, no
training. Imports torch, so only callers that build models import it (never the server:
proxies/__init__.py and proxies/registry.py stay torch-free).

Every proxy is `f(model, inputs, targets, decoder_modules) -> float`, larger predicting a
better model: `inputs` is the kind's `example_inputs` tuple, `targets` the next-token ids
(`lm_batch` gives both), and scores are summed over the decoder's parameters only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec
from proxies.inputs import DEFAULT_INPUTS, ProxyInputs
from proxies.lowcost_common import build_seeded, lm_batch
from proxies.lowcost_function import jacob_cov, relu_log_det, synflow
from proxies.lowcost_gradients import fisher, grad_norm, grasp, snip

__all__ = [
    "LOW_COST",
    "LowCostProxy",
    "build_seeded",
    "fisher",
    "grad_norm",
    "grasp",
    "jacob_cov",
    "lm_batch",
    "relu_log_det",
    "score_spec",
    "snip",
    "synflow",
]

LowCostProxy = Callable[
    [nn.Module, tuple[torch.Tensor, ...], torch.Tensor, Sequence[nn.Module]], float
]

LOW_COST: dict[str, LowCostProxy] = {
    "grad_norm": grad_norm,
    "snip": snip,
    "grasp": grasp,
    "fisher": fisher,
    "synflow": synflow,
    "jacob_cov": jacob_cov,
    "relu_log_det": relu_log_det,
}


def score_spec(name: str, spec: ArchSpec, inputs: ProxyInputs = DEFAULT_INPUTS) -> float:
    """Proxy `name` of `spec`'s model, weights drawn from inputs.seed, on `inputs`' batch."""
    if name not in LOW_COST:
        raise InvalidSpec(
            "proxy", f"unknown low-cost proxy {name!r}; allowed: {', '.join(LOW_COST)}"
        )
    model = _last_built(spec, inputs.seed)
    batch, targets = lm_batch(spec, inputs)
    return LOW_COST[name](model, batch, targets, model.decoder_modules())  # type: ignore[operator]


_LAST: dict[tuple[str, int], nn.Module] = {}


def _last_built(spec: ArchSpec, seed: int) -> nn.Module:
    """The model of (spec, seed), kept until another is asked for: scoring one architecture
    with several proxies in a row builds it once (no proxy changes the model)."""
    key = (spec.arch_id, seed)
    if key not in _LAST:
        _LAST.clear()
        _LAST[key] = build_seeded(spec, seed)
    return _LAST[key]
