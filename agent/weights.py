"""Build a model with cheap but realistic weights: the random-number cost of init, skipped.

Building a full-size GPT-2 (16 x 1024, 50257 tokens: 254M parameters) spends about 2.5 of its 3
seconds drawing random numbers in `reset_parameters`. Timing does not depend on the weights'
values as long as they are finite and not denormal (dense kernels do the same work for any
numbers), so `build_fast` lets each module ask for its init, records the distribution asked
for (uniform(a, b) or normal(mean, std)) instead of drawing it, then fills every such tensor
from one short seeded block of draws of that distribution, tiled. Copying is memory-bound,
about 10x faster than drawing, and the values keep the scale the init would have given them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from archvocab.registry import ArchSpec, kind_of_spec

WEIGHT_SEED = 0
PATTERN_LEN = 16381  # prime, so rows of any width do not repeat the same slice of the block
_TINY = 1e-30  # values closer to zero than this become 0: never a denormal
_METHODS = ("uniform_", "normal_")


@dataclass(frozen=True)
class Deferred:
    """An init a module asked for and did not get yet."""

    tensor: torch.Tensor
    kind: str  # "uniform_" (a, b) or "normal_" (mean, std)
    a: float
    b: float


@contextmanager
def deferred_init() -> Iterator[list[Deferred]]:
    """While active, `Tensor.uniform_` and `Tensor.normal_` record their request and return.

    The tensors keep whatever `torch.empty` gave them until `fill` runs: call it before use.
    Patches torch.Tensor for the duration; meant for the single-purpose measuring process.
    """
    records: list[Deferred] = []
    saved = {name: torch.Tensor.__dict__.get(name) for name in _METHODS}

    def recorder(kind: str, default_a: float, default_b: float) -> Callable[..., torch.Tensor]:
        def record(
            self: torch.Tensor, a: float = default_a, b: float = default_b, **_: Any
        ) -> torch.Tensor:
            records.append(Deferred(self, kind, float(a), float(b)))
            return self

        return record

    torch.Tensor.uniform_ = recorder("uniform_", 0.0, 1.0)  # type: ignore[method-assign]
    torch.Tensor.normal_ = recorder("normal_", 0.0, 1.0)  # type: ignore[method-assign]
    try:
        yield records
    finally:
        for name, original in saved.items():
            if original is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, original)


def _standard_blocks(like: torch.Tensor, seed: int) -> dict[str, torch.Tensor]:
    """One seeded block of U(0, 1) and one of N(0, 1) draws, in `like`'s dtype and device."""
    generator = torch.Generator().manual_seed(seed)
    blocks = {
        "uniform_": torch.rand(PATTERN_LEN, generator=generator),
        "normal_": torch.randn(PATTERN_LEN, generator=generator),
    }
    return {kind: block.to(dtype=like.dtype, device=like.device) for kind, block in blocks.items()}


def fill(records: list[Deferred], seed: int = WEIGHT_SEED) -> None:
    """Give every deferred tensor its distribution's values, tiled from a seeded block.

    Temporaries stay at a few blocks (PATTERN_LEN values each): they would show in the peak.
    """
    blocks: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for record in records:
            flat = record.tensor.detach().view(-1)
            if not blocks:
                blocks = _standard_blocks(flat, seed)
            standard = blocks[record.kind]
            if record.kind == "uniform_":
                block = standard * (record.b - record.a) + record.a
            else:
                block = standard * record.b + record.a
            block.masked_fill_(block.abs() < _TINY, 0.0)  # zero, never a denormal
            whole = flat.numel() // PATTERN_LEN
            if whole:
                flat[: whole * PATTERN_LEN].view(whole, PATTERN_LEN).copy_(
                    block.expand(whole, PATTERN_LEN)
                )
            rest = flat.numel() - whole * PATTERN_LEN
            flat[whole * PATTERN_LEN :].copy_(block[:rest])


def build_fast(spec: ArchSpec, device: torch.device) -> torch.nn.Module:
    """The registered builder's model of `spec` on `device`, in eval mode, with tiled instead
    of drawn init values."""
    builder = kind_of_spec(spec).load_builder()
    torch.manual_seed(WEIGHT_SEED)  # the few tensors the builder draws itself
    with device, deferred_init() as records:  # allocate on the device, no CPU copy first
        model = builder.build_model(spec)
    fill(records)
    return model.eval()
