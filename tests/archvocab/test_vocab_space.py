"""GPT2Space: every operator yields members, validation names the field, plain-data form."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from typing import Any

import pytest

from archvocab.errors import InvalidSpec
from archvocab.spaces.gpt2.space import GPT2Space, IntRange
from archvocab.spaces.gpt2.spec import GPT2Spec

SPACES = {
    "default": GPT2Space(),
    "released_code_factor": GPT2Space(d_inner_min_factor=1.7),
    "tiny": GPT2Space(
        n_layer=IntRange(2, 3),
        d_model=IntRange(64, 128, 64),
        d_inner=IntRange(128, 512, 64),
        d_embed=(64, 128),
        cutoffs=(200, 500),
        vocab_size=1000,
        n_positions=64,
    ),
    "eight_heads_only": GPT2Space(n_head=(8,), n_layer=IntRange(1, 4)),
    # Only d_model=192 has a head count dividing it (3); d_inner must reach 2.5 x 192 = 480.
    "one_usable_d_model": GPT2Space(
        n_layer=IntRange(1, 6),
        d_model=IntRange(64, 256, 64),
        d_inner=IntRange(100, 500, 20),
        d_inner_min_factor=2.5,
        n_head=(3,),
        cutoffs=(),
        div_val=(1,),
    ),
    "odd_steps": GPT2Space(
        n_layer=IntRange(1, 7, 3),
        d_model=IntRange(48, 240, 48),
        d_inner=IntRange(97, 1000, 37),
        d_inner_min_factor=1.3,
        n_head=(2, 3, 4, 6),
        d_embed=(16, 48),
        div_val=(1, 2, 4),
        cutoffs=(10,),
        vocab_size=100,
        n_positions=8,
    ),
}
SPACE_IDS = list(SPACES)


def assert_member(space: GPT2Space, spec: GPT2Spec) -> None:
    space.check_member(spec)  # raises InvalidSpec naming the offending gene
    assert space.contains(spec)
    assert all(d_inner >= space.d_inner_min_factor * spec.d_model for d_inner in spec.d_inner)
    assert all(spec.d_model % heads == 0 for heads in spec.n_head)


@pytest.mark.parametrize("name", SPACE_IDS)
def test_samples_are_members(name: str) -> None:
    space, rng = SPACES[name], random.Random(f"sample-{name}")
    specs = [space.sample(rng) for _ in range(2000)]
    for spec in specs:
        assert_member(space, spec)
    # Sampling actually explores the space rather than repeating itself.
    assert len({spec.n_layer for spec in specs}) == len(space.n_layer.values())
    assert {spec.d_embed for spec in specs} == set(space.d_embed)


@pytest.mark.parametrize("name", SPACE_IDS)
def test_mutants_and_children_are_members(name: str) -> None:
    space, rng = SPACES[name], random.Random(f"breed-{name}")
    population = [space.sample(rng) for _ in range(50)]
    for _ in range(1500):
        parent = rng.choice(population)
        mutant = space.mutate(parent, rng, p=rng.choice([0.1, 0.3, 0.7, 1.0]))
        assert_member(space, mutant)
        child = space.crossover(parent, rng.choice(population), rng, p=rng.random())
        assert_member(space, child)
        population[rng.randrange(len(population))] = rng.choice([mutant, child])


def test_d_inner_respects_the_factor_at_its_lower_edge() -> None:
    # 1.7 x 640 = 1088 exactly: that grid value is allowed, the one below is not.
    space = SPACES["released_code_factor"]
    spec = space.sample(random.Random(0))
    at_edge = replace(spec, d_model=640, d_inner=(1088,) * spec.n_layer, n_head=(8,) * spec.n_layer)
    assert space.contains(at_edge)
    below = replace(at_edge, d_inner=(1024,) * spec.n_layer)
    with pytest.raises(InvalidSpec) as info:
        space.check_member(below)
    assert info.value.field == "d_inner"


def test_crossover_between_parents_of_different_depths() -> None:
    space, rng = SPACES["default"], random.Random("depths")
    shallow = next(s for s in iter(lambda: space.sample(rng), None) if s.n_layer == 2)
    deep = next(s for s in iter(lambda: space.sample(rng), None) if s.n_layer == 16)
    deep = replace(
        deep,
        d_model=shallow.d_model,
        n_head=shallow.n_head[:1] * 16,
        d_inner=tuple(
            rng.choice(space.d_inner.values(lower=2 * shallow.d_model)) for _ in range(16)
        ),
    )
    depths = set()
    for _ in range(1000):
        a, b = (shallow, deep) if rng.random() < 0.5 else (deep, shallow)
        child = space.crossover(a, b, rng)
        assert_member(space, child)
        depths.add(child.n_layer)
        if child.d_model == shallow.d_model:
            # Uniform crossover: a layer both parents have comes from one of them.
            for i in range(min(child.n_layer, 2)):
                assert child.d_inner[i] in (a.d_inner[i], b.d_inner[i])
                assert child.n_head[i] in (a.n_head[i], b.n_head[i])
    assert depths == {2, 16}


def test_mutation_with_p0_is_identity_and_p1_changes_the_spec() -> None:
    space, rng = SPACES["default"], random.Random("p")
    for _ in range(300):
        spec = space.sample(rng)
        assert space.mutate(spec, rng, p=0.0) == spec
        assert space.mutate(spec, rng, p=1.0) != spec
    # p is per gene: at p=0.3 d_model survives about 0.7 + 0.3/15 of the time.
    parents = [space.sample(rng) for _ in range(1000)]
    kept = sum(space.mutate(s, rng, p=0.3).d_model == s.d_model for s in parents) / len(parents)
    assert 0.65 < kept < 0.8


def test_operators_are_deterministic_for_a_seed() -> None:
    space = SPACES["default"]

    def run(seed: int) -> list[str]:
        rng = random.Random(seed)
        a, b = space.sample(rng), space.sample(rng)
        return [s.arch_id for s in (a, b, space.mutate(a, rng), space.crossover(a, b, rng))]

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_check_member_names_the_gene() -> None:
    space = SPACES["tiny"]
    spec = space.sample(random.Random(3))
    cases = {
        "n_layer": replace(spec, n_layer=1, d_inner=spec.d_inner[:1], n_head=spec.n_head[:1]),
        "d_model": replace(spec, d_model=192, n_head=(2,) * spec.n_layer),
        "d_inner": replace(spec, d_inner=(spec.d_model * 2 + 1,) * spec.n_layer),
        "n_head": replace(spec, n_head=(1,) * spec.n_layer),
        "d_embed": replace(spec, d_embed=32),
        "div_val": replace(spec, div_val=3),
        "cutoffs": replace(spec, cutoffs=(200,)),
        "vocab_size": replace(spec, vocab_size=2000),
        "n_positions": replace(spec, n_positions=128),
    }
    for field, outsider in cases.items():
        with pytest.raises(InvalidSpec) as info:
            space.check_member(outsider)
        assert info.value.field == field
        assert not space.contains(outsider)


# -- validation -----------------------------------------------------------------------------
BAD_SPACES = [
    ({"n_layer": IntRange(5, 2)}, "n_layer.min", "must be <= max (2), got 5"),
    ({"d_model": IntRange(128, 1024, 0)}, "d_model.step", "must be a positive integer, got 0"),
    ({"d_inner": IntRange(0, 4096)}, "d_inner.min", "must be a positive integer, got 0"),
    ({"n_head": ()}, "n_head", "must be a non-empty list of positive integers"),
    ({"d_embed": (128, 0)}, "d_embed", "must be a non-empty list of positive integers"),
    ({"d_inner_min_factor": 0.0}, "d_inner_min_factor", "must be a number in (0, 64]"),
    ({"cutoffs": (500, 200)}, "cutoffs", "must be ascending and inside (0, vocab_size=50257)"),
    ({"cutoffs": (200, 500), "vocab_size": 400}, "cutoffs", "inside (0, vocab_size=400)"),
    ({"d_embed": (16,), "div_val": (8,)}, "div_val", "the smallest d_embed leaves a cluster"),
    (
        {"d_model": IntRange(1024, 1024), "d_inner": IntRange(256, 1024, 64)},
        "d_model",
        "no d_model in range has both a head count dividing it and a d_inner >= 2.0 x d_model "
        "within d_inner.max=1024",
    ),
    ({"n_head": (3,), "d_model": IntRange(64, 128, 64)}, "d_model", "no d_model in range"),
]


@pytest.mark.parametrize(("kwargs", "field", "fragment"), BAD_SPACES)
def test_invalid_spaces_name_the_field(kwargs: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        GPT2Space(**kwargs)
    assert info.value.field == field
    assert fragment in info.value.message


@pytest.mark.parametrize(
    ("data", "field", "fragment"),
    [
        ({"n_layers": {"min": 2}}, "n_layers", "unknown setting; allowed: kind, n_layer, d_model"),
        ({"d_model": 512}, "d_model", "must be an object with min, max, step"),
        ({"d_model": {"min": 64, "stride": 64}}, "d_model", "min, max, step"),
        ({"n_layer": {"min": 9, "max": 3}}, "n_layer.min", "must be <= max (3), got 9"),
        ({"n_head": []}, "n_head", "non-empty list"),
    ],
)
def test_from_dict_errors_name_the_setting(data: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        GPT2Space.from_dict(data)
    assert info.value.field == field
    assert fragment in info.value.message


# -- plain data -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", SPACE_IDS)
def test_to_dict_from_dict_round_trip(name: str) -> None:
    space = SPACES[name]
    data = json.loads(json.dumps(space.to_dict()))
    rebuilt = GPT2Space.from_dict(data)
    assert rebuilt == space
    assert rebuilt.to_dict() == space.to_dict()
    # Same behaviour, not only equal fields.
    rng_a, rng_b = random.Random(5), random.Random(5)
    assert [space.sample(rng_a) for _ in range(20)] == [rebuilt.sample(rng_b) for _ in range(20)]


def test_partial_range_overrides_keep_the_defaults() -> None:
    space = GPT2Space.from_dict({"n_layer": {"max": 4}, "d_inner_min_factor": 1.7})
    assert space.n_layer == IntRange(2, 4, 1)
    assert space.d_model == GPT2Space().d_model
    assert math.isclose(space.d_inner_min_factor, 1.7)
    assert GPT2Space.from_dict({}) == GPT2Space()
