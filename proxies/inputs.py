"""The minibatch data-dependent proxies read: random tokens, or real text from a file.

A `ProxyInputs` names the batch completely (source, shape, seed), so one (spec, proxy,
inputs) always gives one value. Text is split on whitespace, each line ending in "<eos>" as
in WikiText's language-modelling setup; words get ids by frequency in the file (the most
frequent word is id 0, ties broken alphabetically), and words beyond the model's vocabulary
share its last id. Rows start at seeded offsets into the token stream.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from archvocab.errors import InvalidSpec

if TYPE_CHECKING:  # torch is imported only when a batch is drawn
    import torch

RANDOM = "random"
EOS = "<eos>"


@dataclass(frozen=True)
class ProxyInputs:
    """`source` is "random" or a path to a text file (WikiText-2's valid.txt, say)."""

    source: str = RANDOM
    batch_size: int = 4
    seq_len: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise InvalidSpec("inputs.batch_size", f"must be >= 1, got {self.batch_size}")
        if self.seq_len < 2:
            raise InvalidSpec("inputs.seq_len", f"must be >= 2, got {self.seq_len}")
        if self.source != RANDOM and not Path(self.source).is_file():
            raise InvalidSpec(
                "inputs.source", f"must be {RANDOM!r} or a readable text file, got {self.source!r}"
            )

    @property
    def key(self) -> str:
        """A short stable text naming these inputs (stored beside a proxy value)."""
        source = self.source if self.source == RANDOM else Path(self.source).name
        return f"{source}:{self.batch_size}x{self.seq_len}:seed{self.seed}"


DEFAULT_INPUTS = ProxyInputs()


def token_batch(inputs: ProxyInputs, vocab_size: int, length: int | None = None) -> torch.Tensor:
    """(batch_size, length or seq_len) token ids below `vocab_size`, drawn from inputs.seed."""
    import torch

    length = inputs.seq_len if length is None else length
    generator = torch.Generator().manual_seed(inputs.seed)
    if inputs.source == RANDOM:
        return torch.randint(0, vocab_size, (inputs.batch_size, length), generator=generator)
    stream = _text_ids(inputs.source)
    if len(stream) < length + 1:
        raise InvalidSpec(
            "inputs.source", f"{inputs.source} has {len(stream)} tokens, fewer than {length + 1}"
        )
    ids = torch.tensor(stream, dtype=torch.long).clamp_(max=vocab_size - 1)
    starts = torch.randint(0, len(stream) - length, (inputs.batch_size,), generator=generator)
    return torch.stack([ids[s : s + length] for s in starts.tolist()])


@functools.lru_cache(maxsize=4)
def _text_ids(path: str) -> tuple[int, ...]:
    words: list[str] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            tokens = line.split()
            if tokens:
                words.extend(tokens)
                words.append(EOS)
    counts = Counter(words)
    order = sorted(counts, key=lambda w: (-counts[w], w))
    index = {word: i for i, word in enumerate(order)}
    return tuple(index[w] for w in words)
