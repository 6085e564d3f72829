"""Property-based tests (Hypothesis) of the vocabulary, over every registered space kind.

Hostile input: whatever JSON-like data arrives (garbage, or a valid spec or space with some
part broken), `parse_spec` / `parse_space` either return a sound object or raise InvalidSpec
naming the field; never TypeError, KeyError, RecursionError... and never the registry's
"cannot be read" safety net, which would mean a kind let an error slip past its own checks.

Identity: members of random spaces round-trip through JSON with the same stable id, and two
specs share an id only when they are equal.

Operators: for random spaces, seeds and probabilities, sampling, mutation and crossover return
members of the space, are deterministic for a seed, and keep their documented contracts
(p = 0 leaves the parent; children inherit their parents' genes).
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import random
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any
from unittest import mock

import pytest
from hypothesis import event, example, given, note, settings
from hypothesis import strategies as st

from archvocab.errors import InvalidSpec
from archvocab.grid import IntRange
from archvocab.registry import ArchSpec, kind_names, parse_space, parse_spec
from archvocab.spaces.flexibert.space import DEFAULT_OPERATIONS

KINDS = kind_names()
GRID_KINDS = ("gpt2", "transxl", "flexibert")  # gene-wise operators; nasbench_nlp edits graphs
HEX16 = re.compile(r"[0-9a-f]{16}")

# Every field and setting name of every kind (default space, one of its members, a layer).
_DEFAULTS = {kind: parse_space({"kind": kind}) for kind in KINDS}
SPEC_FIELDS = {
    kind: set(space.sample(random.Random(0)).to_dict()) for kind, space in _DEFAULTS.items()
}
SPACE_FIELDS = {kind: set(space.to_dict()) for kind, space in _DEFAULTS.items()}
_LAYER_FIELDS = set(_DEFAULTS["flexibert"].sample(random.Random(0)).to_dict()["layers"][0])
_NAMES = set().union(*SPEC_FIELDS.values(), *SPACE_FIELDS.values(), _LAYER_FIELDS)


# -- strategies: JSON-like garbage ------------------------------------------------------------
NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([0, -1, 1, 2, 3, 64, 255, 256, 1024, 2**31, 2**63, -(2**63), 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, 1.0, 2.0, -0.0, 1e308, 5e-324, math.nan, math.inf, -math.inf]),
)
WORDS = st.sampled_from(
    sorted(
        _NAMES
        | set(KINDS)
        | {"SA", "SDP", "WMA", "LT", "DFT", "DCT", "DSC", "linear", "blend", "activation_tanh"}
        | {"x", "h_prev_0", "h_new_0", "h_new_1", "node_0", "op", "input", "min", "max", "step"}
    )
)
TEXT = st.text(max_size=8) | WORDS
JSON = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=10,
)


def kinded(fields: dict[str, set[str]]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects of a registered kind whose keys are mostly that kind's own names."""
    return st.sampled_from(KINDS).flatmap(
        lambda kind: st.dictionaries(st.sampled_from(sorted(fields[kind])) | TEXT, JSON).map(
            lambda data: {**data, "kind": kind}
        )
    )


# -- strategies: random, sane search spaces of every kind --------------------------------------
def choices(values: list[Any], max_size: int = 3) -> st.SearchStrategy[list[Any]]:
    return st.lists(st.sampled_from(values), min_size=1, max_size=max_size, unique=True)


@st.composite
def grid_settings(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    """GPT-2 or Transformer-XL settings of a small grid where every d_model is usable."""
    step = draw(st.sampled_from([8, 16, 32]))
    d_lo = step * draw(st.integers(1, 4))
    d_hi = d_lo + step * draw(st.integers(0, 2))
    factor = draw(st.sampled_from([1, 1.5, 2.0, 2.5]))
    i_step = draw(st.sampled_from([8, 16, 24]))
    i_lo = i_step * draw(st.integers(1, 4))
    # On the grid and at least factor x the widest d_model, so every d_model has inners.
    i_hi = i_lo + i_step * (-(-max(0, math.ceil(factor * d_hi) - i_lo) // i_step))
    n_lo = draw(st.integers(1, 3))
    vocab = draw(st.integers(20, 2000))
    cutoffs = sorted(draw(st.lists(st.integers(1, vocab - 1), max_size=2, unique=True)))
    data: dict[str, Any] = {
        "kind": kind,
        "n_layer": {
            "min": n_lo,
            "max": n_lo + draw(st.integers(0, 2)),
            "step": draw(st.integers(1, 2)),
        },
        "d_model": {"min": d_lo, "max": d_hi, "step": step},
        "d_inner": {"min": i_lo, "max": i_hi + i_step * draw(st.integers(0, 2)), "step": i_step},
        "d_inner_min_factor": factor,
        "n_head": draw(choices([1, 2, 4, 8])),
        "d_embed": draw(choices([16, 32, 64])),
        "div_val": draw(choices([1, 2, 4])),
        "cutoffs": cutoffs,
        "vocab_size": vocab,
    }
    if kind == "gpt2":
        data["n_positions"] = draw(st.integers(1, 256))
    else:
        data["tgt_len"] = draw(st.integers(1, 128))
        data["mem_len"] = draw(st.integers(0, 64))
        data["pre_lnorm"] = draw(st.booleans())
        ties = st.lists(st.booleans(), min_size=len(cutoffs) + 1, max_size=len(cutoffs) + 1)
        data["tie_projs"] = draw(st.just([]) | ties)
    return data


@st.composite
def flexibert_settings(draw: st.DrawFn) -> dict[str, Any]:
    operations: dict[str, list[Any]] = {}
    for op_type, parameter in draw(choices([*DEFAULT_OPERATIONS, ("DSC", 3)], max_size=4)):
        operations.setdefault(op_type, []).append(parameter)
    return {
        "kind": "flexibert",
        "hidden_size": draw(choices([16, 32, 64])),
        "n_layer": draw(choices([1, 2, 3])),
        "operations": operations,
        "num_operation_heads": draw(choices([1, 2, 4])),
        "feed_forward_dimension": draw(choices([8, 16, 32])),
        "num_feed_forward": draw(choices([1, 2])),
        "vocab_size": draw(st.integers(8, 500)),
        "max_position_embeddings": draw(st.integers(4, 64)),
        "type_vocab_size": draw(st.integers(1, 3)),
        "embedding_size": draw(st.integers(4, 32)),
    }


@st.composite
def rnncell_settings(draw: st.DrawFn) -> dict[str, Any]:
    n_states = draw(choices([1, 2, 3]))
    others = ["activation_tanh", "activation_sigm", "elementwise_prod", "elementwise_sum", "blend"]
    return {
        "kind": "nasbench_nlp",
        "n_states": n_states,
        "max_nodes": draw(st.integers(max(n_states), 8)),
        "ops": ["linear", *draw(st.lists(st.sampled_from(others), unique=True, max_size=3))],
        "linear_inputs": draw(choices([1, 2, 3])),
        "d_embed": draw(st.integers(2, 16)),
        "d_hidden": draw(st.integers(2, 16)),
        "n_layer": draw(st.integers(1, 3)),
        "vocab_size": draw(st.integers(5, 100)),
        "tied": draw(st.booleans()),
    }


SPACE_SETTINGS = {
    "gpt2": grid_settings("gpt2"),
    "transxl": grid_settings("transxl"),
    "flexibert": flexibert_settings(),
    "nasbench_nlp": rnncell_settings(),
}
# Random small spaces of every kind, and now and then a kind's default space.
SPACES = st.one_of(*SPACE_SETTINGS.values(), st.sampled_from([{"kind": k} for k in KINDS]))
SEEDS = st.integers(0, 2**32)


def test_every_kind_has_a_space_strategy() -> None:
    assert set(SPACE_SETTINGS) == set(KINDS)


# -- strategies: breaking valid data ----------------------------------------------------------
def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path to every node of a JSON tree (the root first)."""
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


@st.composite
def corrupted(draw: st.DrawFn, data: dict[str, Any]) -> Any:
    """`data` with one to three nodes anywhere in it replaced by garbage, deleted, or given an
    extra key or item."""
    data = copy.deepcopy(data)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(data)))
        action = draw(st.sampled_from(["replace", "delete", "insert"]))
        if not path:
            if action == "replace":
                data = draw(JSON)
            continue
        *parent_path, last = path
        parent = data
        for step in parent_path:
            parent = parent[step]
        node = parent[last]
        if action == "replace":
            parent[last] = draw(JSON)
        elif action == "delete":
            del parent[last]
        elif isinstance(node, dict):
            node[draw(TEXT)] = draw(JSON)
        elif isinstance(node, list):
            node.insert(draw(st.integers(0, len(node))), draw(JSON))
        else:
            parent[last] = draw(JSON)
    return data


# -- what a sound result and a clean refusal are ----------------------------------------------
def check_refusal(exc: InvalidSpec, data: Any, known: set[str]) -> None:
    """A clean refusal names a field: one the kind knows, one the input sent, or the whole
    object ("spec"/"space") or its "kind"; and it comes from the kind's own checks."""
    note(f"refused: {exc}")
    sent = {key for key in data if isinstance(key, str)} if isinstance(data, dict) else set()
    assert isinstance(exc.field, str) and (exc.field or "" in sent)  # {"": 1}: field ""
    assert isinstance(exc.message, str) and exc.message
    assert str(exc) == f"{exc.field}: {exc.message}"
    assert not exc.message.startswith("cannot be read"), "a parser let an error slip"
    root = re.split(r"[.\[]", exc.field)[0]
    assert exc.field in sent or root in known | sent | {"kind", "spec", "space"}


def check_sound_spec(spec: ArchSpec) -> None:
    """Canonical JSON (no NaN), a round trip to an equal spec with the same id, counts."""
    assert isinstance(spec, ArchSpec) and spec.kind in KINDS
    text = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)
    assert text == spec.canonical_json()
    again = parse_spec(json.loads(text))
    assert again == spec and again.arch_id == spec.arch_id
    assert HEX16.fullmatch(spec.arch_id)
    decoder, total = spec.decoder_params(), spec.total_params()
    assert isinstance(decoder, int) and isinstance(total, int) and 0 <= decoder <= total
    assert spec.max_seq_len is None or spec.max_seq_len >= 1


def check_sound_space(space: Any) -> None:
    """Round-trips through JSON, and its operators give members."""
    data = space.to_dict()
    again = parse_space(json.loads(json.dumps(data, allow_nan=False)))
    assert again == space and again.to_dict() == data
    rng = random.Random(0)
    a, b = space.sample(rng), space.sample(rng)
    for spec in (a, b, space.mutate(a, rng), space.crossover(a, b, rng)):
        space.check_member(spec)
        assert spec.kind == space.kind


def spec_or_refusal(data: Any) -> ArchSpec | None:
    try:
        spec = parse_spec(data)
    except InvalidSpec as exc:
        kind = data.get("kind", "gpt2") if isinstance(data, dict) else None
        check_refusal(exc, data, SPEC_FIELDS.get(kind, set()) if isinstance(kind, str) else set())
        event("refused")
        return None
    event("accepted")
    check_sound_spec(spec)
    return spec


def space_or_refusal(data: Any) -> Any:
    try:
        space = parse_space(data)
    except InvalidSpec as exc:
        kind = data.get("kind", "gpt2") if isinstance(data, dict) else None
        known = SPACE_FIELDS.get(kind, set()) if isinstance(kind, str) else set()
        check_refusal(exc, data, known)
        event("refused")
        return None
    event("accepted")
    check_sound_space(space)
    return space


# -- hostile input ----------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(data=JSON | kinded(SPEC_FIELDS))
# A recepie may arrive as JSON text; nesting beyond Python's recursion limit raised
# RecursionError, and an integer of over 4300 digits the registry's "cannot be read".
@example(data={"kind": "nasbench_nlp", "cell": "[" * 100_000})
@example(data={"kind": "nasbench_nlp", "cell": '{"h_new_0": ' + "9" * 5000 + "}"})
def test_any_json_is_a_sound_spec_or_refused_naming_a_field(data: Any) -> None:
    spec_or_refusal(data)


@settings(max_examples=200, deadline=None)
@given(data=JSON | kinded(SPACE_FIELDS))
@example(data={"kind": "flexibert", "operations": {"DSC": [257]}})  # was refused as "kernel"
@example(data={"kind": "gpt2", "n_layer": {"min": 1, "max": 10**400}})
def test_any_json_is_a_sound_space_or_refused_naming_a_field(data: Any) -> None:
    space_or_refusal(data)


@settings(max_examples=250, deadline=None)
@given(settings_=SPACES, seed=SEEDS, data=st.data())
def test_a_broken_member_is_sound_or_refused_naming_a_field(
    settings_: dict[str, Any], seed: int, data: st.DataObject
) -> None:
    spec = parse_space(settings_).sample(random.Random(seed))
    spec_or_refusal(data.draw(corrupted(spec.to_dict()), label="broken spec"))


@settings(max_examples=150, deadline=None)
@given(settings_=SPACES, data=st.data())
def test_broken_space_settings_are_sound_or_refused_naming_a_field(
    settings_: dict[str, Any], data: st.DataObject
) -> None:
    full = parse_space(settings_).to_dict()  # every setting, so any of them can break
    space_or_refusal(data.draw(corrupted(full), label="broken settings"))


# Each top-level spec field's type, and values of any other JSON type.
_NOT_INT = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(),
    st.text(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_NOT_BOOL = st.one_of(
    st.none(), st.integers(), st.floats(), st.text(max_size=4), st.lists(st.booleans(), max_size=2)
)


def _list_with(bad: st.SearchStrategy[Any], good: st.SearchStrategy[Any]) -> st.SearchStrategy:
    """A list of `good` values with one `bad` value somewhere in it."""
    return st.tuples(st.lists(good, max_size=3), bad, st.integers(0, 3)).map(
        lambda t: [*t[0][: t[2]], t[1], *t[0][t[2] :]]
    )


_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4)
_OBJECTS = st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
WRONG = {
    "int": _NOT_INT,
    "ints": _SCALARS | _OBJECTS | _list_with(_NOT_INT, st.integers(1, 64)),
    "bool": _NOT_BOOL,
    "bools": _SCALARS | _OBJECTS | _list_with(_NOT_BOOL, st.booleans()),
    "layers": _SCALARS | _OBJECTS | _list_with(_SCALARS | st.lists(_SCALARS), _OBJECTS),
    "cell": st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.lists(_SCALARS),
}
_INTS = ("n_layer", "d_model", "d_embed", "div_val", "vocab_size")
FIELD_TYPES: dict[str, dict[str, str]] = {
    "gpt2": {
        **dict.fromkeys((*_INTS, "n_positions"), "int"),
        **dict.fromkeys(("d_inner", "n_head", "cutoffs"), "ints"),
    },
    "transxl": {
        **dict.fromkeys((*_INTS, "tgt_len", "mem_len"), "int"),
        **dict.fromkeys(("d_inner", "n_head", "d_head", "cutoffs"), "ints"),
        "tie_projs": "bools",
        "pre_lnorm": "bool",
    },
    "flexibert": {
        **dict.fromkeys(("hidden_size", "n_layer", "vocab_size", "embedding_size"), "int"),
        **dict.fromkeys(("max_position_embeddings", "type_vocab_size"), "int"),
        "layers": "layers",
    },
    "nasbench_nlp": {
        **dict.fromkeys(("d_embed", "d_hidden", "n_layer", "vocab_size"), "int"),
        "tied": "bool",
        "cell": "cell",
    },
}
REQUIRED = {
    "gpt2": ("n_layer", "d_model", "d_inner", "n_head", "d_embed"),
    "transxl": ("n_layer", "d_model", "d_inner", "n_head", "d_embed"),
    "flexibert": ("hidden_size", "n_layer", "layers"),
    "nasbench_nlp": ("cell",),
}


def test_the_field_tables_cover_every_spec_field() -> None:
    for kind in KINDS:
        assert set(FIELD_TYPES[kind]) == SPEC_FIELDS[kind] - {"kind"}
        assert set(REQUIRED[kind]) <= set(FIELD_TYPES[kind])


def names(exc: InvalidSpec, field: str) -> bool:
    return exc.field == field or exc.field.startswith((f"{field}.", f"{field}["))


@settings(max_examples=300, deadline=None)
@given(settings_=SPACES, seed=SEEDS, data=st.data())
def test_one_field_of_the_wrong_type_is_refused_by_its_name(
    settings_: dict[str, Any], seed: int, data: st.DataObject
) -> None:
    spec = parse_space(settings_).sample(random.Random(seed))
    field = data.draw(st.sampled_from(sorted(FIELD_TYPES[spec.kind])), label="field")
    value = data.draw(WRONG[FIELD_TYPES[spec.kind][field]], label="value")
    with pytest.raises(InvalidSpec) as info:
        parse_spec({**spec.to_dict(), field: value})
    assert names(info.value, field), str(info.value)


@settings(max_examples=200, deadline=None)
@given(settings_=SPACES, seed=SEEDS, data=st.data())
def test_missing_unknown_and_non_positive_fields_are_refused_by_name(
    settings_: dict[str, Any], seed: int, data: st.DataObject
) -> None:
    spec = parse_space(settings_).sample(random.Random(seed))
    good = spec.to_dict()
    missing = data.draw(st.sampled_from(REQUIRED[spec.kind]), label="missing")
    with pytest.raises(InvalidSpec) as info:
        parse_spec({k: v for k, v in good.items() if k != missing})
    assert info.value.field == missing and "required" in info.value.message

    unknown = data.draw(TEXT.filter(lambda k: k not in good), label="unknown")
    with pytest.raises(InvalidSpec) as info:
        parse_spec({**good, unknown: data.draw(JSON)})
    assert info.value.field == unknown and "unknown" in info.value.message

    ints = [f for f, t in FIELD_TYPES[spec.kind].items() if t == "int"]
    field = data.draw(st.sampled_from(ints), label="non-positive")
    least = 0 if field == "mem_len" else 1  # a Transformer-XL may run without memory
    value = data.draw(st.integers(max_value=least - 1) | st.just(-(10**400)), label="value")
    with pytest.raises(InvalidSpec) as info:
        parse_spec({**good, field: value})
    assert info.value.field == field


def test_hostile_sizes_are_refused_quickly() -> None:
    # div_val ** len(cutoffs) was computed in full: 20,000 cutoffs and a 300-digit div_val
    # (a 150 kB request) took seconds, and the time grows faster than the request.
    for kind in ("gpt2", "transxl"):
        spec = {"kind": kind, "n_layer": 1, "d_model": 8, "d_inner": [8], "n_head": [1]}
        hostile = {**spec, "d_embed": 8, "div_val": 10**300, "vocab_size": 10**9}
        hostile["cutoffs"] = list(range(1, 20_001))
        start = time.perf_counter()
        with pytest.raises(InvalidSpec) as info:
            parse_spec(hostile)
        assert info.value.field == "div_val"
        assert time.perf_counter() - start < 0.5


def test_the_widest_grid_allowed_is_built_quickly() -> None:
    # Finding the usable d_models listed d_inner's grid for each of them: 14 s for this space.
    start = time.perf_counter()
    space = parse_space(
        {
            "d_model": {"min": 1, "max": 16384, "step": 1},
            "d_inner": {"min": 1, "max": 65536, "step": 1},
            "n_head": [1],
            "d_inner_min_factor": 1e-9,
        }
    )
    assert time.perf_counter() - start < 0.5
    space.check_member(space.sample(random.Random(0)))


@settings(max_examples=200, deadline=None)
@given(
    low=st.integers(1, 50),
    span=st.integers(0, 50),
    step=st.integers(1, 9),
    lower=st.integers(-5, 120),
)
def test_an_int_range_reaches_a_bound_exactly_when_it_lists_a_value_past_it(
    low: int, span: int, step: int, lower: int
) -> None:
    grid = IntRange(low, low + span, step)
    values = grid.values(lower=lower)
    assert grid.reaches(lower) == bool(values)
    assert values == [v for v in grid.values() if v >= lower]


# -- identity ---------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(settings_=SPACES, seeds=st.lists(SEEDS, min_size=2, max_size=5, unique=True))
def test_members_round_trip_with_stable_ids_shared_only_by_equal_specs(
    settings_: dict[str, Any], seeds: list[int]
) -> None:
    space = parse_space(settings_)
    specs = [space.sample(random.Random(seed)) for seed in seeds]
    assert space.sample(random.Random(seeds[0])) == specs[0]  # deterministic for a seed
    for spec in specs:
        check_sound_spec(spec)
        space.check_member(spec)
        assert spec.kind == space.kind
        backwards = dict(reversed(list(spec.to_dict().items())))  # key order is no part of it
        assert parse_spec(backwards).arch_id == spec.arch_id
    for a, b in itertools.combinations(specs, 2):
        assert (a == b) == (a.arch_id == b.arch_id) == (a.canonical_json() == b.canonical_json())


@settings(max_examples=100, deadline=None)
@given(settings_=SPACES)
def test_spaces_round_trip_through_json(settings_: dict[str, Any]) -> None:
    space = parse_space(settings_)
    data = space.to_dict()
    assert data["kind"] == settings_["kind"]
    again = parse_space(json.loads(json.dumps(data, allow_nan=False)))
    assert again == space and again.to_dict() == data


# -- mutation ---------------------------------------------------------------------------------
PROBABILITIES = st.sampled_from([0.0, 0.1, 0.3, 0.5, 1.0]) | st.floats(0, 1)


@contextmanager
def fresh_samples(space: Any) -> Iterator[list[ArchSpec]]:
    """The samples drawn inside the block. NAS-Bench-NLP's operators draw one only as their
    fallback, when no edit or graft fits the space (as their docstrings say); GPT-2's
    mutation draws one to take resampled genes from."""
    drawn: list[ArchSpec] = []
    sample = type(space).sample

    def spy(self: Any, rng: random.Random) -> ArchSpec:
        drawn.append(sample(self, rng))
        return drawn[-1]

    with mock.patch.object(type(space), "sample", spy):
        yield drawn


def mutant(space: Any, seed: int, p: float) -> tuple[ArchSpec, ArchSpec, bool]:
    """(parent, mutant, whether the mutant is a fallback sample)."""
    rng = random.Random(seed)
    parent = space.sample(rng)
    with fresh_samples(space) as drawn:
        child = space.mutate(parent, rng, p)
    return parent, child, space.kind == "nasbench_nlp" and bool(drawn)


@settings(max_examples=200, deadline=None)
@given(settings_=SPACES, seed=SEEDS, p=PROBABILITIES)
def test_mutants_are_members_and_deterministic_for_a_seed(
    settings_: dict[str, Any], seed: int, p: float
) -> None:
    space = parse_space(settings_)
    parent, child, fallback = mutant(space, seed, p)
    space.check_member(child)
    assert child.kind == parent.kind
    assert mutant(space, seed, p) == (parent, child, fallback)
    if space.kind in GRID_KINDS and p == 0.0:
        assert child == parent  # no gene drawn for resampling
    if (
        space.kind == "nasbench_nlp" and not fallback
    ):  # at least one edit, redrawn until the cell differs
        assert child.cell != parent.cell


@settings(max_examples=100, deadline=None)
@given(settings_=SPACES, seed=SEEDS)
def test_mutation_moves_off_the_parent_in_any_space_of_two_or_more_members(
    settings_: dict[str, Any], seed: int
) -> None:
    """With p = 1 every gene is redrawn: in a space with more than one member a mutant stays
    the parent at most half the time, so 32 tries all staying is a bug (odds 2**-32).
    (At p < 1 a grid kind's mutant may repeat its parent; the engines retry until new.)"""
    space = parse_space(settings_)
    rng = random.Random(seed)
    parent = space.sample(rng)
    others = {space.sample(rng).arch_id for _ in range(30)} - {parent.arch_id}
    note(f"other members found: {len(others)}")
    moved = any(space.mutate(parent, random.Random(i), 1.0) != parent for i in range(32))
    assert moved or not others


# -- crossover --------------------------------------------------------------------------------
def crossed(space: Any, seed: int, p: float) -> tuple[ArchSpec, ArchSpec, ArchSpec, bool]:
    """(parent a, parent b, child, whether the child is a fallback sample)."""
    rng = random.Random(seed)
    a, b = space.sample(rng), space.sample(rng)
    with fresh_samples(space) as drawn:
        child = space.crossover(a, b, rng, p)
    return a, b, child, space.kind == "nasbench_nlp" and bool(drawn)


def allowed_in(space: Any, child: Any, gene: str, layer: int, value: int) -> bool:
    """Would the child still be a member with `value` for `gene` at `layer`?"""
    values = list(getattr(child, gene))
    values[layer] = value
    return bool(space.contains(replace(child, **{gene: tuple(values)})))


def check_grid_inheritance(space: Any, a: Any, b: Any, child: Any) -> None:
    """GPT-2 / Transformer-XL: whole-model genes come from a parent; a layer's genes where
    both parents have the layer come from one of them, or were redrawn because the child's
    d_model rules out a parent's value. (Layers deeper than a parent are redrawn: a spec
    carries no genes beyond its depth.)"""
    for gene in ("n_layer", "d_model", "d_embed", "div_val"):
        assert getattr(child, gene) in (getattr(a, gene), getattr(b, gene)), gene
    for i in range(min(a.n_layer, b.n_layer, child.n_layer)):
        for gene in ("d_inner", "n_head"):
            offered = {getattr(a, gene)[i], getattr(b, gene)[i]}
            repaired = any(not allowed_in(space, child, gene, i, v) for v in offered)
            assert getattr(child, gene)[i] in offered or repaired, (gene, i)


def check_flexibert_inheritance(space: Any, a: Any, b: Any, child: Any) -> None:
    """FlexiBERT: every gene comes from a parent that has it (heads are redrawn only when the
    inherited count does not divide the child's hidden size)."""
    assert child.hidden_size in (a.hidden_size, b.hidden_size)
    assert child.n_layer in (a.n_layer, b.n_layer)
    for i, layer in enumerate(child.layers):
        parents = [p.layers[i] for p in (a, b) if p.n_layer > i]
        assert layer.operation in {p.operation for p in parents}
        for gene in ("feed_forward_dimension", "num_feed_forward"):
            assert getattr(layer, gene) in {getattr(p, gene) for p in parents}, (gene, i)
        heads = {p.num_operation_heads for p in parents}
        repaired = any(child.hidden_size % h for h in heads)
        assert layer.num_operation_heads in heads or repaired


def check_cell_inheritance(space: Any, a: Any, b: Any, child: Any) -> None:
    """NAS-Bench-NLP: a graft copies ops from the parents, so the child has no op neither
    parent has."""
    assert child.cell.ops() <= a.cell.ops() | b.cell.ops()


INHERITANCE = {
    "gpt2": check_grid_inheritance,
    "transxl": check_grid_inheritance,
    "flexibert": check_flexibert_inheritance,
    "nasbench_nlp": check_cell_inheritance,
}


@settings(max_examples=200, deadline=None)
@given(settings_=SPACES, seed=SEEDS, p=PROBABILITIES)
def test_children_are_members_of_their_parents_genes_and_deterministic(
    settings_: dict[str, Any], seed: int, p: float
) -> None:
    space = parse_space(settings_)
    a, b, child, fallback = crossed(space, seed, p)
    space.check_member(child)
    assert child.kind == space.kind
    assert crossed(space, seed, p) == (a, b, child, fallback)
    if not fallback:
        INHERITANCE[space.kind](space, a, b, child)


@settings(max_examples=100, deadline=None)
@given(settings_=st.one_of(*(SPACE_SETTINGS[k] for k in GRID_KINDS)), seed=SEEDS)
def test_crossover_with_p_zero_or_one_gives_back_a_parent(
    settings_: dict[str, Any], seed: int
) -> None:
    space = parse_space(settings_)
    rng = random.Random(seed)
    a, b = space.sample(rng), space.sample(rng)
    assert space.crossover(a, b, rng, 0.0) == a
    assert space.crossover(a, b, rng, 1.0) == b
