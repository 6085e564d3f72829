"""What the RNN metrics of the training-free NAS paper read from a NAS-Bench-NLP model
(`archvocab.spaces.nasbench_nlp.build.RNNCellLM`): per-layer hidden states, input Jacobians,
saliencies and activation patterns of one minibatch, the recurrent states starting at zero.

None of it runs the decoder: like the authors' code, the "network output" is the last
recurrent layer's output sequence (their AWD-LSTM model returns it and leaves the
vocabulary projection to the loss), which also skips the costly 33k-word softmax.
Gradients come from `torch.autograd.grad`, so the model is left as it was found.
"""

from __future__ import annotations

import torch

from archvocab.spaces.nasbench_nlp.build import CellLayer, RNNCellLM, hidden_shape
from archvocab.spaces.nasbench_nlp.graph import state_output


def _zero_hidden(model: RNNCellLM, batch_size: int) -> torch.Tensor:
    return torch.zeros(hidden_shape(model.spec, batch_size))


def hidden_sequences(model: RNNCellLM, tokens: torch.Tensor) -> list[torch.Tensor]:
    """Each layer's hidden state (h_new_0) at every step, (batch, seq, width), first layer
    first: the H of the paper's hidden covariance (section 3.5).

    The authors' hook recorded the state entering each step (h_0 ... h_{T-1}, so one
    all-zero step per example); this takes the states each step produces (h_1 ... h_T),
    what the layer passes on. On the 271 models both sets share the ranks agree closely.
    """
    with torch.no_grad():
        outputs, _ = model.run_layers(model.embedding(tokens), _zero_hidden(model, len(tokens)))
    return outputs


def embedding_jacobian(model: RNNCellLM, tokens: torch.Tensor) -> torch.Tensor:
    """(batch, seq * d_embed): each example's gradient of the summed last-layer outputs with
    respect to its embedded input (Mellor et al.'s J; the authors' `get_batch_jacobian`)."""
    embedded = model.embedding(tokens).detach().requires_grad_(True)
    outputs, _ = model.run_layers(embedded, _zero_hidden(model, len(tokens)))
    (jacobian,) = torch.autograd.grad(outputs[-1].sum(), embedded)
    return jacobian.reshape(len(tokens), -1)


def synaptic_saliency(model: RNNCellLM, tokens: torch.Tensor) -> float:
    """sum |theta * dL/dtheta| over the cells' parameters (paper eq. 1 summed, Abdelfattah
    et al.), L = ||y||^2 / 2 of the last layer's outputs y, as the authors' `y.backward(y)`.

    Only the cells count: the embedding and the tied decoder are the same in every
    NAS-Bench-NLP model (LTS scores only the decoder for the same reason). The authors
    also skipped each linear node's first weight and its bias and added the embedding
    rows used; those quirks are not copied.
    """
    params = [p for layer in model.layers for p in layer.parameters()]
    outputs, _ = model.run_layers(model.embedding(tokens), _zero_hidden(model, len(tokens)))
    loss = outputs[-1].pow(2).sum() / 2
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return float(
        sum((p.detach() * g).abs().double().sum() for p, g in zip(params, grads) if g is not None)
    )


def activation_codes(model: RNNCellLM, tokens: torch.Tensor) -> list[torch.Tensor]:
    """Binary codes (batch, units) of every activation node of every layer, one tensor per
    (layer, step): 1 where the activation's input is positive (the authors' `calculate_
    activations` hook sees every tanh, sigmoid and leaky ReLU call of the cells).

    The authors coded the activation's output > 0, which is the input's sign for tanh and
    leaky ReLU but always 1 for a sigmoid; coding the input's sign keeps the sigmoid's
    on/off side (output > 1/2) instead of a constant.
    """
    codes: list[torch.Tensor] = []
    with torch.no_grad():
        x = model.embedding(tokens)
        hidden = _zero_hidden(model, len(tokens)).split(model.state_widths, dim=-1)
        for layer, states in zip(model.layers, hidden):
            x = _run_coding(layer, x, list(states.unbind(0)), codes)
    return codes


def _run_coding(
    layer: CellLayer, x: torch.Tensor, states: list[torch.Tensor], codes: list[torch.Tensor]
) -> torch.Tensor:
    """`layer.forward`'s loop, also appending each step's activation codes to `codes`."""
    gates = [inputs[0] for _, op, inputs in layer.program if op.startswith("activation_")]
    outputs = []
    for x_t in x.unbind(1):
        values = layer.step_values(x_t, states)
        states = [values[state_output(i)] for i in range(layer.n_states)]
        outputs.append(states[0])
        if gates:
            codes.append(torch.cat([values[g] > 0 for g in gates], dim=1))
    return torch.stack(outputs, dim=1)
