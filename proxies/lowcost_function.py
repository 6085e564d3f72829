"""Proxies from the network function rather than the loss: synflow, jacob_cov, relu_log_det.

synflow scores the decoder's parameters on a positive copy of the model; jacob_cov and
relu_log_det look at how differently the decoder treats the examples of one batch (the
decoder's input Jacobians, its feed-forward activation patterns). All take
(model, inputs, targets, decoder_modules) and return a float; larger predicts better.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence

import torch
from torch import nn

from proxies.lowcost_common import (
    decoder_input,
    decoder_parameters,
    evaluating,
    module_outputs,
    per_parameter_sum,
)

# Mellor et al.'s shift: keeps log and 1/x of near-zero eigenvalues finite.
_EIGEN_SHIFT = 1e-5
_ACTIVATIONS = (nn.GELU, nn.ReLU)


def synflow(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    targets: torch.Tensor,
    decoder_modules: Sequence[nn.Module],
) -> float:
    """SynFlow (Tanaka et al. 2020): sum over decoder weights of w * dR/dw, where every
    weight is made positive (abs), the decoder's input is all ones and R is the sum of the
    decoder's outputs. The targets are not used: synflow needs no data.

    As synflow disables batch norm, each LayerNorm keeps only its affine part (x * g + b):
    normalising would make R constant (a LayerNorm's outputs sum to sum(b)) and hide the
    path products synflow measures. R stops at the decoder, so the softmax projection is left
    out (LTS). Runs on a float64 copy: products of many positive weights overflow float32,
    and the caller's model keeps its signs, dtype and norms.
    """
    del targets
    # One deepcopy of both keeps the decoder modules pointing into the copied model.
    positive, decoder = copy.deepcopy((model, list(decoder_modules)))
    params = decoder_parameters(decoder)
    if not params:
        return 0.0
    _linearize(positive)
    with evaluating(positive), decoder_input(decoder, torch.ones_like):
        total = _decoder_output(positive, inputs, decoder[-1]).sum()
        grads = torch.autograd.grad(total, params, allow_unused=True)
    return per_parameter_sum([p.detach() * g for p, g in zip(params, grads) if g is not None])


def _linearize(model: nn.Module) -> None:
    """float64, every parameter positive, LayerNorms reduced to their affine part."""
    model.double()
    with torch.no_grad():
        for p in model.parameters():
            p.abs_()
    for module in model.modules():
        if isinstance(module, nn.LayerNorm):
            module.forward = functools.partial(_affine_only, module)  # type: ignore[method-assign]


def _affine_only(norm: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    if norm.weight is None:
        return x
    return x * norm.weight + (norm.bias if norm.bias is not None else 0)


class _DecoderDone(Exception):
    """Raised once the decoder's output is in hand: the output head is not needed (its
    vocabulary-sized projection is the costly part with LTS's large vocabularies)."""


def _decoder_output(
    model: nn.Module, inputs: tuple[torch.Tensor, ...], last: nn.Module
) -> torch.Tensor:
    captured: list[torch.Tensor] = []

    def hook(_module: nn.Module, _args: tuple, output: torch.Tensor) -> None:
        captured.append(output)
        raise _DecoderDone

    handle = last.register_forward_hook(hook)
    try:
        model(*inputs)
    except _DecoderDone:
        pass
    finally:
        handle.remove()
    return captured[0]


def jacob_cov(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    targets: torch.Tensor,
    decoder_modules: Sequence[nn.Module],
) -> float:
    """Mellor et al. (2020): J is each example's gradient of the summed outputs with respect
    to the decoder's input (the embedding output); with v the eigenvalues of the examples'
    correlation matrix corr(J), the score is -sum(log(v + k) + 1 / (v + k)), k = 1e-5.

    Needs a batch of at least two examples; the targets are not used.
    """
    del targets
    leaves: list[torch.Tensor] = []

    def as_leaf(x: torch.Tensor) -> torch.Tensor:
        leaves.append(x.detach().requires_grad_(True))
        return leaves[-1]

    with evaluating(model), decoder_input(decoder_modules, as_leaf):
        total = model(*inputs).sum()
        (jacobian,) = torch.autograd.grad(total, leaves)
    per_example = jacobian.reshape(jacobian.shape[0], -1).double()
    if per_example.shape[0] < 2:
        raise ValueError("jacob_cov needs a batch of at least two examples")
    eigenvalues = torch.linalg.eigvalsh(torch.corrcoef(per_example))
    shifted = eigenvalues + _EIGEN_SHIFT
    return float(-(shifted.log() + shifted.reciprocal()).sum())


def relu_log_det(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    targets: torch.Tensor,
    decoder_modules: Sequence[nn.Module],
) -> float:
    """NASWOT (Mellor et al. 2021): log |det K|, where each example's binary code c is
    (activation > 0) over every feed-forward activation (GELU or ReLU) of the decoder at
    every position, and K[i, j] = number of units where the codes of i and j agree.

    GELU(x) > 0 exactly when x > 0, so the code is the same as a ReLU's. The targets are not
    used.
    """
    del targets
    with (
        torch.no_grad(),
        evaluating(model),
        module_outputs(decoder_modules, _ACTIVATIONS) as activations,
    ):
        model(*inputs)
    if not activations:
        raise ValueError("relu_log_det: the decoder has no GELU or ReLU activations")
    batch = activations[0].shape[0]
    codes = torch.cat([(a > 0).reshape(batch, -1) for a in activations], dim=1).double()
    kernel = codes @ codes.T + (1 - codes) @ (1 - codes).T
    return float(torch.linalg.slogdet(kernel).logabsdet)
