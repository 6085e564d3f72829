"""What the training-free Transformer proxies need from a built model, whatever its kind.

A `Probe` holds the model, its minibatch, the layers the scores sum over and the loss the
gradient scores differentiate. The loss, per kind:
- language models (gpt2, transxl): mean next-token negative log-likelihood of the batch;
- FlexiBERT: an encoder with no head, read out along a fixed random direction: the sum of
  the last hidden states times a standard normal tensor drawn from the inputs' seed. Not the
  authors' plain sum (their `output.backward(torch.ones_like(output))`): the last layer
  ends in a LayerNorm whose outputs sum to a constant, so the plain sum's gradient is zero
  and every gradient score would be float rounding noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec
from proxies.inputs import ProxyInputs, token_batch
from proxies.lowcost_common import LM_KINDS, lm_loss

ENCODER_KINDS = ("flexibert",)
KINDS = ("flexibert", *LM_KINDS)

# One weight matrix of a token-mixing sublayer: a parameter and the rows of it that are
# the matrix (fused query/key/value projections hold three).
Matrix = tuple[nn.Parameter, slice]


@dataclass(frozen=True)
class Probe:
    model: nn.Module
    inputs: tuple[torch.Tensor, ...]
    targets: torch.Tensor | None  # next-token ids; None for an encoder
    blocks: list[nn.Module]  # the encoder / decoder layers, in order
    seed: int  # draws an encoder's readout direction

    def loss(self, output: torch.Tensor) -> torch.Tensor:
        """The scalar the gradient scores differentiate; it sums over the examples, so
        example n's input gradient is that example's own."""
        if self.targets is not None:
            return lm_loss(output, self.targets)
        generator = torch.Generator().manual_seed(self.seed)
        readout = torch.randn(output.shape, generator=generator, dtype=output.dtype)
        return (output * readout).sum()

    def forward_loss(self) -> torch.Tensor:
        return self.loss(self.model(*self.inputs))


def make_probe(model: nn.Module, spec: ArchSpec, inputs: ProxyInputs) -> Probe:
    """The probe of `model` (built from `spec`) on the minibatch `inputs` names."""
    if spec.kind not in KINDS:
        raise InvalidSpec("kind", f"{spec.kind!r} has no Transformer layers; allowed: {KINDS}")
    limit = spec.max_seq_len
    encoder = spec.kind in ENCODER_KINDS
    length = inputs.seq_len if encoder else inputs.seq_len + 1
    if limit is not None and inputs.seq_len > limit:
        raise InvalidSpec("inputs.seq_len", f"{inputs.seq_len} exceeds the model's {limit}")
    tokens = token_batch(inputs, spec.vocab_size, length)  # type: ignore[attr-defined]
    blocks = list(model.blocks if hasattr(model, "blocks") else model.layers)  # type: ignore[arg-type]
    if encoder:
        return Probe(model, (tokens,), None, blocks, inputs.seed)
    return Probe(model, (tokens[:, :-1],), tokens[:, 1:], blocks, inputs.seed)


def mixing_matrices(probe: Probe) -> list[list[Matrix]]:
    """Per layer, the weight matrices of its token-mixing sublayer (attention, or FlexiBERT's
    linear transform / dynamic convolution) with its output projection; a fused
    query-key-value weight counts as its three matrices, as separate ones would."""
    per_layer = []
    for block in probe.blocks:
        if hasattr(block, "operation"):  # FlexiBERT
            mixing = [block.operation, block.operation_output]
        else:  # GPT-2's `attn`, Transformer-XL's `attn`
            mixing = [block.attn]
        matrices: list[Matrix] = []
        for part in mixing:
            for name, sub in part.named_modules():
                if isinstance(sub, nn.Linear):
                    fused = 3 if name.endswith("qkv") else 1
                    rows = sub.weight.shape[0] // fused
                    matrices += [
                        (sub.weight, slice(i * rows, (i + 1) * rows)) for i in range(fused)
                    ]
        per_layer.append(matrices)
    return per_layer
