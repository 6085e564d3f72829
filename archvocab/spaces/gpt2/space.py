"""The GPT-2 heterogeneous search space of LTS, with sampling, mutation and crossover.

Every operator returns a member of the space: per-layer genes are repaired against the
d_model they end up with (d_inner >= factor x d_model, heads dividing d_model).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from archvocab.errors import InvalidSpec
from archvocab.grid import IntRange, positive_int
from archvocab.identity import Membership
from archvocab.spaces.gpt2.spec import (
    DEFAULT_CUTOFFS,
    DEFAULT_N_POSITIONS,
    DEFAULT_VOCAB_SIZE,
    GPT2Spec,
)

# Sanity ceilings for a search space: far beyond small language models, but they keep a
# request from asking for million-layer models or a list of a billion d_inner values.
LIMITS = {
    "n_layer": 256,
    "d_model": 16384,
    "d_inner": 65536,
    "n_head": 1024,
    "d_embed": 16384,
    "div_val": 64,
    "vocab_size": 10_000_000,
    "n_positions": 1_048_576,
}


@dataclass(frozen=True)
class GPT2Space(Membership):
    """LTS's GPT-2 space; defaults are the paper's ranges. Every range can be overridden."""

    kind: ClassVar[str] = "gpt2"
    n_layer: IntRange = IntRange(2, 16, 1)
    d_model: IntRange = IntRange(128, 1024, 64)
    d_inner: IntRange = IntRange(256, 4096, 64)
    d_inner_min_factor: float = 2.0  # the paper says 2x d_model; LTS's released code used 1.7x
    n_head: tuple[int, ...] = (2, 4, 8)
    d_embed: tuple[int, ...] = (128, 256, 512)
    div_val: tuple[int, ...] = (1, 2, 4)
    cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS
    vocab_size: int = DEFAULT_VOCAB_SIZE
    n_positions: int = DEFAULT_N_POSITIONS
    # LTS's layer-scaled baseline: GPT-2 small's homogeneous layers (768 wide, 3072 feed-forward,
    # 12 heads, embedding as wide as the model), stacked 1..16 deep.
    baseline_d_model: int = 768
    baseline_d_inner: int = 3072
    baseline_n_head: int = 12
    _d_models: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("n_layer", "d_model", "d_inner"):
            getattr(self, name).check(name)
        for name in ("n_head", "d_embed", "div_val", "cutoffs"):
            values = getattr(self, name)
            if (
                not isinstance(values, tuple)
                or (not values and name != "cutoffs")
                or not all(positive_int(v) for v in values)
            ):
                raise InvalidSpec(
                    name, f"must be a non-empty list of positive integers, got {values!r}"
                )
        for name in (
            "vocab_size",
            "n_positions",
            "baseline_d_model",
            "baseline_d_inner",
            "baseline_n_head",
        ):
            if not positive_int(getattr(self, name)):
                raise InvalidSpec(name, f"must be a positive integer, got {getattr(self, name)!r}")
        for name, limit in LIMITS.items():
            value = getattr(self, name)
            largest = value.max if isinstance(value, IntRange) else value
            largest = max(largest) if isinstance(largest, tuple) else largest
            if largest > limit:
                where = f"{name}.max" if isinstance(value, IntRange) else name
                raise InvalidSpec(where, f"must be <= {limit}, got {largest}")
        for name, limit_of in (
            ("baseline_d_model", "d_model"),
            ("baseline_d_inner", "d_inner"),
            ("baseline_n_head", "n_head"),
        ):
            if getattr(self, name) > LIMITS[limit_of]:
                raise InvalidSpec(name, f"must be <= {LIMITS[limit_of]}, got {getattr(self, name)}")
        if self.baseline_d_model % self.baseline_n_head:
            raise InvalidSpec(
                "baseline_n_head",
                f"{self.baseline_n_head} must divide baseline_d_model={self.baseline_d_model}",
            )
        factor = self.d_inner_min_factor
        if (
            isinstance(factor, bool)
            or not isinstance(factor, (int, float))
            or not (0 < factor <= 64)
        ):
            raise InvalidSpec("d_inner_min_factor", f"must be a number in (0, 64], got {factor!r}")
        cut = self.cutoffs
        if any(b <= a for a, b in zip(cut, cut[1:])) or (
            cut and (cut[0] < 1 or cut[-1] >= self.vocab_size)
        ):
            raise InvalidSpec(
                "cutoffs", f"must be ascending and inside (0, vocab_size={self.vocab_size})"
            )
        if min(self.d_embed) // max(self.div_val) ** len(cut) < 1:
            raise InvalidSpec("div_val", "the smallest d_embed leaves a cluster with no width")
        # `reaches`, not `_inners_for`: listing d_inner for every d_model took 14 s for
        # d_model 1..16384 and d_inner 1..65536 in steps of 1 (a 150-byte request).
        usable = tuple(
            d
            for d in self.d_model.values()
            if self._heads_for(d) and self.d_inner.reaches(math.ceil(self.d_inner_min_factor * d))
        )
        if not usable:
            raise InvalidSpec(
                "d_model",
                "no d_model in range has both a head count dividing it and a d_inner >= "
                f"{self.d_inner_min_factor} x d_model within d_inner.max={self.d_inner.max}",
            )
        object.__setattr__(self, "_d_models", usable)

    # -- choices --------------------------------------------------------------------------
    def _heads_for(self, d_model: int) -> list[int]:
        return [h for h in self.n_head if d_model % h == 0]

    def _inners_for(self, d_model: int) -> list[int]:
        return self.d_inner.values(lower=math.ceil(self.d_inner_min_factor * d_model))

    # -- operators ------------------------------------------------------------------------
    def sample(self, rng: random.Random) -> GPT2Spec:
        """A uniformly sampled member (each gene uniform over its choices)."""
        n_layer = rng.choice(self.n_layer.values())
        d_model = rng.choice(self._d_models)
        inners, heads = self._inners_for(d_model), self._heads_for(d_model)
        return self._make(
            n_layer=n_layer,
            d_model=d_model,
            d_inner=[rng.choice(inners) for _ in range(n_layer)],
            n_head=[rng.choice(heads) for _ in range(n_layer)],
            d_embed=rng.choice(self.d_embed),
            div_val=rng.choice(self.div_val),
        )

    def mutate(self, spec: GPT2Spec, rng: random.Random, p: float = 0.3) -> GPT2Spec:
        """Resample each gene with probability p (LTS: p = 0.3), then repair."""
        width = max(self.n_layer.max, spec.n_layer)
        genes = self._genes(spec, length=width, rng=rng)
        fresh = self._genes(self.sample(rng), length=width, rng=rng)
        for name in ("n_layer", "d_model", "d_embed", "div_val"):
            if rng.random() < p:
                genes[name] = fresh[name]
        for name in ("d_inner", "n_head"):
            genes[name] = [
                fresh[name][i] if rng.random() < p else value for i, value in enumerate(genes[name])
            ]
        return self._repair(genes, rng)

    def crossover(self, a: GPT2Spec, b: GPT2Spec, rng: random.Random, p: float = 0.5) -> GPT2Spec:
        """Uniform crossover: each gene from b with probability p, else from a; then repair."""
        width = max(self.n_layer.max, a.n_layer, b.n_layer)
        ga, gb = self._genes(a, length=width, rng=rng), self._genes(b, length=width, rng=rng)
        child: dict[str, Any] = {}
        for name in ("n_layer", "d_model", "d_embed", "div_val"):
            child[name] = gb[name] if rng.random() < p else ga[name]
        for name in ("d_inner", "n_head"):
            child[name] = [y if rng.random() < p else x for x, y in zip(ga[name], gb[name])]
        return self._repair(child, rng)

    def check_member(self, spec: GPT2Spec) -> None:
        """Raise InvalidSpec naming the first gene of `spec` outside this space."""
        if spec.n_layer not in self.n_layer.values():
            raise InvalidSpec("n_layer", f"{spec.n_layer} not in {self.n_layer}")
        if spec.d_model not in self._d_models:
            raise InvalidSpec("d_model", f"{spec.d_model} not in {list(self._d_models)}")
        inners, heads = set(self._inners_for(spec.d_model)), set(self._heads_for(spec.d_model))
        for i, (d_inner, n_head) in enumerate(zip(spec.d_inner, spec.n_head)):
            if d_inner not in inners:
                raise InvalidSpec(
                    "d_inner", f"layer {i}: {d_inner} outside the grid for d_model={spec.d_model}"
                )
            if n_head not in heads:
                raise InvalidSpec("n_head", f"layer {i}: {n_head} not in {sorted(heads)}")
        for name in ("d_embed", "div_val", "cutoffs", "vocab_size", "n_positions"):
            value, allowed = getattr(spec, name), getattr(self, name)
            ok = (
                value == allowed
                if name in ("cutoffs", "vocab_size", "n_positions")
                else value in allowed
            )
            if not ok:
                raise InvalidSpec(name, f"{value!r} not allowed here: {allowed!r}")

    @property
    def max_seq_len(self) -> int:
        return self.n_positions

    def baseline(self, n_layer: int) -> GPT2Spec:
        """LTS's layer-scaled baseline at depth `n_layer`: homogeneous baseline_* layers, the
        embedding as wide as the model, this space's adaptive factor when it fixes one (LTS
        searches with k = 4) and its vocabulary. Not necessarily a member of the space."""
        d_model = self.baseline_d_model
        return GPT2Spec(
            n_layer=n_layer,
            d_model=d_model,
            d_inner=(self.baseline_d_inner,) * n_layer,
            n_head=(self.baseline_n_head,) * n_layer,
            d_embed=d_model,
            div_val=self.div_val[0] if len(self.div_val) == 1 else 1,
            cutoffs=self.cutoffs,
            vocab_size=self.vocab_size,
            n_positions=self.n_positions,
        )

    # -- plain data -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("_d_models")
        return {
            "kind": self.kind,
            **{k: list(v) if isinstance(v, tuple) else v for k, v in data.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GPT2Space:
        """Build from plain data; ranges as {min, max, step}, choices as lists."""
        allowed = ["kind", *(f.name for f in fields(cls) if not f.name.startswith("_"))]
        kwargs: dict[str, Any] = {}
        for name, value in data.items():
            if name == "kind":
                if value != cls.kind:
                    raise InvalidSpec("kind", f"{value!r} is not this space's kind {cls.kind!r}")
                continue
            if name not in allowed:
                raise InvalidSpec(name, f"unknown setting; allowed: {', '.join(allowed)}")
            if name in ("n_layer", "d_model", "d_inner"):
                if not isinstance(value, Mapping) or set(value) - {"min", "max", "step"}:
                    raise InvalidSpec(name, "must be an object with min, max, step")
                kwargs[name] = IntRange(**{**asdict(getattr(cls, name)), **dict(value)})
            elif name in ("n_head", "d_embed", "div_val", "cutoffs"):
                if not isinstance(value, (list, tuple)):
                    raise InvalidSpec(name, f"must be a list of positive integers, got {value!r}")
                kwargs[name] = tuple(value)
            else:
                kwargs[name] = value
        return cls(**kwargs)

    # -- helpers --------------------------------------------------------------------------
    def _genes(
        self, spec: GPT2Spec, length: int | None = None, rng: random.Random | None = None
    ) -> dict[str, Any]:
        """Spec as a gene dict; per-layer genes padded to `length` (random or repeated)."""
        genes: dict[str, Any] = {
            "n_layer": spec.n_layer,
            "d_model": spec.d_model,
            "d_embed": spec.d_embed,
            "div_val": spec.div_val,
            "d_inner": list(spec.d_inner),
            "n_head": list(spec.n_head),
        }
        length = length or spec.n_layer
        for name, choices in (("d_inner", self.d_inner.values()), ("n_head", list(self.n_head))):
            while len(genes[name]) < length:
                genes[name].append(rng.choice(choices) if rng else genes[name][-1])
        return genes

    def _repair(self, genes: dict[str, Any], rng: random.Random) -> GPT2Spec:
        n_layer, d_model = genes["n_layer"], genes["d_model"]
        inners, heads = self._inners_for(d_model), self._heads_for(d_model)
        pad_inner, pad_heads = list(genes["d_inner"]), list(genes["n_head"])
        while len(pad_inner) < n_layer:
            pad_inner.append(rng.choice(inners))
            pad_heads.append(rng.choice(heads))
        # A gene that the new d_model invalidates is resampled, as LTS does after d_model changes.
        d_inner = [v if v in inners else rng.choice(inners) for v in pad_inner[:n_layer]]
        n_head = [v if v in heads else rng.choice(heads) for v in pad_heads[:n_layer]]
        return self._make(n_layer, d_model, d_inner, n_head, genes["d_embed"], genes["div_val"])

    def _make(
        self,
        n_layer: int,
        d_model: int,
        d_inner: list[int],
        n_head: list[int],
        d_embed: int,
        div_val: int,
    ) -> GPT2Spec:
        return GPT2Spec(
            n_layer=n_layer,
            d_model=d_model,
            d_inner=tuple(d_inner),
            n_head=tuple(n_head),
            d_embed=d_embed,
            div_val=div_val,
            cutoffs=self.cutoffs,
            vocab_size=self.vocab_size,
            n_positions=self.n_positions,
        )
