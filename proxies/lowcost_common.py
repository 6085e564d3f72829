"""What every low-cost proxy shares: the language-model batch and loss, the decoder's
parameters, and a way to reach the decoder's input.

LTS (section 3.1) scores only the decoder: the embedding is a table lookup and the softmax
projection is tied to it, so their gradients say more about the vocabulary than about the
architecture. The proxies still run the whole model forward (the loss needs the head); they
only sum over the parameters of `decoder_modules`.

Nothing here touches `.grad` or the weights: gradients come from `torch.autograd.grad`, so a
model scored twice gives the same value and is left as it was found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn
from torch.nn import functional as F

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec, get_kind
from proxies.inputs import RANDOM, ProxyInputs, token_batch

# Kinds whose forward is "token ids -> log-probs over the next token".
LM_KINDS = ("gpt2", "transxl")


def lm_batch(spec: ArchSpec, inputs: ProxyInputs) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """(model inputs, next-token targets) for a language-model kind, drawn from inputs.seed.

    One sequence of seq_len + 1 tokens per row: the model reads the first seq_len, the
    targets are the same row shifted by one. Random tokens come from the kind's own
    `example_inputs`, text from `proxies.inputs.token_batch`.
    """
    if spec.kind not in LM_KINDS:
        raise InvalidSpec(
            "kind", f"low-cost proxies need a language model; allowed: {', '.join(LM_KINDS)}"
        )
    length = inputs.seq_len + 1
    if inputs.source == RANDOM:
        builder = get_kind(spec.kind).load_builder()
        generator = torch.Generator().manual_seed(inputs.seed)
        (tokens,) = builder.example_inputs(spec, inputs.batch_size, length, generator)
    else:
        tokens = token_batch(inputs, spec.vocab_size, length)
    return (tokens[:, :-1],), tokens[:, 1:]


def build_seeded(spec: ArchSpec, seed: int) -> nn.Module:
    """The model of `spec` with weights drawn from `seed`, the global RNG left as it was."""
    builder = get_kind(spec.kind).load_builder()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return builder.build_model(spec)


def lm_loss(log_probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token negative log-likelihood of (batch, seq, vocab) log-probs."""
    return F.nll_loss(log_probs.reshape(-1, log_probs.shape[-1]), targets.reshape(-1))


def decoder_parameters(decoder_modules: Sequence[nn.Module]) -> list[nn.Parameter]:
    """The distinct parameters of the decoder modules (a tied tensor once)."""
    seen: dict[int, nn.Parameter] = {}
    for module in decoder_modules:
        for p in module.parameters():
            seen.setdefault(id(p), p)
    return list(seen.values())


def per_parameter_sum(values: Sequence[torch.Tensor]) -> float:
    """One float from per-parameter scores, summed in float64 so many small terms add up."""
    if not values:
        return 0.0
    return float(sum(v.double().sum() for v in values))


@contextmanager
def evaluating(model: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout: a seed gives one value) for the duration, then the old mode."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@contextmanager
def decoder_input(
    decoder_modules: Sequence[nn.Module], replace: Callable[[torch.Tensor], torch.Tensor]
) -> Iterator[None]:
    """Feed `replace(x)` to the first decoder module instead of its input x.

    The first decoder module's input is the embedding output (plus positions for GPT-2):
    the decoder's input whatever the kind, found without knowing the model's attributes.
    """
    if not decoder_modules:
        raise ValueError("decoder_modules is empty: there is no decoder input to reach")

    def hook(_module: nn.Module, args: tuple) -> tuple:
        return (replace(args[0]), *args[1:])

    handle = decoder_modules[0].register_forward_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def module_outputs(
    decoder_modules: Sequence[nn.Module], kinds: tuple[type[nn.Module], ...]
) -> Iterator[list[torch.Tensor]]:
    """Collect, in call order, the outputs of the decoder's submodules of the given types."""
    outputs: list[torch.Tensor] = []

    def hook(_module: nn.Module, _args: tuple, output: torch.Tensor) -> None:
        outputs.append(output)

    handles = [
        sub.register_forward_hook(hook)
        for module in decoder_modules
        for sub in module.modules()
        if isinstance(sub, kinds)
    ]
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()
