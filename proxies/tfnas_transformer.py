"""Training-free proxies of "Training-free NAS for RNNs and Transformers" (Serianni &
Kalita, ACL 2023), sections 3.1-3.4 and 3.6, for Transformer kinds.

Every score sums terms (heads, weight matrices, parameter tensors or activation layers,
see the modules below); "<name>_normalized" is that sum divided by the number of terms,
as the paper's authors normalized. Larger predicts a better model for every score here: the
paper's direction for the attention scores and for Mellor's and Celotti's scores; saliency
and diversity as Abdelfattah et al. and Zhou et al. rank them.

Jacobian covariance's "_normalized" divides by its number of eigenvalue terms, the batch
size: it ranks like the plain score (every architecture sees the same batch) and is there
for symmetry. Jacobian cosine has none: it is already a mean over example pairs (and the
authors' CSV column "Jacobian Score Normalized" is in fact the cosine score).

Imports torch: imported lazily by the proxy registry only.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec
from proxies.inputs import ProxyInputs
from proxies.lowcost_common import build_seeded, evaluating
from proxies.tfnas_transformer_attention import head_terms
from proxies.tfnas_transformer_generic import (
    activation_terms,
    diversity_terms,
    jacobian_cosine,
    jacobian_covariance,
    saliency_terms,
)
from proxies.tfnas_transformer_probe import KINDS, Probe, make_probe

NORMALIZED = "_normalized"
DEFAULT_INPUTS = ProxyInputs()  # frozen: safe as a shared default

# base name -> (description, per-term function); every one gets a "_normalized" variant.
_SUMMED: dict[str, tuple[str, Callable[[Probe], list[float]]]] = {
    "attention_confidence": (
        "sum over attention heads of the mean max of the head's output (Voita et al.)",
        lambda probe: head_terms("attention_confidence", probe),
    ),
    "softmax_confidence": (
        "sum over attention heads of the mean max attention weight (Behnke & Heafield)",
        lambda probe: head_terms("softmax_confidence", probe),
    ),
    "attention_importance": (
        "sum over attention heads of |Att_h . dL/dAtt_h| (Michel et al.)",
        lambda probe: head_terms("attention_importance", probe),
    ),
    "synaptic_saliency": (
        "sum over the layers' parameters of |dL/dtheta * theta| (Tanaka et al.)",
        saliency_terms,
    ),
    "synaptic_diversity": (
        "sum over token-mixing weight matrices of ||dL/dW||_nuc ||W||_nuc (Zhou et al.)",
        diversity_terms,
    ),
    "activation_distance": (
        "sum over feed-forward activations of NASWOT's log|K_H| (Mellor et al. 2021a)",
        activation_terms,
    ),
}
_SINGLE: dict[str, tuple[str, Callable[[Probe], float]]] = {
    "jacobian_covariance": (
        "Jacobian covariance score of the input Jacobians (Mellor et al. 2021b)",
        jacobian_covariance,
    ),
    "jacobian_cosine": (
        "1 - mean |cos|^(1/20) between the examples' input Jacobians (Celotti et al.)",
        jacobian_cosine,
    ),
}

DEFINED: dict[str, tuple[str, tuple[str, ...]]] = {}
for _base, (_what, _) in _SUMMED.items():
    DEFINED[_base] = (_what, KINDS)
    DEFINED[_base + NORMALIZED] = (f"{_what}, divided by the number of terms", KINDS)
for _base, (_what, _) in _SINGLE.items():
    DEFINED[_base] = (_what, KINDS)
# Mellor's score sums one term per eigenvalue: one per example of the batch.
DEFINED["jacobian_covariance" + NORMALIZED] = (
    f"{_SINGLE['jacobian_covariance'][0]}, divided by the batch size",
    KINDS,
)


def score_spec(name: str, spec: ArchSpec, inputs: ProxyInputs = DEFAULT_INPUTS) -> float:
    """Proxy `name` of `spec`'s model, weights drawn from inputs.seed, on inputs' minibatch."""
    if name not in DEFINED:
        raise InvalidSpec("proxy", f"unknown proxy {name!r}; allowed: {', '.join(DEFINED)}")
    kinds = DEFINED[name][1]
    if spec.kind not in kinds:
        raise InvalidSpec(
            "proxy", f"{name} does not apply to kind {spec.kind!r}; allowed: {', '.join(kinds)}"
        )
    base = name.removesuffix(NORMALIZED)
    if base in _SINGLE:
        value = _SINGLE[base][1](_probe(spec, inputs))
        return value / inputs.batch_size if name.endswith(NORMALIZED) else value
    terms = _terms(base, spec, inputs)
    total = math.fsum(terms)  # float even with no terms
    if name.endswith(NORMALIZED):  # no terms (no attention head): 0.0, like the sum
        return total / len(terms) if terms else 0.0
    return total


_LAST_MODEL: dict[tuple[str, int], nn.Module] = {}
_LAST_TERMS: dict[tuple[str, str, ProxyInputs], list[float]] = {}


def _probe(spec: ArchSpec, inputs: ProxyInputs) -> Probe:
    """The probe on the model of (spec, inputs.seed), kept until another spec or seed is
    asked for: scoring one architecture with several proxies builds it once (no proxy
    changes the model: gradients come from torch.autograd.grad, not .grad)."""
    key = (spec.arch_id, inputs.seed)
    if key not in _LAST_MODEL:
        _LAST_MODEL.clear()
        _LAST_TERMS.clear()
        _LAST_MODEL[key] = build_seeded(spec, inputs.seed).eval()  # eval: no dropout
    return make_probe(_LAST_MODEL[key], spec, inputs)


def _terms(base: str, spec: ArchSpec, inputs: ProxyInputs) -> list[float]:
    """A score's terms, kept beside the model: a plain score and its normalized one share
    one computation."""
    probe = _probe(spec, inputs)
    key = (base, spec.arch_id, inputs)
    if key not in _LAST_TERMS:
        with evaluating(probe.model), torch.random.fork_rng(devices=[]):
            _LAST_TERMS[key] = _SUMMED[base][1](probe)
    return _LAST_TERMS[key]
