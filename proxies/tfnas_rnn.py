"""The training-free NAS paper's metrics (Serianni & Kalita, ACL 2023) on NAS-Bench-NLP
recurrent cells (kind "nasbench_nlp"): hidden covariance per layer (section 3.5) and the
generic metrics it was compared with (sections 3.1-3.3).

Seeded weights (`inputs.seed`), eval mode, one minibatch from `proxies.inputs`, recurrent
states starting at zero. Larger predicts a better model (lower loss) for every name: the
paper finds hidden covariance falls as test loss rises (Kendall tau -0.37 on PTB), and the
other metrics are built the same way round (more distinct inputs, more saliency). Measured
on the 341 WikiText-2 runs (50 x 70 valid-text tokens), tau vs test loss: hidden covariance
-0.40 / -0.31 / -0.25 (layers 1-3), activation distance -0.20, Jacobian covariance -0.10,
cosine -0.08; synaptic saliency runs the wrong way (+0.26, 131 models; the authors' own
values give +0.22 on the same models) but keeps its published sign.

The authors' setting is NAS-Bench-NLP's evaluation batch, 50 sequences of 70 tokens
(`PAPER_INPUTS`). Hidden covariance correlates units over batch x seq observations, so a
batch much smaller than the layer width (600) leaves most eigenvalues at zero.

"_normalized" variants divide by the number of summed terms, the authors' BERT convention
(their RNN results have none): units for hidden covariance, examples for Jacobian
covariance, cell parameter tensors for saliency, (layer, step) codes for activation
distance. In NAS-Bench-NLP's fixed widths most of them rank like the plain scores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec
from archvocab.spaces.nasbench_nlp.build import RNNCellLM
from proxies import tfnas_rnn_forward as forward
from proxies.inputs import ProxyInputs, token_batch
from proxies.lowcost_common import build_seeded, evaluating
from proxies.tfnas_rnn_math import cosine_score, eigen_kl_score, hamming_kernel, log_det

KINDS = ("nasbench_nlp",)
PAPER_INPUTS = ProxyInputs(batch_size=50, seq_len=70)  # NAS-Bench-NLP eval_batch_size, bptt

DEFINED: dict[str, tuple[str, tuple[str, ...]]] = {
    **{
        f"hidden_covariance_l{i}": (
            f"eigenvalue score of the correlation of layer {i}'s hidden units over the batch",
            KINDS,
        )
        for i in (1, 2, 3)
    },
    "synaptic_saliency": ("sum |w * dL/dw| over the cells, L = |last layer output|^2 / 2", KINDS),
    "activation_distance": ("log det of the examples' activation-pattern agreement", KINDS),
    "jacobian_covariance": ("eigenvalue score of the correlation of input Jacobians", KINDS),
    "jacobian_cosine": ("1 - mean |cosine|^(1/20) between input Jacobians", KINDS),
}


def _hidden_covariance(layer: int) -> Callable[[RNNCellLM, torch.Tensor], float]:
    def score(model: RNNCellLM, tokens: torch.Tensor) -> float:
        states = _memo("hidden", model, tokens, forward.hidden_sequences)
        if layer > len(states):
            raise InvalidSpec(
                "proxy", f"hidden_covariance_l{layer}: the model has {len(states)} layers"
            )
        h = states[layer - 1]
        # rows: hidden units; columns: every (example, step) observation (section 3.5's H)
        return eigen_kl_score(h.reshape(-1, h.shape[-1]).T)

    return score


def _jacobian(model: RNNCellLM, tokens: torch.Tensor) -> torch.Tensor:
    return forward.embedding_jacobian(model, tokens).detach()


def _codes(model: RNNCellLM, tokens: torch.Tensor) -> list[torch.Tensor]:
    return _memo("codes", model, tokens, forward.activation_codes)


def _activation_distance(model: RNNCellLM, tokens: torch.Tensor) -> float:
    """log det(K + I), K the Hamming-agreement kernel of the activation codes summed over
    every layer and step. The identity plays the role of Mellor's k: a network whose codes
    cannot tell some examples apart (a cell whose state never leaves zero) or that has no
    activation node at all (K = 0, score 0) gets a low finite score instead of -inf. K's
    entries count thousands of units, so I barely moves a non-singular K's score."""
    batch = len(tokens)
    kernel = torch.eye(batch, dtype=torch.float64)
    for codes in _codes(model, tokens):  # one (layer, step) at a time
        kernel += hamming_kernel(codes)
    return log_det(kernel)


_SCORES: dict[str, Callable[[RNNCellLM, torch.Tensor], float]] = {
    **{f"hidden_covariance_l{i}": _hidden_covariance(i) for i in (1, 2, 3)},
    "synaptic_saliency": forward.synaptic_saliency,
    "activation_distance": _activation_distance,
    "jacobian_covariance": lambda m, t: eigen_kl_score(_memo("jac", m, t, _jacobian)),
    "jacobian_cosine": lambda m, t: cosine_score(_memo("jac", m, t, _jacobian)),
}


def _layer_units(layer: int) -> Callable[[RNNCellLM, torch.Tensor], int]:
    def units(model: RNNCellLM, tokens: torch.Tensor) -> int:
        return _memo("hidden", model, tokens, forward.hidden_sequences)[layer - 1].shape[-1]

    return units


# "_normalized" (the authors' BERT convention; their RNN results have none): divided by the
# number of summed terms. Eigenvalue scores have one per row: units (hidden covariance) or
# examples (Jacobian covariance). Jacobian cosine is already a mean and has no variant.
_TERMS: dict[str, Callable[[RNNCellLM, torch.Tensor], int]] = {
    **{f"hidden_covariance_l{i}": _layer_units(i) for i in (1, 2, 3)},
    "synaptic_saliency": lambda m, t: sum(1 for layer in m.layers for _ in layer.parameters()),
    "activation_distance": lambda m, t: max(1, len(_codes(m, t))),
    "jacobian_covariance": lambda m, t: len(t),
}
for _name, _terms in _TERMS.items():
    _SCORES[f"{_name}_normalized"] = lambda m, t, plain=_SCORES[_name], terms=_terms: (
        plain(m, t) / terms(m, t)
    )
    DEFINED[f"{_name}_normalized"] = (f"{DEFINED[_name][0]}, per term", KINDS)


DEFAULT_INPUTS = ProxyInputs()


def score_spec(name: str, spec: ArchSpec, inputs: ProxyInputs = DEFAULT_INPUTS) -> float:
    """Metric `name` of `spec`'s model: weights from `inputs.seed`, the batch `inputs` names."""
    if name not in _SCORES:
        raise InvalidSpec("proxy", f"unknown proxy {name!r}; allowed: {', '.join(DEFINED)}")
    if spec.kind not in KINDS:
        raise InvalidSpec(
            "proxy", f"{name} is defined for recurrent cells; allowed: {', '.join(KINDS)}"
        )
    model = _last_built(spec, inputs.seed)
    tokens = token_batch(inputs, spec.vocab_size)  # type: ignore[attr-defined]
    with evaluating(model):
        return _SCORES[name](model, tokens)


_LAST: dict[tuple[str, int], RNNCellLM] = {}
# Intermediate results of the last model (hidden states, Jacobians): the three hidden
# covariances share one forward pass, the two Jacobian metrics one backward pass.
_MEMO: dict[tuple[str, int, torch.Tensor], Any] = {}


def _last_built(spec: ArchSpec, seed: int) -> RNNCellLM:
    """The model of (spec, seed), kept until another is asked for: scoring one architecture
    with several metrics in a row builds it once (no metric changes the model)."""
    key = (spec.arch_id, seed)
    if key not in _LAST:
        _LAST.clear()
        _MEMO.clear()
        _LAST[key] = build_seeded(spec, seed)  # type: ignore[assignment]
    return _LAST[key]


def _memo(
    what: str,
    model: RNNCellLM,
    tokens: torch.Tensor,
    compute: Callable[[RNNCellLM, torch.Tensor], Any],
) -> Any:
    """`compute(model, tokens)`, reused while the same model sees equal tokens."""
    for (kind, model_id, seen), value in _MEMO.items():
        if kind == what and model_id == id(model) and torch.equal(seen, tokens):
            return value
    value = compute(model, tokens)
    _MEMO[(what, id(model), tokens)] = value
    return value
