"""NAS-Bench-NLP's recurrent-cell search space (kind "nasbench_nlp").

The spec and its parameter counts live in `spec` beside this module, the cell graph in
`graph`, the graph surgery of the operators in `edit` (all in `archvocab.spaces.nasbench_nlp`).
Every operator returns a member: it builds the edited cell (which validates it) and redraws
until the result is valid and inside the space.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from archvocab.errors import InvalidSpec
from archvocab.identity import Membership
from archvocab.spaces.nasbench_nlp.edit import graft, mutate_nodes, random_nodes
from archvocab.spaces.nasbench_nlp.graph import (
    MAX_LINEAR_INPUTS,
    MAX_NODES,
    MAX_STATES,
    OPS,
    CellGraph,
    CellNode,
)
from archvocab.spaces.nasbench_nlp.spec import (
    HPARAMS,
    SPEC_KIND,
    WIKITEXT2_VOCAB,
    RNNCellSpec,
    check_hparams,
)

__all__ = ["CellGraph", "RNNCellSpace", "RNNCellSpec"]

_TRIES = 200  # attempts of an operator before it falls back to a fresh sample


def _positive_ints(name: str, values: Any, limit: int) -> None:
    if (
        not isinstance(values, tuple)
        or not values
        or not all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= limit for v in values
        )
    ):
        raise InvalidSpec(
            name, f"must be a non-empty list of integers in 1..{limit}, got {values!r}"
        )


@dataclass(frozen=True)
class RNNCellSpace(Membership):
    """Cells of up to `max_nodes` nodes carrying one of `n_states` states, built from `ops`
    (a linear node with one of `linear_inputs` inputs), in a fixed language model.

    Defaults follow NAS-Bench-NLP: 1 to 3 states, up to 21 inner nodes plus the outputs,
    linear nodes over 2 or 3 inputs, all seven ops, the WikiText-2 model's sizes; every
    model of its WikiText-2 logs is a member.
    """

    kind: ClassVar[str] = SPEC_KIND
    n_states: tuple[int, ...] = (1, 2, 3)
    max_nodes: int = 24
    ops: tuple[str, ...] = tuple(OPS)
    linear_inputs: tuple[int, ...] = (2, 3)
    d_embed: int = 400
    d_hidden: int = 600
    n_layer: int = 3
    vocab_size: int = WIKITEXT2_VOCAB
    tied: bool = True

    def __post_init__(self) -> None:
        _positive_ints("n_states", self.n_states, MAX_STATES)
        _positive_ints("linear_inputs", self.linear_inputs, MAX_LINEAR_INPUTS)
        nodes = self.max_nodes
        if isinstance(nodes, bool) or not isinstance(nodes, int):
            raise InvalidSpec("max_nodes", f"must be an integer, got {nodes!r}")
        if not max(self.n_states) <= nodes <= MAX_NODES:
            raise InvalidSpec(
                "max_nodes", f"must be in {max(self.n_states)}..{MAX_NODES} (room for the outputs)"
            )
        known = isinstance(self.ops, tuple) and all(
            isinstance(o, str) and o in OPS for o in self.ops
        )
        if not known or not self.ops:
            raise InvalidSpec("ops", f"must be a non-empty list of: {', '.join(OPS)}")
        if "linear" not in self.ops:
            raise InvalidSpec("ops", "must include 'linear': only a linear node reads x")
        check_hparams(self)

    # -- operators ------------------------------------------------------------------------
    def sample(self, rng: random.Random) -> RNNCellSpec:
        """A random cell: states and inner-node count uniform, random ops and earlier inputs;
        dead nodes pruned; drawn again until valid."""
        for _ in range(100 * _TRIES):
            n_states = rng.choice(self.n_states)
            n_inner = rng.randint(0, self.max_nodes - n_states)
            nodes = random_nodes(rng, n_states, n_inner, self.ops, self.linear_inputs)
            spec = self._member(nodes)
            if spec is not None:
                return spec
        raise RuntimeError(f"no valid cell in {100 * _TRIES} draws from {self}")

    def mutate(self, spec: RNNCellSpec, rng: random.Random, p: float = 0.3) -> RNNCellSpec:
        """Per node, with probability p, a new op or a rewired input; with probability p a
        node inserted and one removed (`rnncell_edit.mutate_nodes`). Edits that leave an
        invalid cell, a non-member or the same cell are redrawn; a fresh sample if none fits."""
        for _ in range(_TRIES):
            nodes = mutate_nodes(
                rng, spec.cell.nodes, p, self.ops, self.linear_inputs, self.max_nodes
            )
            child = self._member(nodes)
            if child is not None and child.cell != spec.cell:
                return child
        return self.sample(rng)

    def crossover(
        self, a: RNNCellSpec, b: RNNCellSpec, rng: random.Random, p: float = 0.5
    ) -> RNNCellSpec:
        """Subtree crossover: with probability p the child grows from b with a sub-graph of
        a grafted in, else from a with one of b (`rnncell_edit.graft`). Grafts that leave an
        invalid cell or a non-member are redrawn; a fresh sample if none fits."""
        for _ in range(_TRIES):
            base, donor = (b, a) if rng.random() < p else (a, b)
            child = self._member(graft(rng, base.cell.nodes, donor.cell.nodes))
            if child is not None:
                return child
        return self.sample(rng)

    def check_member(self, spec: RNNCellSpec) -> None:
        """Raise InvalidSpec naming the first field (or cell node) outside this space."""
        if not isinstance(spec, RNNCellSpec):
            raise InvalidSpec("kind", f"{getattr(spec, 'kind', spec)!r} is not {SPEC_KIND!r}")
        for name in HPARAMS:
            if getattr(spec, name) != getattr(self, name):
                raise InvalidSpec(
                    name, f"{getattr(spec, name)!r} not allowed here: {getattr(self, name)!r}"
                )
        cell = spec.cell
        if cell.n_states not in self.n_states:
            raise InvalidSpec(
                "cell", f"carries {cell.n_states} states; allowed: {list(self.n_states)}"
            )
        if len(cell.nodes) > self.max_nodes:
            raise InvalidSpec("cell", f"has {len(cell.nodes)} nodes; at most {self.max_nodes}")
        for node in cell.nodes:
            if node.op not in self.ops:
                raise InvalidSpec(
                    "cell",
                    f"node {node.name!r}: op {node.op!r} not allowed; allowed: {list(self.ops)}",
                )
            if node.op == "linear" and len(node.inputs) not in self.linear_inputs:
                raise InvalidSpec(
                    "cell",
                    f"node {node.name!r}: a linear over {len(node.inputs)} inputs; "
                    f"allowed: {list(self.linear_inputs)}",
                )

    @property
    def max_seq_len(self) -> None:
        return None

    # -- plain data -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        return {"kind": self.kind, **data}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RNNCellSpace:
        if not isinstance(data, Mapping):
            raise InvalidSpec("space", f"must be a JSON object, got {type(data).__name__}")
        allowed = [f.name for f in fields(cls)]
        kwargs: dict[str, Any] = {}
        for name, value in data.items():
            if name == "kind":
                if value != cls.kind:
                    raise InvalidSpec("kind", f"{value!r} is not this space's kind {cls.kind!r}")
            elif name not in allowed:
                raise InvalidSpec(name, f"unknown setting; allowed: kind, {', '.join(allowed)}")
            elif name in ("n_states", "ops", "linear_inputs"):
                if not isinstance(value, (list, tuple)):
                    raise InvalidSpec(name, f"must be a list, got {value!r}")
                kwargs[name] = tuple(value)
            else:
                kwargs[name] = value
        return cls(**kwargs)

    # -- helpers --------------------------------------------------------------------------
    def _member(self, nodes: Sequence[CellNode]) -> RNNCellSpec | None:
        """The spec of these nodes in this space's model, or None if invalid or outside."""
        try:
            spec = RNNCellSpec(CellGraph(tuple(nodes)), **{k: getattr(self, k) for k in HPARAMS})
        except InvalidSpec:
            return None
        return spec if self.contains(spec) else None
