"""A minimal training loop over a text file, for the self-contained PyTorch export.

`archvocab.standalone` copies what a kind needs of this module into the exported file, next
to that kind's builder code, so it imports only torch and the standard library. Tokens are the
file's bytes (ids 0-255; a vocabulary under 256 folds them modulo its size): enough to see a
model learn, not a tokenizer. Each objective wraps a model and turns a batch of token windows
(batch, seq_len + 1) into a scalar loss, so one loop trains every kind.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

ExampleInputs = Callable[[int, int], tuple[torch.Tensor, ...]]


class NextTokenLoss(nn.Module):
    """Decoders whose forward returns log-probabilities (batch, seq, vocab): cross-entropy of
    each position's prediction against the next token."""

    def __init__(self, model: nn.Module, example_inputs: ExampleInputs) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        log_probs = self.model(tokens[:, :-1])
        return F.nll_loss(log_probs.flatten(0, 1), tokens[:, 1:].flatten())


class RecurrentNextTokenLoss(nn.Module):
    """Recurrent models, forward(tokens, states) -> (log-probabilities, next states): next-token
    cross-entropy, every window starting from the zero states."""

    def __init__(self, model: nn.Module, example_inputs: ExampleInputs) -> None:
        super().__init__()
        self.model = model
        self.example_inputs = example_inputs  # (tokens, zero states) for a batch size

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        states = self.example_inputs(tokens.shape[0], 1)[1].to(tokens.device)
        log_probs, _ = self.model(tokens[:, :-1], states)
        return F.nll_loss(log_probs.flatten(0, 1), tokens[:, 1:].flatten())


class MaskedTokenLoss(nn.Module):
    """Encoders whose forward returns hidden states (batch, seq, hidden): masked-token
    prediction through a linear head that is trained along but is not part of the model.
    15% of the positions (at least one) are replaced by the last vocabulary id."""

    def __init__(self, model: nn.Module, example_inputs: ExampleInputs, rate: float = 0.15):
        super().__init__()
        self.model, self.rate = model, rate
        self.vocab_size = model.spec.vocab_size
        self.head = nn.Linear(model.spec.hidden_size, self.vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = tokens[:, :-1]
        masked = torch.rand(tokens.shape, device=tokens.device) < self.rate
        masked[:, 0] |= ~masked.any(dim=1)  # every window predicts something
        inputs = tokens.masked_fill(masked, self.vocab_size - 1)
        logits = self.head(self.model(inputs))
        return F.cross_entropy(logits[masked], tokens[masked])


def init_for_training(model: nn.Module, std: float = 0.02) -> None:
    """Re-draw every embedding table from N(0, std), GPT-2's init, in place.

    The builders leave torch's N(0, 1) (hwnas only times their models): with an output layer
    tied to the embedding, training would start from a loss of hundreds.
    """
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Embedding):
                module.weight.normal_(0.0, std)


def byte_tokens(path: Path, vocab_size: int) -> torch.Tensor:
    """The file's bytes as token ids, a 1-D LongTensor."""
    data = torch.tensor(list(path.read_bytes()), dtype=torch.long)
    return data % vocab_size if vocab_size < 256 else data


def random_windows(
    tokens: torch.Tensor, batch_size: int, length: int, generator: torch.Generator
) -> torch.Tensor:
    """`batch_size` windows of `length` consecutive tokens at random offsets."""
    starts = torch.randint(0, len(tokens) - length + 1, (batch_size,), generator=generator)
    return torch.stack([tokens[s : s + length] for s in starts.tolist()])


def train(
    objective: nn.Module,
    tokens: torch.Tensor,
    *,
    steps: int,
    batch_size: int,
    seq_len: int,
    lr: float = 3e-4,
    seed: int = 0,
    log_every: int = 10,
    device: str = "cpu",
) -> list[float]:
    """AdamW on random windows of `tokens`, gradients clipped at norm 1; each step's loss."""
    generator = torch.Generator().manual_seed(seed)
    objective.to(device).train()
    optimizer = torch.optim.AdamW(objective.parameters(), lr=lr)
    losses: list[float] = []
    started = time.perf_counter()
    for step in range(1, steps + 1):
        batch = random_windows(tokens, batch_size, seq_len + 1, generator).to(device)
        loss = objective(batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(objective.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if step % log_every == 0 or step in (1, steps):
            elapsed = time.perf_counter() - started
            print(f"step {step}/{steps}  loss {losses[-1]:.4f}  ({elapsed:.1f} s)", flush=True)
    return losses


def parser(facts: dict[str, Any]) -> argparse.ArgumentParser:
    """The exported file's command line: no command shows the model, `train` trains it."""
    longest = facts["max_seq_len"]
    cli = argparse.ArgumentParser(
        description=f"hwnas architecture {facts['arch_id']} ({facts['kind']}): builds the "
        "untrained model and prints its parameter count; `train` trains it on a text file.",
    )
    commands = cli.add_subparsers(dest="command", metavar="{train}")
    fit = commands.add_parser(
        "train",
        help="train on a text file (its bytes are the tokens)",
        description="Trains the model from random weights on random windows of a text file, "
        "each byte one token, and prints the loss as it goes.",
    )
    fit.add_argument("corpus", type=Path, help="a text file; each byte is one token")
    fit.add_argument("--steps", type=int, default=100, help="optimizer steps (default 100)")
    fit.add_argument("--batch-size", type=int, default=8, help="windows per step (default 8)")
    default_len = min(128, longest) if longest else 128
    fit.add_argument(
        "--seq-len",
        type=int,
        default=default_len,
        help=f"tokens per window (default {default_len}; at most {longest or 'any'})",
    )
    fit.add_argument("--lr", type=float, default=3e-4, help="AdamW learning rate (3e-4)")
    fit.add_argument("--seed", type=int, default=0, help="weights and batches (default 0)")
    fit.add_argument("--log-every", type=int, default=10, help="print the loss every N steps")
    fit.add_argument("--device", default="cpu", help="torch device, e.g. cuda (default cpu)")
    fit.add_argument("--save", type=Path, help="write the trained model's state_dict here")
    fit.add_argument(
        "--builder-init",
        action="store_true",
        help="keep the builder's N(0, 1) embeddings (default: re-drawn from N(0, 0.02))",
    )
    return cli


def main(
    argv: Sequence[str] | None,
    *,
    build_model: Callable[..., nn.Module],
    example_inputs: ExampleInputs,
    objective: Callable[[nn.Module, ExampleInputs], nn.Module],
    facts: dict[str, Any],
) -> int:
    """Print the parameter count (and check it against hwnas's), then train if asked."""
    cli = parser(facts)
    args = cli.parse_args(argv)
    model = build_model(seed=getattr(args, "seed", 0))
    count = sum(p.numel() for p in model.parameters())
    print(
        f"hwnas architecture {facts['arch_id']} ({facts['kind']}): {count} parameters "
        f"(hwnas counts {facts['total_params']}, {facts['decoder_params']} of them decoder)"
    )
    if count != facts["total_params"]:
        print("error: the parameter count differs from hwnas's", flush=True)
        return 1
    longest = facts["max_seq_len"]
    if args.command != "train":
        return _smoke_test(model, example_inputs, min(16, longest or 16))
    if args.seq_len < 1 or (longest and args.seq_len > longest):
        cli.error(f"--seq-len must be between 1 and {longest or 'any length'}")
    tokens = byte_tokens(args.corpus, facts["vocab_size"])
    if len(tokens) < args.seq_len + 1:
        cli.error(f"{args.corpus} has {len(tokens)} bytes; --seq-len {args.seq_len} needs more")
    print(f"{args.corpus}: {len(tokens)} tokens (bytes)")
    if not args.builder_init:
        init_for_training(model)
    losses = train(
        objective(model, example_inputs),
        tokens,
        steps=args.steps,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        lr=args.lr,
        seed=args.seed,
        log_every=args.log_every,
        device=args.device,
    )
    if args.save is not None:
        torch.save(model.state_dict(), args.save)
        print(f"saved the model's state_dict to {args.save}")
    return 0 if all(math.isfinite(loss) for loss in losses) else 1


def _smoke_test(model: nn.Module, example_inputs: ExampleInputs, seq_len: int) -> int:
    inputs = example_inputs(1, seq_len)
    with torch.no_grad():
        outputs = model.eval()(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    shapes = ", ".join(str(tuple(t.shape)) for t in outputs)
    print(f"forward pass: tokens {tuple(inputs[0].shape)} -> {shapes}")
    return 0
