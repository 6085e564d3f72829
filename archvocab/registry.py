"""Search spaces are plugins: one registry, found by name by the server, agents, search, proxies.

A space kind is a package of its own, `archvocab/spaces/<kind>/`: torch-free modules for its
spec (with its analytic parameter counts), its search space and its memory footprint, a
torch one for the builder (`build`), and `KIND = SpaceKind(...)` in its `__init__`. Adding a
space is that package and one line in `_KIND_MODULES` below.

The contracts every space keeps are the Protocols `ArchSpec`, `SearchSpace` and `Builder`;
tests/archvocab/test_vocab_registry.py runs one parametrized suite over every registered kind.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from archvocab.errors import InvalidSpec

if TYPE_CHECKING:  # the builder side needs torch; only the type checker looks at it here
    import torch

DEFAULT_KIND = "gpt2"
# What a model whose output is a vocabulary distribution returns (MeasurementSettings.output):
# the next-token scores of the last position only, or scores at every position.
OUTPUT_MODES = ("last", "all")

# name -> the kind's package (torch-free), whose `__init__` defines `KIND`. One line per space.
_KIND_MODULES: dict[str, str] = {
    "gpt2": "archvocab.spaces.gpt2",
    "flexibert": "archvocab.spaces.flexibert",
    "nasbench_nlp": "archvocab.spaces.nasbench_nlp",
    "transxl": "archvocab.spaces.transxl",
}


@runtime_checkable
class ArchSpec(Protocol):
    """One architecture: immutable, validated on construction, identified by its content."""

    kind: str

    def to_dict(self) -> dict[str, Any]:
        """Canonical plain data, with "kind"; `from_dict(to_dict())` gives an equal spec."""
        ...

    def canonical_json(self) -> str: ...

    @property
    def arch_id(self) -> str:
        """Stable id: first 16 hex digits of the SHA-256 of the canonical JSON."""
        ...

    @property
    def n_layer(self) -> int: ...

    @property
    def max_seq_len(self) -> int | None:
        """Longest input sequence the model accepts (None: no limit)."""
        ...

    def decoder_params(self) -> int:
        """The non-embedding parameters: LTS's decoder-parameter proxy for this family."""
        ...

    def total_params(self) -> int:
        """Every parameter of the built model (tied tensors once)."""
        ...


class SearchSpace(Protocol):
    """A grid of specs with LTS's evolutionary operators; every operator returns a member."""

    kind: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data with "kind"; the space's `from_dict` rebuilds an equal space."""
        ...

    @property
    def max_seq_len(self) -> int | None: ...

    def sample(self, rng: random.Random) -> Any: ...

    def mutate(self, spec: Any, rng: random.Random, p: float = 0.3) -> Any: ...

    def crossover(self, a: Any, b: Any, rng: random.Random, p: float = 0.5) -> Any: ...

    def check_member(self, spec: Any) -> None:
        """Raise InvalidSpec naming the first field of `spec` outside this space."""
        ...

    def contains(self, spec: Any) -> bool: ...


class Builder(Protocol):
    """The torch side of a space kind (a module): imported only where models are built.

    A model whose output is a distribution over a vocabulary has an `output` attribute, one
    of OUTPUT_MODES ("all", scores at every position, as built): `set_output` switches it.
    """

    def build_model(self, spec: Any) -> torch.nn.Module:
        """A module with random weights whose forward takes `example_inputs(...)`."""
        ...

    def example_inputs(
        self, spec: Any, batch_size: int, seq_len: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, ...]:
        """The measurement input (CPU tensors), drawn from `generator`."""
        ...

    def primer_spec(self, spec: Any, seq_len: int) -> Any:
        """A tiny spec of the same kind taking the same code paths as `spec` (the agent runs
        it once before the memory baseline, so one-off runtime setup is not counted)."""
        ...


@dataclass(frozen=True)
class SpaceKind:
    """A registered space kind: how to read its specs and spaces, where its builder lives."""

    name: str
    spec_type: type
    space_type: type
    builder: str  # module path of the torch builder (a `Builder`)
    summary: str
    # Runtimes that can measure this kind ("onnxruntime" needs an ONNX export of its models).
    runtimes: tuple[str, ...] = ("torch",)
    # (spec, batch, seq, positions the output head scores) -> an upper bound on the activation
    # elements alive at once in one forward pass (archvocab.footprint); None: as its weights.
    activations: Callable[[Any, int, int, int], int] | None = None

    def parse_spec(self, data: Mapping[str, Any]) -> ArchSpec:
        return _read("spec", lambda: self.spec_type.from_dict(data))  # type: ignore[no-any-return]

    def parse_space(self, data: Mapping[str, Any]) -> SearchSpace:
        return _read("space", lambda: self.space_type.from_dict(data))  # type: ignore[no-any-return]

    def load_builder(self) -> Builder:
        """Import the torch builder (torch comes with it)."""
        module: ModuleType = importlib.import_module(self.builder)
        return module  # type: ignore[return-value]


def _read(what: str, parse: Any) -> Any:
    """`parse()`, with any error a plugin's parser lets slip on hostile input (a list where a
    number belongs...) turned into InvalidSpec: bad input is a 422, never a crash."""
    try:
        return parse()
    except InvalidSpec:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        raise InvalidSpec(what, f"cannot be read: {type(exc).__name__}: {exc}") from None


def kind_names() -> list[str]:
    return list(_KIND_MODULES)


def get_kind(name: Any) -> SpaceKind:
    """The registered kind `name`; InvalidSpec listing the valid names otherwise."""
    if not isinstance(name, str) or name not in _KIND_MODULES:
        raise InvalidSpec(
            "kind", f"unknown space kind {name!r}; allowed: {', '.join(_KIND_MODULES)}"
        )
    kind: SpaceKind = importlib.import_module(_KIND_MODULES[name]).KIND
    return kind


def _kind_of(data: Any, what: str) -> SpaceKind:
    if not isinstance(data, Mapping):
        raise InvalidSpec(what, f"must be a JSON object, got {type(data).__name__}")
    return get_kind(data.get("kind", DEFAULT_KIND))


def parse_spec(data: Mapping[str, Any]) -> ArchSpec:
    """A spec of any registered kind from its plain data ("kind" absent: gpt2)."""
    return _kind_of(data, "spec").parse_spec(data)


def parse_space(data: Mapping[str, Any]) -> SearchSpace:
    """A search space of any registered kind from its settings ("kind" absent: gpt2)."""
    return _kind_of(data, "space").parse_space(data)


def kind_of_spec(spec: ArchSpec) -> SpaceKind:
    return get_kind(spec.kind)


def set_output(model: Any, output: str) -> bool:
    """Make a built model's forward return `output` (one of OUTPUT_MODES): "last", the
    next-token scores of the last position only (the output layer runs on that position
    alone, as generation and serving do), or "all", scores at every position.

    True if the mode applies; False for a model whose output is no vocabulary distribution
    (an encoder's hidden states), which is left as it is.
    """
    if output not in OUTPUT_MODES:
        raise InvalidSpec(
            "output", f"unknown output mode {output!r}; allowed: {', '.join(OUTPUT_MODES)}"
        )
    if getattr(model, "output", None) not in OUTPUT_MODES:
        return False
    model.output = output
    return True
