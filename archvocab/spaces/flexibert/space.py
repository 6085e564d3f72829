"""The FlexiBERT search space (Training-free NAS, Table 1): sampling, mutation, crossover and
membership. The spec and its counts: `archvocab.spaces.flexibert.spec`.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from archvocab.errors import InvalidSpec
from archvocab.identity import Membership
from archvocab.spaces.flexibert.spec import (
    _LAYER_FIELDS,
    _SIZE_FIELDS,
    ELECTRA_MAX_POSITIONS,
    ELECTRA_SMALL_EMBEDDING_SIZE,
    ELECTRA_TYPE_VOCAB_SIZE,
    ELECTRA_VOCAB_SIZE,
    SPEC_KIND,
    EncoderLayer,
    FlexiBERTSpec,
    _positive,
    _reject_unknown,
    check_operation,
)

DEFAULT_OPERATIONS: tuple[tuple[str, str | int], ...] = (
    ("SA", "SDP"),
    ("SA", "WMA"),
    ("LT", "DFT"),
    ("LT", "DCT"),
    ("DSC", 5),
    ("DSC", 9),
)
# Sanity ceilings for a requested space: a request cannot ask for absurd models or grids.
LIMITS = {
    "hidden_size": 16384,
    "n_layer": 256,
    "num_operation_heads": 1024,
    "feed_forward_dimension": 65536,
    "num_feed_forward": 16,
    "kernel": 255,
    "vocab_size": 10_000_000,
    "max_position_embeddings": 1_048_576,
    "type_vocab_size": 1024,
    "embedding_size": 16384,
}
_CHOICE_FIELDS = (
    "hidden_size",
    "n_layer",
    "num_operation_heads",
    "feed_forward_dimension",
    "num_feed_forward",
)


@dataclass(frozen=True)
class FlexiBERTSpace(Membership):
    """Table 1's space by default (10,621,440 members); every choice can be overridden.

    Genes: hidden_size and n_layer (whole encoder); per layer the operation (type and
    parameter together, one gene), its heads, feed_forward_dimension and num_feed_forward.
    """

    kind: ClassVar[str] = SPEC_KIND
    hidden_size: tuple[int, ...] = (128, 256)
    n_layer: tuple[int, ...] = (2, 4)
    operations: tuple[tuple[str, str | int], ...] = DEFAULT_OPERATIONS
    num_operation_heads: tuple[int, ...] = (2, 4)
    feed_forward_dimension: tuple[int, ...] = (512, 1024)
    num_feed_forward: tuple[int, ...] = (1, 3)
    vocab_size: int = ELECTRA_VOCAB_SIZE
    max_position_embeddings: int = ELECTRA_MAX_POSITIONS
    type_vocab_size: int = ELECTRA_TYPE_VOCAB_SIZE
    embedding_size: int = ELECTRA_SMALL_EMBEDDING_SIZE

    def __post_init__(self) -> None:
        for name in _CHOICE_FIELDS:
            _check_choices(name, getattr(self, name))
        _check_choices("operations", self.operations)
        for name in _SIZE_FIELDS:
            _positive(name, getattr(self, name))
            _within_limit(name, getattr(self, name))
        for hidden in self.hidden_size:
            if not self.heads_for(hidden):
                raise InvalidSpec("hidden_size", f"{hidden}: no allowed head count divides it")

    # -- the grid -------------------------------------------------------------------------
    def heads_for(self, hidden: int) -> list[int]:
        return [heads for heads in self.num_operation_heads if hidden % heads == 0]

    def layer_choices(self, hidden: int) -> list[EncoderLayer]:
        """Every layer the space allows at this hidden size."""
        return [
            EncoderLayer(op_type, parameter, heads, f, stacks)
            for (op_type, parameter), heads, f, stacks in itertools.product(
                self.operations,
                self.heads_for(hidden),
                self.feed_forward_dimension,
                self.num_feed_forward,
            )
        ]

    def size(self) -> int:
        """The number of members, counted from the definition: layers are chosen independently
        of each other once hidden_size and n_layer are fixed."""
        return sum(
            len(self.layer_choices(hidden)) ** n_layer
            for hidden in self.hidden_size
            for n_layer in self.n_layer
        )

    # -- operators ------------------------------------------------------------------------
    def sample(self, rng: random.Random) -> FlexiBERTSpec:
        """A member with every gene uniform over its choices."""
        hidden, n_layer = rng.choice(self.hidden_size), rng.choice(self.n_layer)
        return self._make(hidden, [self._sample_layer(hidden, rng) for _ in range(n_layer)])

    def mutate(self, spec: FlexiBERTSpec, rng: random.Random, p: float = 0.3) -> FlexiBERTSpec:
        """Resample each gene with probability p; layers a deeper encoder adds are sampled."""
        hidden = rng.choice(self.hidden_size) if rng.random() < p else spec.hidden_size
        n_layer = rng.choice(self.n_layer) if rng.random() < p else spec.n_layer
        layers = []
        for layer in spec.layers[:n_layer]:
            fresh = _genes(self._sample_layer(hidden, rng))
            genes = {
                name: fresh[name] if rng.random() < p else value
                for name, value in _genes(layer).items()
            }
            layers.append(self._layer_from_genes(genes, hidden, rng))
        layers += [self._sample_layer(hidden, rng) for _ in range(n_layer - len(layers))]
        return self._make(hidden, layers)

    def crossover(
        self, a: FlexiBERTSpec, b: FlexiBERTSpec, rng: random.Random, p: float = 0.5
    ) -> FlexiBERTSpec:
        """Uniform crossover: each gene from b with probability p, else from a.

        Depth is a gene like the others. Where the parents' depths differ and the child is
        the deeper one, its layers beyond the shallower parent come whole from the deeper
        parent (the only one that has them): every gene of the child is a parent's gene.
        """
        hidden = b.hidden_size if rng.random() < p else a.hidden_size
        n_layer = b.n_layer if rng.random() < p else a.n_layer
        layers = []
        for i in range(n_layer):
            if i < min(a.n_layer, b.n_layer):
                genes = {
                    name: value_b if rng.random() < p else value_a
                    for (name, value_a), value_b in zip(
                        _genes(a.layers[i]).items(), _genes(b.layers[i]).values()
                    )
                }
            else:
                genes = _genes((a if a.n_layer > i else b).layers[i])
            layers.append(self._layer_from_genes(genes, hidden, rng))
        return self._make(hidden, layers)

    def check_member(self, spec: FlexiBERTSpec) -> None:
        """Raise InvalidSpec naming the first field of `spec` outside this space."""
        if not isinstance(spec, FlexiBERTSpec):
            raise InvalidSpec("kind", f"{type(spec).__name__} is not a {SPEC_KIND} spec")
        for name in ("hidden_size", "n_layer"):
            if getattr(spec, name) not in getattr(self, name):
                raise InvalidSpec(name, f"{getattr(spec, name)} not in {list(getattr(self, name))}")
        for i, layer in enumerate(spec.layers):
            where = f"layers[{i}]"
            if layer.operation not in self.operations:
                allowed = ", ".join(f"{t} {p}" for t, p in self.operations)
                raise InvalidSpec(
                    f"{where}.operation_parameter",
                    f"{layer.operation_type} {layer.operation_parameter!r} not allowed here; "
                    f"allowed: {allowed}",
                )
            for name in _LAYER_FIELDS[2:]:
                if getattr(layer, name) not in getattr(self, name):
                    raise InvalidSpec(
                        f"{where}.{name}",
                        f"{getattr(layer, name)} not in {list(getattr(self, name))}",
                    )
        for name in _SIZE_FIELDS:
            if getattr(spec, name) != getattr(self, name):
                raise InvalidSpec(
                    name, f"{getattr(spec, name)} not allowed here: {getattr(self, name)}"
                )

    @property
    def max_seq_len(self) -> int:
        return self.max_position_embeddings

    # -- plain data -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        operations: dict[str, list[str | int]] = {}
        for op_type, parameter in self.operations:
            operations.setdefault(op_type, []).append(parameter)
        out["operations"] = operations
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlexiBERTSpace:
        """Settings as `to_dict` writes them; "operations" maps a type to its parameters."""
        if not isinstance(data, Mapping):
            raise InvalidSpec("space", f"must be a JSON object, got {type(data).__name__}")
        if data.get("kind", cls.kind) != cls.kind:
            raise InvalidSpec("kind", f"{data['kind']!r} is not this space's kind {cls.kind!r}")
        _reject_unknown("", data, ["kind", *(f.name for f in fields(cls))])
        kwargs: dict[str, Any] = {}
        for name, value in data.items():
            if name in _CHOICE_FIELDS:
                if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                    raise InvalidSpec(name, f"must be a list of positive integers, got {value!r}")
                kwargs[name] = tuple(value)
            elif name == "operations":
                kwargs[name] = _parse_operations(value)
            elif name != "kind":
                kwargs[name] = value
        return cls(**kwargs)

    # -- helpers --------------------------------------------------------------------------
    def _sample_layer(self, hidden: int, rng: random.Random) -> EncoderLayer:
        op_type, parameter = rng.choice(self.operations)
        return EncoderLayer(
            op_type,
            parameter,
            rng.choice(self.heads_for(hidden)),
            rng.choice(self.feed_forward_dimension),
            rng.choice(self.num_feed_forward),
        )

    def _layer_from_genes(
        self, genes: Mapping[str, Any], hidden: int, rng: random.Random
    ) -> EncoderLayer:
        """A layer from its genes; heads the (new) hidden size does not allow are resampled."""
        heads = genes["num_operation_heads"]
        if heads not in self.heads_for(hidden):
            heads = rng.choice(self.heads_for(hidden))
        op_type, parameter = genes["operation"]
        return EncoderLayer(
            op_type, parameter, heads, genes["feed_forward_dimension"], genes["num_feed_forward"]
        )

    def _make(self, hidden: int, layers: list[EncoderLayer]) -> FlexiBERTSpec:
        return FlexiBERTSpec(
            hidden_size=hidden,
            n_layer=len(layers),
            layers=tuple(layers),
            **{name: getattr(self, name) for name in _SIZE_FIELDS},
        )


def _genes(layer: EncoderLayer) -> dict[str, Any]:
    return {name: getattr(layer, name) for name in ("operation", *_LAYER_FIELDS[2:])}


def _check_choices(name: str, values: Any) -> None:
    """A non-empty tuple of distinct valid choices (integers, or operations)."""
    if not isinstance(values, tuple) or not values:
        raise InvalidSpec(name, f"must be a non-empty list, got {values!r}")
    for value in values:
        if name != "operations":
            _positive(name, value)
            _within_limit(name, value)
        elif isinstance(value, tuple) and len(value) == 2:
            check_operation(name, *value)
            if value[0] == "DSC":  # named as check_operation names it, not "kernel"
                _within_limit("kernel", value[1], field=f"{name}.operation_parameter")
        else:
            raise InvalidSpec(name, f"each must be (operation_type, parameter), got {value!r}")
    if len(set(values)) < len(values):
        raise InvalidSpec(name, f"lists a choice twice: {list(values)!r}")


def _within_limit(name: str, value: int, field: str | None = None) -> None:
    if value > LIMITS[name]:
        raise InvalidSpec(field or name, f"must be <= {LIMITS[name]}, got {value}")


def _parse_operations(value: Any) -> tuple[tuple[str, str | int], ...]:
    if not isinstance(value, Mapping):
        raise InvalidSpec("operations", "must map an operation type to a list of its parameters")
    pairs = []
    for op_type, parameters in value.items():
        if isinstance(parameters, (str, bytes)) or not isinstance(parameters, Sequence):
            raise InvalidSpec(f"operations.{op_type}", f"must be a list, got {parameters!r}")
        pairs += [(op_type, parameter) for parameter in parameters]
    return tuple(pairs)
