"""The Transformer-XL spec and its analytic counts: LTS's second backbone. The search space is
`archvocab.spaces.transxl.space`, the torch builder `archvocab.spaces.transxl.build`.

Layout (LTS's archai MemTransformerLM, attn_type 0): post-norm decoder layers of relative
multi-head attention (bias-free fused QKV, relative-position projection r_net, bias-free output
projection, per-layer learned biases u = r_w_bias and v = r_r_bias of n_head x d_head each,
one LayerNorm) and a ReLU feed-forward with its LayerNorm; no final LayerNorm, no learned
position table; adaptive input embedding and an adaptive softmax whose weights are tied to it
and whose cluster projections are tied per `tie_projs`. `decoder_params()` reproduces
`params.nonembedding` of every model in LTS's random_TransXL_* logs (tests/archvocab).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from archvocab.errors import InvalidSpec
from archvocab.grid import shrinks_to_nothing
from archvocab.identity import SpecIdentity

SPEC_KIND = "transxl"
# LTS's WikiText-103 setup: word-level vocabulary, cutoffs (its 4th cutoff = n_token is the
# end of the vocabulary, not a cluster), 192-token segments and memories.
WT103_VOCAB_SIZE = 267736
WT103_CUTOFFS = (19997, 39997, 199997)
WT103_SEGMENT = 192

_INTS = ("n_layer", "d_model", "d_embed", "div_val", "vocab_size", "tgt_len", "mem_len")
_INT_LISTS = ("d_inner", "n_head", "d_head", "cutoffs")
_FIELDS = (*_INTS, *_INT_LISTS, "tie_projs", "pre_lnorm")
_REQUIRED = ("n_layer", "d_model", "d_inner", "n_head", "d_embed")
# LTS config flags with a value other than this select modules that are not built here.
_BUILT_FLAGS = {"attn_type": 0, "tie_weight": True, "primer_conv": False, "primer_square": False}


@dataclass(frozen=True)
class TransXLSpec(SpecIdentity):
    """A Transformer-XL decoder with per-layer heads, head width and feed-forward width.

    ``d_head`` () means d_model // n_head per layer (LTS's -1; heads must divide d_model);
    ``tie_projs`` () means LTS's default: head cluster projection untied, tail ones tied to the
    embedding's. A value equal to its default is stored as (), so one model has one id (and
    `replace(spec, n_head=...)` keeps the default); `head_dims()`, `projection_ties()` resolve.
    ``tgt_len`` is the segment length (the measured sequence bound), ``mem_len`` the cached
    hidden states per layer the segment attends to.
    """

    n_layer: int
    d_model: int
    d_inner: tuple[int, ...]
    n_head: tuple[int, ...]
    d_embed: int
    div_val: int = 1
    cutoffs: tuple[int, ...] = WT103_CUTOFFS
    vocab_size: int = WT103_VOCAB_SIZE
    tgt_len: int = WT103_SEGMENT
    mem_len: int = WT103_SEGMENT
    d_head: tuple[int, ...] = ()
    tie_projs: tuple[bool, ...] = ()
    pre_lnorm: bool = False
    kind: str = field(default=SPEC_KIND, init=False)

    def __post_init__(self) -> None:
        _validate(self)

    def to_dict(self) -> dict[str, Any]:
        """The canonical plain-data form (lists, ints, bools, fixed key set)."""
        return self._plain_fields(_FIELDS)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TransXLSpec:
        """Parse the plain-data form; unknown, missing or mistyped fields raise InvalidSpec."""
        if not isinstance(data, Mapping):
            raise InvalidSpec("spec", f"must be a JSON object, got {type(data).__name__}")
        if data.get("kind", SPEC_KIND) != SPEC_KIND:
            raise InvalidSpec("kind", f"{data['kind']!r} is not {SPEC_KIND!r}")
        unknown = sorted(set(data) - set(_FIELDS) - {"kind"})
        if unknown:
            raise InvalidSpec(unknown[0], f"unknown field; allowed fields: {', '.join(_FIELDS)}")
        missing = [name for name in _REQUIRED if name not in data]
        if missing:
            raise InvalidSpec(missing[0], "is required")
        # Lists become tuples; the constructor checks every value's type and names the field.
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        kwargs.pop("kind", None)
        return cls(**kwargs)

    @classmethod
    def from_lts_config(cls, config: Mapping[str, Any]) -> TransXLSpec:
        """Load a `config` of LTS's released Transformer-XL logs (../shared/data/lts).

        Refused (InvalidSpec naming the flag): attention other than attn_type 0, untied output
        weights, Primer-EZ primitives. dropout, ext_len, same_length and clamp_len change no
        parameter and no shape, so they are not part of a spec.
        """
        for flag, built in _BUILT_FLAGS.items():
            if config.get(flag, built) != built:
                raise InvalidSpec(flag, f"only {built!r} is built, got {config[flag]!r}")
        n_token, n_layer, d_model = (int(config[k]) for k in ("n_token", "n_layer", "d_model"))
        cutoffs = tuple(int(c) for c in config.get("cutoffs", ()) if 0 < int(c) < n_token)
        d_embed, d_head = int(config.get("d_embed", -1)), config.get("d_head", -1)
        tie_projs = config.get("tie_projs") or [not config.get("adaptive", True)]
        tie_projs = [*tie_projs, *[True] * len(cutoffs)][: len(cutoffs) + 1]  # archai's padding
        return cls(
            n_layer=n_layer,
            d_model=d_model,
            d_inner=_per_layer(config["d_inner"], n_layer),
            n_head=_per_layer(config["n_head"], n_layer),
            d_head=() if d_head == -1 else _per_layer(d_head, n_layer),
            d_embed=d_model if d_embed <= 0 else d_embed,
            div_val=int(config.get("div_val", 1)),
            cutoffs=cutoffs,
            vocab_size=n_token,
            tgt_len=int(config.get("tgt_len", WT103_SEGMENT)),
            mem_len=int(config.get("mem_len", WT103_SEGMENT)),
            tie_projs=tuple(bool(t) for t in tie_projs),
            pre_lnorm=bool(config.get("pre_lnorm", False)),
        )

    def embedding_widths(self) -> list[int]:
        """Embedding width of each adaptive cluster (head first); div_val 1: one table."""
        if self.div_val == 1:
            return [self.d_embed] * (len(self.cutoffs) + 1)
        return [self.d_embed // self.div_val**i for i in range(len(self.cutoffs) + 1)]

    def head_dims(self) -> tuple[int, ...]:
        return self.d_head or tuple(self.d_model // h for h in self.n_head)

    def projection_ties(self) -> tuple[bool, ...]:
        """Per cluster (head first): is its output projection the embedding's?"""
        return self.tie_projs or _default_ties(len(self.cutoffs))

    def attention_widths(self) -> list[int]:
        """n_head x d_head per layer: the width of Q, K, V and the position keys."""
        return [h * w for h, w in zip(self.n_head, self.head_dims())]

    @property
    def max_seq_len(self) -> int:
        return self.tgt_len

    def decoder_params(self) -> int:
        """Decoder layers: attention (with u, v) + feed-forward + two LayerNorms per layer."""
        return (
            sum(
                attention_params(self.d_model, width) + feed_forward_params(self.d_model, inner)
                for width, inner in zip(self.attention_widths(), self.d_inner)
            )
            + self.n_layer * 4 * self.d_model
        )

    def total_params(self) -> int:
        return self.decoder_params() + embedding_params(self) + output_head_params(self)


# -- analytic counts (mirroring archvocab.spaces.transxl.build; tests compare them) ----------
def attention_params(d_model: int, width: int) -> int:
    """QKV (3 d w) + relative-position projection (d w) + output (w d), no biases; u and v."""
    return 5 * d_model * width + 2 * width


def feed_forward_params(d_model: int, d_inner: int) -> int:
    return 2 * d_model * d_inner + d_inner + d_model


def embedding_params(spec: TransXLSpec) -> int:
    """Adaptive input: the tables and their projections to d_model (none if not needed)."""
    bounds, widths = [0, *spec.cutoffs, spec.vocab_size], spec.embedding_widths()
    if spec.div_val == 1:
        projected = spec.d_embed != spec.d_model
        return spec.vocab_size * spec.d_embed + (spec.d_embed * spec.d_model if projected else 0)
    tables = sum((hi - lo) * w for lo, hi, w in zip(bounds, bounds[1:], widths))
    return tables + spec.d_model * sum(widths)


def output_head_params(spec: TransXLSpec) -> int:
    """Adaptive softmax beyond the tied weights: biases, cluster logits, untied projections."""
    projected = spec.div_val > 1 or spec.d_embed != spec.d_model
    untied = sum(
        spec.d_model * w
        for w, tied in zip(spec.embedding_widths(), spec.projection_ties())
        if not tied
    )
    clusters = len(spec.cutoffs) * (spec.d_embed + 1)
    return spec.vocab_size + clusters + (untied if projected else 0)


# -- validation -------------------------------------------------------------------------------
def _validate(spec: TransXLSpec) -> None:
    for name in _INTS:
        value, least = getattr(spec, name), 0 if name == "mem_len" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InvalidSpec(name, f"must be an integer >= {least}, got {value!r}")
    for name in _INT_LISTS:
        values = getattr(spec, name)
        if not isinstance(values, tuple) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values
        ):
            raise InvalidSpec(name, f"must be a list of positive integers, got {values!r}")
        per_layer = name in ("d_inner", "n_head") or (name == "d_head" and values)
        if per_layer and len(values) != spec.n_layer:
            raise InvalidSpec(name, f"needs one value per layer: {spec.n_layer}, got {len(values)}")
    even = all(spec.d_model % heads == 0 for heads in spec.n_head)
    if even and spec.d_head == tuple(spec.d_model // h for h in spec.n_head):
        object.__setattr__(spec, "d_head", ())
    if not spec.d_head and not even:  # LTS's d_head = -1: d_model split evenly over the heads
        i, heads = next((i, h) for i, h in enumerate(spec.n_head) if spec.d_model % h)
        raise InvalidSpec("n_head", f"layer {i}: {heads} heads must divide d_model")
    cut = spec.cutoffs
    if any(b <= a for a, b in zip(cut, cut[1:])) or (cut and cut[-1] >= spec.vocab_size):
        raise InvalidSpec("cutoffs", f"must be ascending and inside (0, {spec.vocab_size})")
    if shrinks_to_nothing(spec.d_embed, spec.div_val, len(cut)):
        raise InvalidSpec("div_val", f"d_embed={spec.d_embed} / div_val^{len(cut)} is 0")
    tie = spec.tie_projs
    if (
        not isinstance(tie, tuple)
        or len(tie) not in (0, len(cut) + 1)
        or not all(isinstance(t, bool) for t in tie)
    ):
        raise InvalidSpec("tie_projs", f"needs one true/false per cluster ({len(cut) + 1})")
    if tie == _default_ties(len(cut)):
        object.__setattr__(spec, "tie_projs", ())
    if not isinstance(spec.pre_lnorm, bool):
        raise InvalidSpec("pre_lnorm", f"must be true or false, got {spec.pre_lnorm!r}")


def _default_ties(n_cutoffs: int) -> tuple[bool, ...]:
    """archai's default for an adaptive softmax: head projection untied, tails tied."""
    return (False, *[True] * n_cutoffs)


def _per_layer(value: Any, n_layer: int) -> tuple[int, ...]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return tuple(int(v) for v in value)
    return (int(value),) * n_layer
