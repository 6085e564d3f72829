"""Pruning-score proxies from the language-model loss: grad_norm, snip, grasp, fisher.

Each is the pruning criterion of its paper summed over the decoder's parameters (or, for
fisher, the decoder's Linear outputs), as Abdelfattah et al. turn pruning scores into NAS
proxies and LTS (section 3.1) restricts them to the decoder. All take
(model, inputs, targets, decoder_modules) and return a float; larger predicts better.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from proxies.lowcost_common import (
    decoder_parameters,
    evaluating,
    lm_loss,
    module_outputs,
    per_parameter_sum,
)


def _decoder_gradients(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    targets: torch.Tensor,
    params: list[nn.Parameter],
    create_graph: bool = False,
) -> list[torch.Tensor]:
    loss = lm_loss(model(*inputs), targets)
    grads = torch.autograd.grad(loss, params, create_graph=create_graph, allow_unused=True)
    return _zeros_for_unused(grads, params)


def _zeros_for_unused(
    grads: Sequence[torch.Tensor | None], params: list[nn.Parameter]
) -> list[torch.Tensor]:
    # A parameter the loss does not reach (none today) has a zero gradient, not a crash.
    return [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]


def _weights_and_gradients(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    targets: torch.Tensor,
    decoder_modules: Sequence[nn.Module],
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(w, dL/dw) of every decoder parameter tensor, in eval mode, both detached."""
    params = decoder_parameters(decoder_modules)
    if not params:
        return []
    with evaluating(model):
        grads = _decoder_gradients(model, inputs, targets, params)
    return [(p.detach(), g.detach()) for p, g in zip(params, grads)]


def grad_norm(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    targets: torch.Tensor,
    decoder_modules: Sequence[nn.Module],
) -> float:
    """Sum over decoder parameter tensors of the L2 norm of dL/dw."""
    pairs = _weights_and_gradients(model, inputs, targets, decoder_modules)
    return per_parameter_sum([g.norm(2) for _, g in pairs])


def snip(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    targets: torch.Tensor,
    decoder_modules: Sequence[nn.Module],
) -> float:
    """SNIP (Lee et al. 2019) connection sensitivity: sum over decoder weights of |w * dL/dw|."""
    pairs = _weights_and_gradients(model, inputs, targets, decoder_modules)
    return per_parameter_sum([(w * g).abs() for w, g in pairs])


def grasp(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    targets: torch.Tensor,
    decoder_modules: Sequence[nn.Module],
) -> float:
    """GraSP (Wang et al. 2020): sum over decoder weights of -w * (H g), H the Hessian of the
    loss and g its gradient, both over the decoder's parameters.

    H g is the gradient of g_const . g(w): one double-backward, no Hessian materialised.
    """
    params = decoder_parameters(decoder_modules)
    if not params:
        return 0.0
    with evaluating(model), _math_attention():
        grads = _decoder_gradients(model, inputs, targets, params, create_graph=True)
        dot = sum((g * g.detach()).sum() for g in grads)
        hessian_grad = torch.autograd.grad(dot, params, allow_unused=True)
    hessian_grad = _zeros_for_unused(hessian_grad, params)
    return per_parameter_sum([-p.detach() * hg for p, hg in zip(params, hessian_grad)])


def _math_attention():  # type: ignore[no-untyped-def]
    # The fused CPU attention kernels have no double backward; the math kernel has.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.MATH)


def fisher(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    targets: torch.Tensor,
    decoder_modules: Sequence[nn.Module],
) -> float:
    """Fisher (Theis et al. 2018) over the decoder's Linear outputs a: per output channel,
    0.5 * mean over examples of (sum over positions of a * dL/da)^2, summed over channels."""
    with evaluating(model), module_outputs(decoder_modules, (nn.Linear,)) as activations:
        loss = lm_loss(model(*inputs), targets)
        if not activations:
            return 0.0
        grads = torch.autograd.grad(loss, activations, allow_unused=True)
    per_channel = []
    for act, grad in zip(activations, grads):
        if grad is None:
            continue
        per_example = (act.detach() * grad).reshape(act.shape[0], -1, act.shape[-1]).sum(1)
        per_channel.append(0.5 * per_example.pow(2).mean(0))
    return per_parameter_sum(per_channel)
