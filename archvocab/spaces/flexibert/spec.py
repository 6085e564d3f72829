"""The FlexiBERT encoder space of "Training-free NAS for RNNs and Transformers" (Table 1).

One hidden size and layer count for the whole encoder; per layer an operation (self-attention
"SA": scaled dot-product "SDP" or multiplicative "WMA"; linear transform "LT": Fourier "DFT"
or cosine "DCT"; span-based dynamic convolution "DSC" with kernel 5 or 9), its heads, and a
feed-forward stack. Field names follow the benchmark (../shared/data/tfnas/BERT_benchmark.json).
Embeddings are ELECTRA-small's, as the benchmark's models use them: a 30522-token vocabulary,
512 positions, 2 token types, width 128 projected to the hidden size when that differs.

The layout the counts below mirror (`archvocab.spaces.flexibert.build`), per layer: the operation,
a hidden x hidden output projection, residual and LayerNorm; then the feed-forward stack
(hidden -> f, (stacks - 1) x f -> f, f -> hidden, GELU after each but the last), residual and
LayerNorm: post-LayerNorm BERT, as FlexiBERT's and the benchmark's code build it.
`decoder_params` is everything but the three embedding tables (the embedding LayerNorm and
projection count as encoder parameters).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from archvocab.errors import InvalidSpec
from archvocab.identity import SpecIdentity

SPEC_KIND = "flexibert"
# ELECTRA-small's embedding settings (the benchmark's hparams override only the hidden size).
ELECTRA_VOCAB_SIZE = 30522
ELECTRA_MAX_POSITIONS = 512
ELECTRA_TYPE_VOCAB_SIZE = 2
ELECTRA_SMALL_EMBEDDING_SIZE = 128
# Operation type -> its parameters (a DSC's parameter is any odd kernel size in a spec).
OPERATION_PARAMETERS: dict[str, tuple[str, ...]] = {"SA": ("SDP", "WMA"), "LT": ("DFT", "DCT")}
OPERATION_TYPES = ("SA", "LT", "DSC")
_LAYER_FIELDS = (
    "operation_type",
    "operation_parameter",
    "num_operation_heads",
    "feed_forward_dimension",
    "num_feed_forward",
)
_SIZE_FIELDS = ("vocab_size", "max_position_embeddings", "type_vocab_size", "embedding_size")
_FIELDS = ("hidden_size", "n_layer", "layers", *_SIZE_FIELDS)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive(where: str, value: object) -> None:
    if not _is_int(value) or value < 1:  # type: ignore[operator]
        raise InvalidSpec(where, f"must be a positive integer, got {value!r}")


def check_operation(where: str, operation_type: object, parameter: object) -> None:
    """InvalidSpec unless `parameter` is valid for `operation_type` (`where` prefixes fields)."""
    if operation_type not in OPERATION_TYPES:
        raise InvalidSpec(
            f"{where}.operation_type",
            f"unknown operation {operation_type!r}; allowed: {', '.join(OPERATION_TYPES)}",
        )
    if operation_type == "DSC":
        if not _is_int(parameter) or parameter < 1 or parameter % 2 == 0:  # type: ignore[operator]
            raise InvalidSpec(
                f"{where}.operation_parameter",
                f"a DSC layer's parameter is its kernel size, a positive odd integer; "
                f"got {parameter!r}",
            )
    elif parameter not in OPERATION_PARAMETERS[operation_type]:  # type: ignore[index]
        allowed = ", ".join(OPERATION_PARAMETERS[operation_type])  # type: ignore[index]
        raise InvalidSpec(
            f"{where}.operation_parameter",
            f"{parameter!r} is not valid for operation {operation_type}; allowed: {allowed}",
        )


@dataclass(frozen=True)
class EncoderLayer:
    """One encoder layer's genes (validated by the spec that holds it)."""

    operation_type: str
    operation_parameter: str | int
    num_operation_heads: int
    feed_forward_dimension: int
    num_feed_forward: int

    @property
    def operation(self) -> tuple[str, str | int]:
        return (self.operation_type, self.operation_parameter)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _LAYER_FIELDS}

    def check(self, where: str, hidden_size: int) -> None:
        check_operation(where, self.operation_type, self.operation_parameter)
        for name in _LAYER_FIELDS[2:]:
            _positive(f"{where}.{name}", getattr(self, name))
        if hidden_size % self.num_operation_heads:
            raise InvalidSpec(
                f"{where}.num_operation_heads",
                f"{self.num_operation_heads} heads do not divide hidden_size={hidden_size}",
            )


@dataclass(frozen=True)
class FlexiBERTSpec(SpecIdentity):
    """A FlexiBERT encoder: shared hidden size and depth, heterogeneous layers.

    A spec accepts any self-consistent shape; whether it belongs to a search space is the
    space's business (`FlexiBERTSpace.check_member`).
    """

    hidden_size: int
    n_layer: int
    layers: tuple[EncoderLayer, ...]
    vocab_size: int = ELECTRA_VOCAB_SIZE
    max_position_embeddings: int = ELECTRA_MAX_POSITIONS
    type_vocab_size: int = ELECTRA_TYPE_VOCAB_SIZE
    embedding_size: int = ELECTRA_SMALL_EMBEDDING_SIZE
    kind: str = field(default=SPEC_KIND, init=False)

    def __post_init__(self) -> None:
        for name in ("hidden_size", "n_layer", *_SIZE_FIELDS):
            _positive(name, getattr(self, name))
        if not isinstance(self.layers, tuple) or not all(
            isinstance(layer, EncoderLayer) for layer in self.layers
        ):
            raise InvalidSpec("layers", "must be a tuple of EncoderLayer")
        if len(self.layers) != self.n_layer:
            raise InvalidSpec(
                "layers",
                f"needs one entry per layer: n_layer={self.n_layer}, got {len(self.layers)}",
            )
        for i, layer in enumerate(self.layers):
            layer.check(f"layers[{i}]", self.hidden_size)

    # -- identity -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The canonical plain-data form (layers as a list of objects)."""
        out: dict[str, Any] = {"kind": self.kind}
        for name in _FIELDS:
            out[name] = getattr(self, name)
        out["layers"] = [layer.to_dict() for layer in self.layers]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlexiBERTSpec:
        """Parse the canonical form; unknown, missing or mistyped fields raise InvalidSpec."""
        if not isinstance(data, Mapping):
            raise InvalidSpec("spec", f"must be a JSON object, got {type(data).__name__}")
        if data.get("kind", SPEC_KIND) != SPEC_KIND:
            raise InvalidSpec("kind", f"unknown spec kind {data['kind']!r}; allowed: {SPEC_KIND!r}")
        _reject_unknown("", data, ("kind", *_FIELDS))
        for name in ("hidden_size", "n_layer", "layers"):
            if name not in data:
                raise InvalidSpec(name, "is required")
        kwargs = {
            name: data[name] for name in ("hidden_size", "n_layer", *_SIZE_FIELDS) if name in data
        }
        return cls(layers=_parse_layers(data["layers"]), **kwargs)

    @classmethod
    def from_benchmark(cls, entry: Mapping[str, Any]) -> FlexiBERTSpec:
        """An entry of BERT_benchmark.json (its `hparams.model_hparam_overrides`)."""
        try:
            overrides = entry["hparams"]["model_hparam_overrides"]
            layers = overrides["nas_config"]["encoder_layers"]
            hidden_size = overrides["hidden_size"]
        except (KeyError, TypeError) as exc:
            raise InvalidSpec(
                "hparams", f"not a benchmark entry: no model_hparam_overrides field {exc}"
            ) from exc
        parsed = _parse_layers(layers)
        return cls(hidden_size=hidden_size, n_layer=len(parsed), layers=parsed)

    # -- the registry's ArchSpec contract ------------------------------------------------
    @property
    def max_seq_len(self) -> int:
        return self.max_position_embeddings

    def decoder_params(self) -> int:
        """Every parameter but the embedding tables (word, position, token type)."""
        return total_params(self) - embedding_table_params(self)

    def total_params(self) -> int:
        return total_params(self)


def _reject_unknown(prefix: str, data: Mapping[str, Any], allowed: Sequence[str]) -> None:
    unknown = sorted(str(key) for key in set(data) - set(allowed))
    if unknown:
        raise InvalidSpec(f"{prefix}{unknown[0]}", f"unknown field; allowed: {', '.join(allowed)}")


def _parse_layers(value: Any) -> tuple[EncoderLayer, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise InvalidSpec("layers", f"must be a list of layer objects, got {value!r}")
    layers = []
    for i, item in enumerate(value):
        where = f"layers[{i}]"
        if not isinstance(item, Mapping):
            raise InvalidSpec(where, f"must be an object with {', '.join(_LAYER_FIELDS)}")
        _reject_unknown(f"{where}.", item, _LAYER_FIELDS)
        missing = [name for name in _LAYER_FIELDS if name not in item]
        if missing:
            raise InvalidSpec(f"{where}.{missing[0]}", "is required")
        layers.append(EncoderLayer(**{name: item[name] for name in _LAYER_FIELDS}))
    return tuple(layers)


# -- analytic parameter counts (mirroring archvocab.spaces.flexibert.build) ------------------
def linear_params(n_in: int, n_out: int, bias: bool = True) -> int:
    return n_in * n_out + (n_out if bias else 0)


def operation_params(hidden: int, layer: EncoderLayer) -> int:
    """The token-mixing operation with its output projection and LayerNorm."""
    h, heads, kind = hidden, layer.num_operation_heads, layer.operation_type
    if kind == "SA":  # query, key, value; WMA adds a bias-free h x h weight on the query
        mixing = 3 * linear_params(h, h) + (h * h if layer.operation_parameter == "WMA" else 0)
    elif kind == "LT":  # an input projection; the transform itself has no weights
        mixing = linear_params(h, h)
    else:  # ConvBERT's span-based dynamic convolution
        kernel = int(layer.operation_parameter)
        separable_key = h * kernel + linear_params(h, h)  # depthwise (bias-free), pointwise
        query, value = linear_params(h, h), linear_params(h, h)
        kernel_generator = linear_params(h, heads * kernel)
        mixing = separable_key + query + value + kernel_generator
    return mixing + linear_params(h, h) + 2 * h


def feed_forward_params(hidden: int, layer: EncoderLayer) -> int:
    f, stacks = layer.feed_forward_dimension, layer.num_feed_forward
    inner = linear_params(hidden, f) + (stacks - 1) * linear_params(f, f)
    return inner + linear_params(f, hidden) + 2 * hidden


def embedding_table_params(spec: FlexiBERTSpec) -> int:
    rows = spec.vocab_size + spec.max_position_embeddings + spec.type_vocab_size
    return rows * spec.embedding_size


def total_params(spec: FlexiBERTSpec) -> int:
    width, hidden = spec.embedding_size, spec.hidden_size
    embedding = embedding_table_params(spec) + 2 * width  # tables and their LayerNorm
    if width != hidden:
        embedding += linear_params(width, hidden)
    layers = sum(
        operation_params(hidden, layer) + feed_forward_params(hidden, layer)
        for layer in spec.layers
    )
    return embedding + layers


def parameter_count(spec: FlexiBERTSpec) -> int:
    """The spec's parameters with each config's real hidden and feed-forward sizes.

    Not the benchmark CSV's "Number of Parameters": its authors built every architecture
    at hidden 256 and feed-forward 1024 (and with their own LT and DSC layouts).
    """
    return total_params(spec)
