"""RNNCellSpec -> torch.nn.Module: NAS-Bench-NLP's cell run over a sequence, three layers deep.

The layout is NAS-Bench-NLP's WikiText-2 model (AWD-LSTM with its CustomRNN cell), so the
parameter counts match its logs: an embedding, `n_layer` recurrent layers (a tied model's
last layer is embedding-wide), a decoder whose matrix is the embedding's when tied. A linear
node holds one weight per input and one bias, initialised U(-1/sqrt(hidden), 1/sqrt(hidden))
as the original cell is. Dropout and weight drop are training-only and left out: the service
times models in eval mode.

The model carries its recurrent state explicitly: `forward(tokens, hidden)` takes the states
of every layer packed in one tensor (n_states, batch, sum of layer widths) and returns the
log-probabilities and the next states in the same layout, so a measurement includes the
state the model reads and writes.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from archvocab.spaces.nasbench_nlp.graph import CellGraph, X, state_input, state_output
from archvocab.spaces.nasbench_nlp.spec import RNNCellSpec

_ACTIVATIONS = {
    "activation_tanh": torch.tanh,
    "activation_sigm": torch.sigmoid,
    "activation_leaky_relu": F.leaky_relu,  # slope 0.01, torch.nn.LeakyReLU's default
}


class MultiInputLinear(nn.Module):
    """sum_i W_i a_i + b: one weight per input, one bias (NAS-Bench-NLP's linear node)."""

    def __init__(self, in_widths: list[int], d_out: int) -> None:
        super().__init__()
        self.weights = nn.ParameterList(nn.Parameter(torch.empty(d_out, w)) for w in in_widths)
        self.bias = nn.Parameter(torch.empty(d_out))

    def forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        out = F.linear(inputs[0], self.weights[0], self.bias)
        for value, weight in zip(inputs[1:], self.weights[1:]):
            out = out + F.linear(value, weight)
        return out


class CellLayer(nn.Module):
    """One recurrent layer: the cell applied at every time step, its states carried along."""

    def __init__(self, cell: CellGraph, d_in: int, d_hidden: int) -> None:
        super().__init__()
        self.program = [(node.name, node.op, node.inputs) for node in cell.nodes]  # topological
        self.n_states = cell.n_states
        self.linears = nn.ModuleDict(
            {
                node.name: MultiInputLinear(
                    [d_in if name == X else d_hidden for name in node.inputs], d_hidden
                )
                for node in cell.nodes
                if node.op == "linear"
            }
        )
        bound = 1.0 / math.sqrt(d_hidden)
        for param in self.parameters():
            nn.init.uniform_(param, -bound, bound)

    def step(self, x: torch.Tensor, states: list[torch.Tensor]) -> list[torch.Tensor]:
        values = self.step_values(x, states)
        return [values[state_output(i)] for i in range(self.n_states)]

    def step_values(self, x: torch.Tensor, states: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Every node's value at one step (inputs included): what proxies that look inside
        the cell (activation patterns) read."""
        values = {X: x, **{state_input(i): s for i, s in enumerate(states)}}
        for name, op, inputs in self.program:
            args = [values[i] for i in inputs]
            if op == "linear":
                values[name] = self.linears[name](args)
            elif op == "elementwise_sum":
                values[name] = args[0] + args[1]
            elif op == "elementwise_prod":
                values[name] = args[0] * args[1]
            elif op == "blend":
                values[name] = args[0] * args[1] + (1 - args[0]) * args[2]
            else:
                values[name] = _ACTIVATIONS[op](args[0])
        return values

    def forward(self, x: torch.Tensor, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (batch, seq, d_in), states (n_states, batch, d_hidden) -> outputs (batch, seq,
        d_hidden) (h_new_0 at every step) and the last step's states."""
        current = list(states.unbind(0))
        outputs = []
        for x_t in x.unbind(1):
            current = self.step(x_t, current)
            outputs.append(current[0])
        return torch.stack(outputs, dim=1), torch.stack(current, dim=0)


class RNNCellLM(nn.Module):
    """Embedding, recurrent cell layers, decoder (tied to the embedding or not).

    `output` "last": the decoder and its softmax run on the last step only
    (`archvocab.registry.set_output`); the states are the same either way."""

    output = "all"

    def __init__(self, spec: RNNCellSpec) -> None:
        super().__init__()
        self.spec = spec
        self.embedding = nn.Embedding(spec.vocab_size, spec.d_embed)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        widths = spec.layer_widths()
        self.layers = nn.ModuleList(CellLayer(spec.cell, d_in, d_out) for d_in, d_out in widths)
        self.state_widths = [d_out for _, d_out in widths]
        self.decoder_bias = nn.Parameter(torch.zeros(spec.vocab_size))
        self.decoder_weight = (
            None if spec.tied else nn.Parameter(torch.empty(spec.vocab_size, widths[-1][1]))
        )
        if self.decoder_weight is not None:
            nn.init.uniform_(self.decoder_weight, -0.1, 0.1)

    def forward(
        self, tokens: torch.Tensor, hidden: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """tokens (batch, seq), hidden (n_states, batch, sum of layer widths) -> log-probs
        (batch, seq, vocab), or (batch, 1, vocab) with `output` "last", and the next hidden,
        packed the same way."""
        outputs, new_hidden = self.run_layers(self.embedding(tokens), hidden)
        weight = self.embedding.weight if self.decoder_weight is None else self.decoder_weight
        top = outputs[-1][:, -1:] if self.output == "last" else outputs[-1]
        logits = F.linear(top, weight, self.decoder_bias)
        return F.log_softmax(logits, dim=-1), new_hidden

    def run_layers(
        self, x: torch.Tensor, hidden: torch.Tensor
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Embedded input (batch, seq, d_embed) through the recurrent layers: every layer's
        output sequence (batch, seq, width), first layer first, and the next hidden, packed.

        Separate from `forward` so that proxies reading hidden states (hidden covariance)
        or differentiating by the embedded input skip the vocabulary-sized decoder."""
        outputs = []
        new_states = []
        for layer, states in zip(self.layers, hidden.split(self.state_widths, dim=-1)):
            x, states = layer(x, states)
            outputs.append(x)
            new_states.append(states)
        return outputs, torch.cat(new_states, dim=-1)

    def decoder_modules(self) -> list[nn.Module]:
        """The modules whose parameters are the spec's decoder_params (the cells)."""
        return list(self.layers)


def build_model(spec: RNNCellSpec) -> RNNCellLM:
    """The torch module for `spec`, random weights."""
    return RNNCellLM(spec)


def hidden_shape(spec: RNNCellSpec, batch_size: int) -> tuple[int, int, int]:
    """Every layer's states packed: (n_states, batch, sum of the layers' widths)."""
    return (spec.cell.n_states, batch_size, sum(d_out for _, d_out in spec.layer_widths()))


def example_inputs(
    spec: RNNCellSpec, batch_size: int, seq_len: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids (batch_size, seq_len) and the zero initial states."""
    tokens = torch.randint(0, spec.vocab_size, (batch_size, seq_len), generator=generator)
    return tokens, torch.zeros(hidden_shape(spec, batch_size))


def primer_spec(spec: RNNCellSpec, seq_len: int) -> RNNCellSpec:
    """The same cell (same ops, same states) in a tiny 2-layer, 256-token model; tied or
    not as `spec`, so the tied last layer's narrower width is exercised too."""
    del seq_len  # a recurrent model has no length-sized tables
    return RNNCellSpec(
        spec.cell, d_embed=16, d_hidden=32, n_layer=2, vocab_size=256, tied=spec.tied
    )
