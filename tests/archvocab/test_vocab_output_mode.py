"""Output modes: "last" runs the output layer on the last position only, "all" on every one.

Run over every registered kind through its primer (a tiny model taking the kind's code paths):
a kind whose output is a vocabulary distribution gives the last position of "all" in "last",
and allocates less; an encoder is left as it is.
"""

from __future__ import annotations

import random

import pytest

from archvocab.errors import InvalidSpec
from archvocab.registry import OUTPUT_MODES, get_kind, kind_names, set_output

torch = pytest.importorskip("torch")

SEQ = 12
VOCABULARY_KINDS = {"gpt2", "transxl", "nasbench_nlp"}


def _built(name: str, seed: int = 0):
    kind = get_kind(name)
    builder = kind.load_builder()
    spec = kind.parse_space({"kind": name}).sample(random.Random(seed))
    primer = builder.primer_spec(spec, SEQ)
    torch.manual_seed(0)
    model = builder.build_model(primer).eval()
    inputs = builder.example_inputs(primer, 2, SEQ, torch.Generator().manual_seed(0))
    return model, inputs


def _scores(model, inputs) -> torch.Tensor:
    with torch.inference_mode():
        out = model(*inputs)
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("name", kind_names())
def test_last_is_the_last_position_of_all(name: str) -> None:
    model, inputs = _built(name)
    assert set_output(model, "all") is (name in VOCABULARY_KINDS)
    every = _scores(model, inputs)
    applies = set_output(model, "last")
    last = _scores(model, inputs)
    if not applies:  # an encoder: every position's hidden state either way
        assert name == "flexibert" and torch.equal(last, every)
        return
    batch, vocab = inputs[0].shape[0], every.shape[-1]
    assert every.shape == (batch, SEQ, vocab) and last.shape == (batch, 1, vocab)
    assert torch.allclose(last, every[:, -1:], atol=1e-5, rtol=1e-5)
    assert last.numel() * SEQ == every.numel()  # the scores tensor is seq_len times smaller


def test_the_recurrent_state_does_not_depend_on_the_mode() -> None:
    model, inputs = _built("nasbench_nlp")
    with torch.inference_mode():
        _, state_all = model(*inputs)
        set_output(model, "last")
        _, state_last = model(*inputs)
    assert torch.equal(state_all, state_last)


@pytest.mark.parametrize("name", sorted(VOCABULARY_KINDS))
def test_models_are_built_with_every_position(name: str) -> None:
    model, _ = _built(name)
    assert model.output == "all" and OUTPUT_MODES == ("last", "all")


def test_an_unknown_mode_is_refused_by_name() -> None:
    model, _ = _built("gpt2")
    with pytest.raises(InvalidSpec) as info:
        set_output(model, "first")
    assert info.value.field == "output" and "allowed: last, all" in info.value.message
