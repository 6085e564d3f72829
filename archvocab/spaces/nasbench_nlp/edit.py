"""Random cells and graph edits for the NAS-Bench-NLP space's operators.

These functions only rearrange nodes; the result may be an invalid cell (an output that x
no longer reaches, a node reading x that is not linear, a cycle through a grafted output).
The space builds a CellGraph from it, which validates, and retries when it is not valid.

Edits work on nodes in topological order (a CellGraph's order) and draw a node's new inputs
only from the nodes before it, so they never close a cycle themselves.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from archvocab.spaces.nasbench_nlp.graph import (
    OPS,
    CellNode,
    X,
    output_index,
    state_input,
    state_output,
)

INSERTED = "inserted"  # the name a mutation gives its new node (canonical names differ)


def _pool(nodes: Sequence[CellNode], pos: int, n_states: int, op: str) -> list[str]:
    """What the node at `pos` may read: the states, earlier nodes and, if linear, x."""
    pool = [state_input(i) for i in range(n_states)] + [n.name for n in nodes[:pos]]
    return [X, *pool] if op == "linear" else pool


def _pick(rng: random.Random, pool: Sequence[str], count: int) -> list[str]:
    """`count` distinct names where the pool has enough, else with repeats."""
    if len(pool) >= count:
        return rng.sample(list(pool), count)
    return [rng.choice(pool) for _ in range(count)]


def _arity(rng: random.Random, op: str, linear_inputs: Sequence[int]) -> int:
    return rng.choice(linear_inputs) if op == "linear" else OPS[op][0]


def random_nodes(
    rng: random.Random,
    n_states: int,
    n_inner: int,
    ops: Sequence[str],
    linear_inputs: Sequence[int],
) -> list[CellNode]:
    """NAS-Bench-NLP-style generation: `n_inner` inner nodes, then the outputs in a random
    order (so an output may read another), each with a random op and random earlier inputs.
    Nodes no output reads are left in; the canonical form prunes them."""
    nodes: list[CellNode] = []
    outputs = [state_output(i) for i in rng.sample(range(n_states), n_states)]
    for name in [*(f"node_{j}" for j in range(n_inner)), *outputs]:
        op = rng.choice(ops)
        pool = _pool(nodes, len(nodes), n_states, op)
        nodes.append(CellNode(name, op, tuple(_pick(rng, pool, _arity(rng, op, linear_inputs)))))
    return nodes


def mutate_nodes(
    rng: random.Random,
    nodes: Sequence[CellNode],
    p: float,
    ops: Sequence[str],
    linear_inputs: Sequence[int],
    max_nodes: int,
) -> list[CellNode]:
    """Each node changes its op or one input with probability p; a node is inserted with
    probability p (if there is room) and one removed with probability p. At least one edit."""
    out = list(nodes)
    n_states = sum(output_index(n.name) is not None for n in nodes)
    edits = [pos for pos in range(len(out)) if rng.random() < p]
    insert = len(out) < max_nodes and rng.random() < p
    remove = rng.random() < p
    if not (edits or insert or remove):
        edits = [rng.randrange(len(out))]
    for pos in edits:
        change = rng.random() < 0.5
        edit = _change_op(rng, out, pos, n_states, ops, linear_inputs) if change else None
        out[pos] = edit or _rewire(rng, out, pos, n_states)
    if insert and len(out) < max_nodes:
        _insert(rng, out, n_states, ops, linear_inputs)
    if remove:
        _remove(rng, out)
    return out


def _change_op(
    rng: random.Random,
    nodes: Sequence[CellNode],
    pos: int,
    n_states: int,
    ops: Sequence[str],
    linear_inputs: Sequence[int],
) -> CellNode | None:
    """Another op for the node; it keeps the inputs it still may read, draws the rest."""
    node = nodes[pos]
    others = [op for op in ops if op != node.op]
    if not others:
        return None
    op = rng.choice(others)
    arity = _arity(rng, op, linear_inputs)
    pool = _pool(nodes, pos, n_states, op)
    kept = [name for name in node.inputs if name in pool]
    kept = rng.sample(kept, arity) if len(kept) > arity else kept
    fresh = [name for name in pool if name not in kept] or pool
    return CellNode(node.name, op, (*kept, *_pick(rng, fresh, arity - len(kept))))


def _rewire(rng: random.Random, nodes: Sequence[CellNode], pos: int, n_states: int) -> CellNode:
    """One input of the node reads another earlier node, state or x."""
    node = nodes[pos]
    slot = rng.randrange(len(node.inputs))
    pool = [name for name in _pool(nodes, pos, n_states, node.op) if name != node.inputs[slot]]
    if not pool:
        return node
    inputs = list(node.inputs)
    inputs[slot] = rng.choice(pool)
    return CellNode(node.name, node.op, tuple(inputs))


def _insert(
    rng: random.Random,
    nodes: list[CellNode],
    n_states: int,
    ops: Sequence[str],
    linear_inputs: Sequence[int],
) -> None:
    """A new random node before position `pos`; a later node reads it in one of its slots."""
    pos = rng.randrange(len(nodes))
    op = rng.choice(ops)
    pool = _pool(nodes, pos, n_states, op)
    nodes.insert(
        pos, CellNode(INSERTED, op, tuple(_pick(rng, pool, _arity(rng, op, linear_inputs))))
    )
    reader_pos = rng.randrange(pos + 1, len(nodes))
    reader = nodes[reader_pos]
    inputs = list(reader.inputs)
    inputs[rng.randrange(len(inputs))] = INSERTED
    nodes[reader_pos] = CellNode(reader.name, reader.op, tuple(inputs))


def _remove(rng: random.Random, nodes: list[CellNode]) -> None:
    """Drop an inner node; its readers read one of its inputs instead."""
    inner = [pos for pos, node in enumerate(nodes) if output_index(node.name) is None]
    if not inner:
        return
    gone = nodes.pop(rng.choice(inner))
    heir = rng.choice(gone.inputs)
    nodes[:] = [
        CellNode(n.name, n.op, tuple(heir if name == gone.name else name for name in n.inputs))
        for n in nodes
    ]


def graft(
    rng: random.Random, base: Sequence[CellNode], donor: Sequence[CellNode]
) -> list[CellNode]:
    """Subtree crossover on cells: a random node of `base` takes the op and the whole
    sub-graph (all ancestors) of a random node of `donor`. In the copied part x and h_prev_i
    stay themselves and a donor output h_new_i becomes the child's h_new_i (that may close a
    cycle, or read a state the child lacks: the caller's validation rejects both). The base's
    nodes that nothing reads any more are pruned by the canonical form."""
    target, source = rng.choice(base), rng.choice(donor)
    by_name = {n.name: n for n in donor}
    copied: dict[str, CellNode] = {}

    def copy(name: str) -> str:
        if name not in by_name or output_index(name) is not None:
            return name
        if name not in copied:
            node = by_name[name]
            copied[name] = CellNode(f"donor_{name}", node.op, tuple(copy(i) for i in node.inputs))
        return copied[name].name

    grafted = CellNode(target.name, source.op, tuple(copy(i) for i in source.inputs))
    return [*copied.values(), *(grafted if n.name == target.name else n for n in base)]
