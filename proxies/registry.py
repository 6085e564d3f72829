"""Proxies by name: the implementations of `archvocab.proxy_catalog`'s names.

A proxy maps a spec (and, for data-dependent ones, a `ProxyInputs` minibatch) to a score
where larger predicts a better model. Which names exist, their cost class and the kinds they
apply to are declared in the catalogue (the wire validates searches against it); this module
binds each name to its code. "low" proxies import torch when first scored, never here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from archvocab.errors import InvalidSpec
from archvocab.proxy_catalog import PROXY_CATALOG
from archvocab.registry import ArchSpec
from proxies import flops, params
from proxies.inputs import ProxyInputs

Score = Callable[[ArchSpec, ProxyInputs], float]

# LTS section 3.1; proxies.lowcost.
LOW_COST_PROXIES = {
    "grad_norm": "sum of the decoder's gradient norms",
    "snip": "sum |w * dL/dw| over the decoder",
    "grasp": "-w * (H g) over the decoder",
    "fisher": "per-channel Fisher information of the decoder's linear outputs",
    "synflow": "synaptic flow of the decoder with |w| and all-ones input",
    "jacob_cov": "correlation of per-example input Jacobians",
    "relu_log_det": "log-determinant of the activation-code kernel",
}

# The training-free NAS paper's proxies: which module scores each kind (tests check that each
# module's DEFINED agrees with this table and with the catalogue).
TFNAS_MODULES = {
    "proxies.tfnas_transformer": ("gpt2", "transxl", "flexibert"),
    "proxies.tfnas_rnn": ("nasbench_nlp",),
}
TFNAS_PROXIES = {
    "attention_confidence": "how strongly attention heads' outputs peak (Voita et al.)",
    "softmax_confidence": "how peaked attention heads' weights are (Behnke & Heafield)",
    "attention_importance": "|head output * its gradient| over heads (Michel et al.)",
    "synaptic_diversity": "nuclear norms of token-mixing weights and their gradients",
    "synaptic_saliency": "sum |w * dL/dw| (Tanaka et al.)",
    "activation_distance": "how distinct the examples' activation patterns are (NASWOT)",
    "jacobian_covariance": "eigenvalue score of the input Jacobians' correlation",
    "jacobian_cosine": "1 - mean |cosine| between the examples' input Jacobians",
    **{
        f"hidden_covariance_l{i}": f"eigenvalue score of recurrent layer {i}'s hidden states"
        for i in (1, 2, 3)
    },
}
NORMALIZED = "_normalized"

ZERO_COST: dict[str, tuple[Callable[[ArchSpec], float], str]] = {
    "decoder_params": (
        params.decoder_params,
        "attention + feed-forward + layer-norm parameters (LTS)",
    ),
    "total_params": (
        params.total_params,
        "all parameters, embeddings and output head included",
    ),
    "flops": (
        flops.flops,
        f"2 x multiply-accumulates of the decoder's matrix products over "
        f"{flops.REFERENCE_TOKENS} tokens",
    ),
}


@dataclass(frozen=True)
class Proxy:
    name: str
    cost: str  # "zero": analytic, no model built; "low": forward and backward passes
    compute: Score
    description: str
    kinds: tuple[str, ...] | None = None  # the space kinds it applies to (None: all)

    def score(self, spec: ArchSpec, inputs: ProxyInputs | None = None) -> float:
        """The proxy of `spec`; data-dependent proxies read `inputs` (default: random)."""
        if self.kinds is not None and spec.kind not in self.kinds:
            raise InvalidSpec(
                "proxy",
                f"{self.name} does not apply to space kind {spec.kind!r}; "
                f"it applies to: {', '.join(self.kinds)}",
            )
        return float(self.compute(spec, inputs or ProxyInputs()))


def _analytic(count: Callable[[ArchSpec], float]) -> Score:
    def score(spec: ArchSpec, _inputs: ProxyInputs) -> float:
        return float(count(spec))

    return score


def _in_module(module: str, name: str) -> Score:
    """`module.score_spec(name, spec, inputs)`, the module (and torch) imported on first use."""

    def score(spec: ArchSpec, inputs: ProxyInputs) -> float:
        return importlib.import_module(module).score_spec(name, spec, inputs)

    return score


def _by_kind(name: str) -> Score:
    """Scored by the tfnas module that handles the spec's kind."""

    def score(spec: ArchSpec, inputs: ProxyInputs) -> float:
        module = next(m for m, kinds in TFNAS_MODULES.items() if spec.kind in kinds)
        return importlib.import_module(module).score_spec(name, spec, inputs)

    return score


def _implementation(name: str) -> tuple[Score, str]:
    if name in ZERO_COST:
        count, text = ZERO_COST[name]
        return _analytic(count), text
    if name in LOW_COST_PROXIES:
        return _in_module("proxies.lowcost", name), LOW_COST_PROXIES[name]
    base = name.removesuffix(NORMALIZED)
    if base in TFNAS_PROXIES:
        text = TFNAS_PROXIES[base]
        return _by_kind(name), text if base == name else f"{text}, per term"
    raise LookupError(f"proxy {name!r} is in archvocab.proxy_catalog but has no implementation")


def _build() -> dict[str, Proxy]:
    out = {}
    for name, entry in PROXY_CATALOG.items():
        compute, text = _implementation(name)
        out[name] = Proxy(name, entry.cost, compute, text, entry.kinds)
    return out


PROXIES: dict[str, Proxy] = _build()


def get_proxy(name: str) -> Proxy:
    try:
        return PROXIES[name]
    except KeyError:
        raise InvalidSpec(
            "proxy", f"unknown proxy {name!r}; allowed: {', '.join(PROXIES)}"
        ) from None


def zero_cost_scores(spec: ArchSpec) -> dict[str, float]:
    """The zero-cost proxies of a spec: those that apply to its kind (all analytic)."""
    return {
        p.name: p.score(spec)
        for p in PROXIES.values()
        if p.cost == "zero" and (p.kinds is None or spec.kind in p.kinds)
    }
