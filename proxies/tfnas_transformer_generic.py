"""The paper's architecture-agnostic scores (sections 3.1-3.4) on a Transformer probe.

Each "term" function returns the per-term values the score sums (its "_normalized" variant
divides the sum by their number, as the paper's authors normalized):
- synaptic saliency (Tanaka et al.; Abdelfattah et al.'s sum over parameters): one term
  per parameter tensor of the layers, sum |dL/dtheta * theta|. Magnitudes, as SNIP and the
  authors take them: signed terms of a random network cancel.
- synaptic diversity (Zhou et al.): one term per weight matrix W_m of the token-mixing
  sublayers, ||dL/dW_m||_nuc * ||W_m||_nuc.
- activation distance (Mellor et al. 2021a, NASWOT): one term per feed-forward activation:
  log|det K|, K[i, j] the number of that activation's units where examples i and j are both
  positive or both not (N_A minus their Hamming distance); larger: examples told apart.
The Jacobian scores (Mellor et al. 2021b; Celotti et al.'s cosine) look at J, each example's
gradient of the loss with respect to its input to the layers (the paper's J = dL/dx_n; the
low-cost `jacob_cov` differentiates the summed outputs instead, degenerate for FlexiBERT
whose outputs come out of a LayerNorm).
"""

from __future__ import annotations

import torch

from proxies.lowcost_common import (
    decoder_input,
    decoder_parameters,
    module_outputs,
)
from proxies.tfnas_transformer_probe import Probe, mixing_matrices

# Mellor's relu_log_det treats GELU like ReLU: GELU(x) > 0 exactly when x > 0.
_ACTIVATIONS = (torch.nn.GELU, torch.nn.ReLU)
# Mellor et al.'s shift: keeps log and 1/x of near-zero eigenvalues finite.
_EIGEN_SHIFT = 1e-5
# Celotti et al.'s exponent on |cosine|: near 1 for all but almost-orthogonal pairs.
_COSINE_POWER = 1 / 20


def saliency_terms(probe: Probe) -> list[float]:
    params = decoder_parameters(probe.blocks)
    grads = torch.autograd.grad(probe.forward_loss(), params, allow_unused=True)
    return [
        float((p.detach() * g).abs().double().sum()) if g is not None else 0.0
        for p, g in zip(params, grads)
    ]


def diversity_terms(probe: Probe) -> list[float]:
    matrices = [m for layer in mixing_matrices(probe) for m in layer]
    if not matrices:
        return []
    params = list({id(p): p for p, _ in matrices}.values())
    grads = dict(zip(map(id, params), torch.autograd.grad(probe.forward_loss(), params)))
    return [
        float(_nuclear(p.detach()[rows]) * _nuclear(grads[id(p)][rows])) for p, rows in matrices
    ]


def _nuclear(matrix: torch.Tensor) -> torch.Tensor:
    return torch.linalg.matrix_norm(matrix.double(), ord="nuc")


def activation_terms(probe: Probe) -> list[float]:
    with torch.no_grad(), module_outputs(probe.blocks, _ACTIVATIONS) as outputs:
        probe.model(*probe.inputs)
    terms = []
    for activation in outputs:
        codes = (activation > 0).reshape(activation.shape[0], -1).double()
        kernel = codes @ codes.T + (1 - codes) @ (1 - codes).T
        terms.append(float(torch.linalg.slogdet(kernel).logabsdet))
    return terms


def input_jacobians(probe: Probe) -> torch.Tensor:
    """J: (batch, seq * width), each example's gradient of the loss with respect to its
    input to the first layer (the embedding output: tokens themselves have no gradient)."""
    leaves: list[torch.Tensor] = []

    def as_leaf(x: torch.Tensor) -> torch.Tensor:
        leaves.append(x.detach().requires_grad_(True))
        return leaves[-1]

    with decoder_input(probe.blocks, as_leaf):
        (jacobian,) = torch.autograd.grad(probe.forward_loss(), leaves)
    if jacobian.shape[0] < 2:
        raise ValueError("the Jacobian scores need a batch of at least two examples")
    return jacobian.reshape(jacobian.shape[0], -1).double()


def jacobian_covariance(probe: Probe) -> float:
    """Mellor et al.: -sum(log(v + k) + 1 / (v + k)) over the eigenvalues v of corr(J)."""
    eigenvalues = torch.linalg.eigvalsh(torch.corrcoef(input_jacobians(probe)))
    shifted = eigenvalues + _EIGEN_SHIFT
    return float(-(shifted.log() + shifted.reciprocal()).sum())


def jacobian_cosine(probe: Probe) -> float:
    """Celotti et al.: 1 - mean over pairs i != j of |cos(J_i, J_j)|^(1/20); larger: the
    examples' Jacobians point in more different directions."""
    rows = input_jacobians(probe)
    n = rows.shape[0]
    unit = rows / rows.norm(dim=1, keepdim=True).clamp_min(1e-300)
    off_diagonal = ~torch.eye(n, dtype=torch.bool)
    cosines = (unit @ unit.T)[off_diagonal].abs()
    return float(1 - cosines.pow(_COSINE_POWER).sum() / (n * n - n))
