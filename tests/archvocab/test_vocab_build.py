"""build_model: a causal GPT-2 returning normalised log-probabilities over the vocabulary."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="gpt2's builder needs torch (the agent extra)")

from archvocab.spaces.gpt2.build import build_model  # noqa: E402
from archvocab.spaces.gpt2.spec import GPT2Spec  # noqa: E402

VOCAB = 1000
# Token ids in every adaptive cluster: head [0, 200), tails [200, 500) and [500, 1000).
TOKENS = torch.tensor([[0, 199, 200, 499, 500, 999, 7, 321], [998, 1, 250, 640, 3, 3, 501, 0]])


def make_spec(div_val: int, d_embed: int, cutoffs: tuple[int, ...] = (200, 500)) -> GPT2Spec:
    return GPT2Spec(
        n_layer=2,
        d_model=64,
        d_inner=(128, 96),
        n_head=(2, 4),
        d_embed=d_embed,
        div_val=div_val,
        cutoffs=cutoffs,
        vocab_size=VOCAB,
        n_positions=16,
    )


CASES = {
    f"k{div_val}-{'same' if d_embed == 64 else 'wide' if d_embed > 64 else 'narrow'}": make_spec(
        div_val, d_embed
    )
    for div_val in (1, 2, 4)
    for d_embed in (64, 128, 32)
}
CASES["k1-no-cutoffs"] = make_spec(1, 64, cutoffs=())
CASES["k2-no-cutoffs"] = make_spec(2, 64, cutoffs=())  # LTS lm1b's shape: one cluster, projected
CASES["k4-one-cutoff-wide"] = make_spec(4, 128, cutoffs=(10,))


@pytest.mark.parametrize("name", list(CASES))
def test_forward_returns_normalised_log_probs(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(CASES[name]).eval()
    with torch.no_grad():
        out = model(TOKENS)
    assert out.shape == (2, 8, VOCAB)
    assert out.dtype == torch.float32
    assert torch.isfinite(out).all()
    assert (out <= 1e-6).all()
    total = out.exp().sum(dim=-1)
    torch.testing.assert_close(total, torch.ones_like(total), atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", ["k1-same", "k2-wide", "k4-narrow"])
def test_forward_is_causal(name: str) -> None:
    torch.manual_seed(1)
    model = build_model(CASES[name]).eval()
    changed = TOKENS.clone()
    changed[:, 5] = torch.tensor([42, 777])
    with torch.no_grad():
        before, after = model(TOKENS), model(changed)
    torch.testing.assert_close(before[:, :5], after[:, :5])
    assert not torch.allclose(before[:, 5:], after[:, 5:])


def test_output_depends_on_the_input() -> None:
    torch.manual_seed(2)
    model = build_model(CASES["k2-same"]).eval()
    with torch.no_grad():
        a, b = model(TOKENS[:1]), model(TOKENS[1:])
    assert not torch.allclose(a, b)


def test_sequence_longer_than_positions_is_refused() -> None:
    model = build_model(CASES["k1-same"])
    with pytest.raises(ValueError, match="sequence length 17 exceeds n_positions=16"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_backward_reaches_every_parameter() -> None:
    torch.manual_seed(3)
    model = build_model(CASES["k4-wide"])
    out = model(TOKENS)
    # Next-token loss over ids from every cluster.
    loss = -out[:, :-1].gather(-1, TOKENS[:, 1:, None]).mean()
    loss.backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None]
    assert missing == []
