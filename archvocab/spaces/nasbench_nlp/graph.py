"""The NAS-Bench-NLP recurrent cell as a graph: parsing, validation and canonical form.

A cell is what NAS-Bench-NLP calls a `recepie`: a JSON object mapping each node's name to
``{"op": ..., "input": [...]}``. The cell reads ``x`` (the layer's input at this time step)
and ``h_prev_i`` (the states it carried from the previous step) and writes ``h_new_i`` (the
next states; ``h_new_0`` is also what the layer outputs). Every node outputs a hidden-width
vector; only a linear node may read ``x``, whose width differs.

A valid cell is acyclic, names only known ops and nodes, gives every op its number of inputs,
writes ``h_new_0 .. h_new_{k-1}`` without gaps, reads no state beyond them, and lets ``x``
reach every output within the step or through a state ``x`` reaches (else it is a clock).

The canonical form drops the nodes that are on no path to an output, lists the inputs of
the commutative ops (linear, sum, product) in a structural order, and renames the inner
nodes ``node_0, node_1, ...`` in the order a depth-first walk from the outputs meets them. So
recepies that differ only in dead nodes, inner node names or the order of a commutative op's
inputs share one canonical form (and arch_id).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from archvocab.errors import InvalidSpec

X = "x"
# Sanity ceilings for specs that arrive over HTTP; the depth-first walks recurse per node.
MAX_NODES = 128
MAX_STATES = 16
MAX_LINEAR_INPUTS = 16

# op -> (fewest inputs, most inputs)
OPS: dict[str, tuple[int, int]] = {
    "linear": (1, MAX_LINEAR_INPUTS),
    "activation_tanh": (1, 1),
    "activation_sigm": (1, 1),
    "activation_leaky_relu": (1, 1),
    "elementwise_prod": (2, 2),
    "elementwise_sum": (2, 2),
    "blend": (3, 3),  # a * b + (1 - a) * c
}
COMMUTATIVE = frozenset({"linear", "elementwise_prod", "elementwise_sum"})

_OUTPUT = re.compile(r"h_new_(0|[1-9][0-9]*)")
_STATE = re.compile(r"h_prev_(0|[1-9][0-9]*)")


def state_input(i: int) -> str:
    return f"h_prev_{i}"


def state_output(i: int) -> str:
    return f"h_new_{i}"


def output_index(name: str) -> int | None:
    """i for an output ``h_new_i``; None for any other name."""
    match = _OUTPUT.fullmatch(name)
    return int(match.group(1)) if match else None


def is_cell_input(name: str) -> bool:
    return name == X or _STATE.fullmatch(name) is not None


def _fail(message: str) -> InvalidSpec:
    return InvalidSpec("cell", message)


@dataclass(frozen=True)
class CellNode:
    """One node: its name, its op and the names of its inputs, in order."""

    name: str
    op: str
    inputs: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise _fail(f"node names must be non-empty strings, got {self.name!r}")
        if not isinstance(self.op, str):
            raise _fail(f"node {self.name!r}: op must be a string, got {self.op!r}")
        if not isinstance(self.inputs, tuple) or not all(isinstance(i, str) for i in self.inputs):
            raise _fail(f"node {self.name!r}: input must be a list of node names")


@dataclass(frozen=True)
class CellGraph:
    """A validated cell in canonical form (construction validates and canonicalizes).

    ``nodes`` are in topological order: every node after its inputs.
    """

    nodes: tuple[CellNode, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.nodes, tuple) or not all(
            isinstance(n, CellNode) for n in self.nodes
        ):
            raise _fail("must be a tuple of CellNode")
        object.__setattr__(self, "nodes", canonical_nodes(self.nodes))

    @classmethod
    def from_recepie(cls, recepie: Mapping[str, Any] | str) -> CellGraph:
        """Parse a NAS-Bench-NLP recepie (a mapping, or its JSON text as in the logs)."""
        return cls(parse_recepie(recepie))

    def to_recepie(self) -> dict[str, dict[str, Any]]:
        """The canonical recepie: NAS-Bench-NLP's format, nodes in topological order."""
        return {n.name: {"op": n.op, "input": list(n.inputs)} for n in self.nodes}

    @property
    def n_states(self) -> int:
        """How many states the cell carries from step to step (its h_new_i outputs)."""
        return sum(output_index(n.name) is not None for n in self.nodes)

    def ops(self) -> set[str]:
        return {n.op for n in self.nodes}


def parse_recepie(recepie: Mapping[str, Any] | str) -> tuple[CellNode, ...]:
    """Recepie -> nodes, checking only its shape (CellGraph checks the graph)."""
    if isinstance(recepie, str):
        try:
            recepie = json.loads(recepie)
        except (ValueError, RecursionError) as exc:
            # Not only JSONDecodeError: text nested deeper than the recursion limit raises
            # RecursionError, an integer of more than 4300 digits a plain ValueError.
            raise _fail(f"is not valid JSON: {exc}") from None
    if not isinstance(recepie, Mapping):
        raise _fail("must be a JSON object mapping node names to {op, input}")
    nodes = []
    for name, entry in recepie.items():
        if not isinstance(entry, Mapping) or set(entry) != {"op", "input"}:
            raise _fail(f"node {name!r}: must be an object with exactly the keys op and input")
        inputs = entry["input"]
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
            raise _fail(f"node {name!r}: input must be a list of node names, got {inputs!r}")
        nodes.append(CellNode(name, entry["op"], tuple(inputs)))
    return tuple(nodes)


def canonical_nodes(nodes: Sequence[CellNode]) -> tuple[CellNode, ...]:
    """Validate `nodes` as a cell; return its canonical form (see the module docstring)."""
    n_states = _check_nodes(nodes)
    by_name = {n.name: n for n in nodes}
    _check_acyclic(by_name, n_states)
    _check_reachable(by_name, n_states)
    return _canonical(by_name, n_states)


# -- validation -------------------------------------------------------------------------------
def _check_nodes(nodes: Sequence[CellNode]) -> int:
    """Names, ops, arities and inputs; returns the number of states."""
    if len(nodes) > MAX_NODES:
        raise _fail(f"has {len(nodes)} nodes; at most {MAX_NODES}")
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise _fail(f"node {node.name!r} is defined twice")
        seen.add(node.name)
        _check_op(node)
    n_states = _check_outputs(nodes)
    known = seen | {X} | {state_input(i) for i in range(n_states)}
    for node in nodes:
        for name in node.inputs:
            if name == X and node.op != "linear":
                raise _fail(
                    f"node {node.name!r}: op {node.op!r} cannot read x directly; only a linear "
                    "node reads the layer input (its width is not the hidden width)"
                )
            if name not in known:
                states = ", ".join(state_input(i) for i in range(n_states))
                raise _fail(
                    f"node {node.name!r}: unknown input {name!r}; inputs are x, {states} "
                    "or a node of the cell"
                )
    return n_states


def _check_op(node: CellNode) -> None:
    if is_cell_input(node.name):
        raise _fail(f"node {node.name!r}: x and h_prev_<i> name the cell's inputs, not nodes")
    if re.fullmatch(r"h_new_[0-9]+", node.name) and output_index(node.name) is None:
        raise _fail(f"node {node.name!r}: write an output as h_new_<i> without leading zeros")
    if node.op not in OPS:
        raise _fail(f"node {node.name!r}: unknown op {node.op!r}; allowed: {', '.join(OPS)}")
    low, high = OPS[node.op]
    if not low <= len(node.inputs) <= high:
        wanted = str(low) if low == high else f"{low} to {high}"
        raise _fail(
            f"node {node.name!r}: op {node.op!r} takes {wanted} inputs, got {len(node.inputs)}"
        )


def _check_outputs(nodes: Iterable[CellNode]) -> int:
    indices = {i for i in (output_index(n.name) for n in nodes) if i is not None}
    if len(indices) > MAX_STATES:
        raise _fail(f"writes {len(indices)} states; at most {MAX_STATES}")
    for i in range(max(indices, default=0) + 1):
        if i not in indices:
            written = ", ".join(state_output(j) for j in sorted(indices)) or "no output"
            raise _fail(
                f"output {state_output(i)!r} is missing; states are numbered from 0 without "
                f"gaps (the cell writes {written})"
            )
    return len(indices)


def _check_acyclic(by_name: Mapping[str, CellNode], n_states: int) -> None:
    """Depth-first from the outputs, then every other node; name the first cycle met."""
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> None:
        if name in done or name not in by_name:
            return
        if name in path:
            through = path[-1]
            if through == name:
                raise _fail(f"node {name!r} takes itself as an input")
            raise _fail(f"node {name!r} depends on itself through {through!r}")
        path.append(name)
        for source in by_name[name].inputs:
            visit(source)
        path.pop()
        done.add(name)

    for name in [*(state_output(i) for i in range(n_states)), *by_name]:
        visit(name)


def _check_reachable(by_name: Mapping[str, CellNode], n_states: int) -> None:
    """x must reach every output, within the step or through a state that x reaches."""
    sources: dict[str, frozenset[str]] = {}

    def cell_inputs(name: str) -> frozenset[str]:
        if name not in by_name:
            return frozenset({name})
        if name not in sources:
            sources[name] = frozenset().union(*(cell_inputs(i) for i in by_name[name].inputs))
        return sources[name]

    reached = {i for i in range(n_states) if X in cell_inputs(state_output(i))}
    grew = True
    while grew:  # a state x reaches carries x into every output that reads it
        fed = {state_input(i) for i in reached}
        new = {
            i for i in range(n_states) if i not in reached and cell_inputs(state_output(i)) & fed
        }
        reached |= new
        grew = bool(new)
    for out in (state_output(i) for i in range(n_states) if i not in reached):
        raise _fail(
            f"output {out!r} is not reachable from the inputs: x reaches it neither "
            "within the step nor through a state that x reaches"
        )


# -- canonical form ---------------------------------------------------------------------------
def _canonical(by_name: Mapping[str, CellNode], n_states: int) -> tuple[CellNode, ...]:
    keys: dict[str, str] = {}

    def key(name: str) -> str:
        """A name-free structural key (outputs and cell inputs are keyed by their names)."""
        if name not in by_name or output_index(name) is not None:
            return name
        if name not in keys:
            node = by_name[name]
            children = ",".join(key(i) for i in sorted_inputs(node))
            keys[name] = hashlib.sha256(f"{node.op}({children})".encode()).hexdigest()
        return keys[name]

    def sorted_inputs(node: CellNode) -> list[str]:
        if node.op not in COMMUTATIVE:
            return list(node.inputs)
        return sorted(node.inputs, key=key)  # stable: structural ties keep their order

    order: dict[str, None] = {}  # insertion-ordered set: the depth-first post-order

    def visit(name: str) -> None:
        if name in order or name not in by_name:
            return
        for source in sorted_inputs(by_name[name]):
            visit(source)
        order[name] = None

    for i in range(n_states):
        visit(state_output(i))
    inner = [name for name in order if output_index(name) is None]
    rename = {name: f"node_{k}" for k, name in enumerate(inner)}
    return tuple(
        CellNode(
            rename.get(name, name),
            by_name[name].op,
            tuple(rename.get(i, i) for i in sorted_inputs(by_name[name])),
        )
        for name in order
    )
