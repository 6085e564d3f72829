"""LTS's Transformer-XL search space: sampling, mutation, crossover, membership, the
layer-scaled baseline. The spec and its counts: `archvocab.spaces.transxl.spec`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, cast

from archvocab.errors import InvalidSpec
from archvocab.grid import IntRange
from archvocab.identity import Membership
from archvocab.spaces.gpt2.space import LIMITS, GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec
from archvocab.spaces.transxl.spec import (
    SPEC_KIND,
    WT103_CUTOFFS,
    WT103_SEGMENT,
    WT103_VOCAB_SIZE,
    TransXLSpec,
)

_SPEC_GENES = ("n_layer", "d_model", "d_inner", "n_head", "d_embed")  # + div_val
_RANGES = ("n_layer", "d_model", "d_inner", "d_inner_min_factor", "n_head", "d_embed")
_FIXED = ("div_val", "cutoffs", "vocab_size")  # also grid settings, with WT103 defaults here
_BASELINE = ("baseline_d_model", "baseline_d_inner", "baseline_n_head")
_GRID_SETTINGS = (*_RANGES, *_FIXED, *_BASELINE)  # what GPT2Space checks, parses and operates on
_OWN_SETTINGS = ("tgt_len", "mem_len", "tie_projs", "pre_lnorm")


@dataclass(frozen=True)
class TransXLSpace(Membership):
    """LTS's Transformer-XL space: the GPT-2 space's ranges (the paper uses one table for both
    backbones) on LTS's WikiText-103 vocabulary and 192-token segments and memories.

    The genes and their operators are GPT2Space's (sampled, mutated, crossed and repaired the
    same way); the segment, memory, projection ties and norm placement are fixed settings.
    The baseline_* widths are Transformer-XL base's (see `baseline`).
    """

    kind: ClassVar[str] = SPEC_KIND
    n_layer: IntRange = IntRange(2, 16, 1)
    d_model: IntRange = IntRange(128, 1024, 64)
    d_inner: IntRange = IntRange(256, 4096, 64)
    d_inner_min_factor: float = 2.0
    n_head: tuple[int, ...] = (2, 4, 8)
    d_embed: tuple[int, ...] = (128, 256, 512)
    div_val: tuple[int, ...] = (1, 2, 4)
    cutoffs: tuple[int, ...] = WT103_CUTOFFS
    vocab_size: int = WT103_VOCAB_SIZE
    tgt_len: int = WT103_SEGMENT
    mem_len: int = WT103_SEGMENT
    tie_projs: tuple[bool, ...] = ()  # () = LTS's default for the cutoffs, as in a spec
    pre_lnorm: bool = False
    baseline_d_model: int = 512
    baseline_d_inner: int = 2048
    baseline_n_head: int = 8
    _grid: GPT2Space = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        grid = GPT2Space(**{n: getattr(self, n) for n in _GRID_SETTINGS})
        object.__setattr__(self, "_grid", grid)
        # The spec checks the fixed settings (naming them) and stores tie_projs canonically.
        probe = self._make(grid.sample(random.Random(0)))
        object.__setattr__(self, "tie_projs", probe.tie_projs)
        for name in ("tgt_len", "mem_len"):  # a space's sanity ceiling, as GPT2Space's LIMITS
            if getattr(self, name) > LIMITS["n_positions"]:
                raise InvalidSpec(name, f"must be <= {LIMITS['n_positions']}")

    def sample(self, rng: random.Random) -> TransXLSpec:
        """A uniformly sampled member (each gene uniform over its choices)."""
        return self._make(self._grid.sample(rng))

    def mutate(self, spec: TransXLSpec, rng: random.Random, p: float = 0.3) -> TransXLSpec:
        """Resample each gene with probability p (LTS: p = 0.3), then repair."""
        return self._make(self._grid.mutate(_genes(spec), rng, p))

    def crossover(
        self, a: TransXLSpec, b: TransXLSpec, rng: random.Random, p: float = 0.5
    ) -> TransXLSpec:
        """Uniform crossover: each gene from b with probability p, else from a; then repair."""
        return self._make(self._grid.crossover(_genes(a), _genes(b), rng, p))

    def check_member(self, spec: TransXLSpec) -> None:
        """Raise InvalidSpec naming the first field of `spec` outside this space."""
        if not isinstance(spec, TransXLSpec):
            raise InvalidSpec("kind", f"a {SPEC_KIND!r} spec is needed, got {spec!r}")
        for name in ("d_head", *_OWN_SETTINGS):
            allowed = () if name == "d_head" else getattr(self, name)
            if getattr(spec, name) != allowed:
                raise InvalidSpec(name, f"{getattr(spec, name)!r} not allowed here: {allowed!r}")
        self._grid.check_member(
            GPT2Spec(
                **{n: getattr(spec, n) for n in (*_SPEC_GENES, *_FIXED)},
                n_positions=self._grid.n_positions,
            )
        )

    @property
    def max_seq_len(self) -> int:
        return self.tgt_len

    def baseline(self, n_layer: int) -> TransXLSpec:
        """LTS's layer-scaled baseline at depth `n_layer`: homogeneous baseline_* layers, the
        embedding as wide as the model, this space's adaptive factor when it fixes one (LTS
        searches and profiles its baseline with k = 4), else 1; as GPT2Space.baseline.

        The default widths are Transformer-XL base as LTS trained it (NVIDIA's implementation,
        whose defaults archai's MemTransformerLM keeps: d_model 512, 8 heads of 64, d_inner
        2048). LTS scales it over 1..16 layers; the default space's n_layer starts at 2.
        """
        return self._make(self._grid.baseline(n_layer))

    def to_dict(self) -> dict[str, Any]:
        grid = {k: v for k, v in self._grid.to_dict().items() if k in _GRID_SETTINGS}
        own = {n: list(v) if isinstance(v := getattr(self, n), tuple) else v for n in _OWN_SETTINGS}
        return {"kind": self.kind, **grid, **own}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TransXLSpace:
        """Build from plain data; ranges as {min, max, step}, choices as lists."""
        if not isinstance(data, Mapping):
            raise InvalidSpec("space", f"must be a JSON object, got {type(data).__name__}")
        if data.get("kind", cls.kind) != cls.kind:
            raise InvalidSpec("kind", f"{data['kind']!r} is not this space's kind {cls.kind!r}")
        allowed = ["kind", *(f.name for f in fields(cls) if not f.name.startswith("_"))]
        for name in data:
            if name not in allowed:
                raise InvalidSpec(name, f"unknown setting; allowed: {', '.join(allowed)}")
        # GPT2Space parses the shared settings (its defaults for cutoffs and vocabulary are
        # GPT-2's, so this space's go in first); the rest are checked by the constructor.
        shared = _GRID_SETTINGS
        defaults = {n: v for n, v in cls().to_dict().items() if n in shared}
        grid = GPT2Space.from_dict({**defaults, **{n: data[n] for n in shared if n in data}})
        own = {
            n: tuple(v) if isinstance(v := data[n], list) else v for n in _OWN_SETTINGS if n in data
        }
        return cls(**{n: getattr(grid, n) for n in shared}, **own)

    def _make(self, genes: GPT2Spec) -> TransXLSpec:
        """The Transformer-XL spec with `genes` (GPT2Space's output) and this space's rest."""
        return TransXLSpec(
            **{n: getattr(genes, n) for n in (*_SPEC_GENES, "div_val")},
            cutoffs=self.cutoffs,
            vocab_size=self.vocab_size,
            **{n: getattr(self, n) for n in _OWN_SETTINGS},
        )


def _genes(spec: TransXLSpec) -> GPT2Spec:
    """GPT2Space's operators read only the genes both kinds share (n_layer, d_model, d_inner,
    n_head, d_embed, div_val), so a Transformer-XL spec is passed to them as it is."""
    return cast(GPT2Spec, spec)
