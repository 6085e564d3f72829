"""The architecture spec: a typed, validated, declarative description of one GPT-2 model.

A spec accepts any self-consistent shape (also shapes outside a search space's grid, such as
LTS's published random models); whether a spec belongs to a search space is the space's
business (`archvocab.spaces.gpt2.space`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from archvocab.errors import InvalidSpec
from archvocab.grid import shrinks_to_nothing
from archvocab.identity import SpecIdentity
from archvocab.spaces.gpt2 import counts as gpt2_counts

if TYPE_CHECKING:
    pass

SPEC_KIND = "gpt2"
DEFAULT_VOCAB_SIZE = 50257
DEFAULT_N_POSITIONS = 1024
# LTS's released GPT-2 configs use these adaptive cutoffs (its 199997 lies beyond the
# vocabulary and is dropped, which is what its model code does too).
DEFAULT_CUTOFFS = (19997, 39997)

_FIELDS = (
    "n_layer",
    "d_model",
    "d_inner",
    "n_head",
    "d_embed",
    "div_val",
    "cutoffs",
    "vocab_size",
    "n_positions",
)


@dataclass(frozen=True)
class GPT2Spec(SpecIdentity):
    """A decoder-only GPT-2 with per-layer heads and feed-forward width, adaptive input.

    ``d_inner`` and ``n_head`` hold one value per layer. ``cutoffs`` are the adaptive
    embedding's cluster boundaries (ascending, inside the vocabulary); ``div_val`` is the
    factor k by which each following cluster's embedding width shrinks.
    """

    n_layer: int
    d_model: int
    d_inner: tuple[int, ...]
    n_head: tuple[int, ...]
    d_embed: int
    div_val: int = 1
    cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS
    vocab_size: int = DEFAULT_VOCAB_SIZE
    n_positions: int = DEFAULT_N_POSITIONS
    kind: str = field(default=SPEC_KIND, init=False)

    def __post_init__(self) -> None:
        _validate(self)

    # -- identity -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The canonical plain-data form (lists, ints, fixed key set)."""
        return self._plain_fields(_FIELDS)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GPT2Spec:
        """Parse the canonical form; unknown or missing fields raise InvalidSpec."""
        if not isinstance(data, Mapping):
            raise InvalidSpec("spec", f"must be a JSON object, got {type(data).__name__}")
        kind = data.get("kind", SPEC_KIND)
        if kind != SPEC_KIND:
            raise InvalidSpec("kind", f"unknown spec kind {kind!r}; allowed: {SPEC_KIND!r}")
        unknown = sorted(set(data) - set(_FIELDS) - {"kind"})
        if unknown:
            raise InvalidSpec(unknown[0], f"unknown field; allowed fields: {', '.join(_FIELDS)}")
        required = ("n_layer", "d_model", "d_inner", "n_head", "d_embed")
        missing = [name for name in required if name not in data]
        if missing:
            raise InvalidSpec(missing[0], "is required")
        kwargs: dict[str, Any] = {}
        for name in _FIELDS:
            if name not in data:
                continue
            value = data[name]
            if name in ("d_inner", "n_head", "cutoffs"):
                kwargs[name] = _int_tuple(name, value)
            else:
                kwargs[name] = _int(name, value)
        return cls(**kwargs)

    @classmethod
    def from_lts_config(cls, config: Mapping[str, Any]) -> GPT2Spec:
        """Load a `model_config` of LTS's released logs (../shared/data/lts)."""
        n_token = int(config["n_token"])
        d_model = int(config["d_model"])
        d_embed = int(config.get("d_embed", -1))
        cutoffs = tuple(int(c) for c in config.get("cutoffs", ()) if 0 < int(c) < n_token)
        n_layer = int(config["n_layer"])
        return cls(
            n_layer=n_layer,
            d_model=d_model,
            d_inner=_per_layer(config["d_inner"], n_layer),
            n_head=_per_layer(config["n_head"], n_layer),
            d_embed=d_model if d_embed <= 0 else d_embed,  # LTS: -1 means "same as d_model"
            div_val=int(config.get("div_val", 1)),
            cutoffs=cutoffs,
            vocab_size=n_token,
            n_positions=int(config.get("tgt_len", DEFAULT_N_POSITIONS)),
        )

    def embedding_widths(self) -> list[int]:
        """Embedding width of each adaptive cluster (head cluster first)."""
        return [self.d_embed // self.div_val**i for i in range(len(self.cutoffs) + 1)]

    # -- the registry's ArchSpec contract ------------------------------------------------
    @property
    def max_seq_len(self) -> int:
        return self.n_positions

    def decoder_params(self) -> int:
        return gpt2_counts.decoder_params(self)

    def total_params(self) -> int:
        return gpt2_counts.total_params(self)


def _per_layer(value: Any, n_layer: int) -> tuple[int, ...]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return tuple(int(v) for v in value)
    return (int(value),) * n_layer


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpec(name, f"must be an integer, got {value!r}")
    return value


def _int_tuple(name: str, value: Any) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidSpec(name, f"must be a list of integers, got {value!r}")
    return tuple(_int(name, v) for v in value)


def _validate(spec: GPT2Spec) -> None:
    for name in ("n_layer", "d_model", "d_embed", "div_val", "vocab_size", "n_positions"):
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidSpec(name, f"must be a positive integer, got {value!r}")
    for name in ("d_inner", "n_head", "cutoffs"):
        value = getattr(spec, name)
        if not isinstance(value, tuple) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise InvalidSpec(name, "must be a tuple of integers")
    for name in ("d_inner", "n_head"):
        if len(getattr(spec, name)) != spec.n_layer:
            raise InvalidSpec(
                name, f"needs one value per layer: {spec.n_layer}, got {len(getattr(spec, name))}"
            )
    if any(v < 1 for v in spec.d_inner):
        raise InvalidSpec("d_inner", "every layer's d_inner must be a positive integer")
    for i, heads in enumerate(spec.n_head):
        if heads < 1 or spec.d_model % heads:
            raise InvalidSpec(
                "n_head", f"layer {i}: {heads} heads must be >= 1 and divide d_model={spec.d_model}"
            )
    cut = spec.cutoffs
    if any(b <= a for a, b in zip(cut, cut[1:])) or (
        cut and (cut[0] < 1 or cut[-1] >= spec.vocab_size)
    ):
        raise InvalidSpec(
            "cutoffs", f"must be strictly ascending and inside (0, vocab_size={spec.vocab_size})"
        )
    if shrinks_to_nothing(spec.d_embed, spec.div_val, len(cut)):
        raise InvalidSpec(
            "div_val",
            f"d_embed={spec.d_embed} / div_val={spec.div_val}^{len(cut)} leaves a cluster "
            "with no embedding width",
        )
