"""The space-kind contract, run over every registered kind (one suite, as Optuna's storages).

Whatever a kind's architecture, its specs round-trip through plain data with a stable id, its
operators return members of its space, its errors name the field, and its builder builds a
model whose parameters the analytic count predicts and which runs on the kind's own inputs.
"""

from __future__ import annotations

import json
import random

import pytest

from archvocab.errors import InvalidSpec
from archvocab.registry import get_kind, kind_names, parse_space, parse_spec

KINDS = kind_names()
SEEDS = range(6)


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest):
    return get_kind(request.param)


def test_the_registry_lists_gpt2_first_and_finds_each_kind_by_name() -> None:
    assert KINDS[0] == "gpt2"
    for name in KINDS:
        assert get_kind(name).name == name


@pytest.mark.parametrize("name", ["nope", "", None, 3])
def test_an_unknown_kind_lists_the_valid_ones(name: object) -> None:
    with pytest.raises(InvalidSpec) as info:
        get_kind(name)
    assert info.value.field == "kind" and f"allowed: {', '.join(KINDS)}" in info.value.message


def test_specs_round_trip_with_a_stable_id(kind) -> None:
    space = kind.parse_space({"kind": kind.name})
    for seed in SEEDS:
        spec = space.sample(random.Random(seed))
        data = spec.to_dict()
        assert data["kind"] == kind.name == spec.kind
        again = parse_spec(json.loads(json.dumps(data)))
        assert again == spec and again.arch_id == spec.arch_id
        assert again.canonical_json() == spec.canonical_json()
        assert len(spec.arch_id) == 16 and int(spec.arch_id, 16) >= 0


def test_operators_return_members(kind) -> None:
    space = kind.parse_space({"kind": kind.name})
    rng = random.Random(7)
    specs = [space.sample(rng) for _ in range(4)]
    for a, b in zip(specs, specs[1:]):
        for child in (space.mutate(a, rng), space.crossover(a, b, rng)):
            space.check_member(child)
            assert space.contains(child) and child.kind == kind.name


def test_spaces_round_trip_through_plain_data(kind) -> None:
    space = parse_space({"kind": kind.name})
    data = space.to_dict()
    assert data["kind"] == kind.name
    assert parse_space(json.loads(json.dumps(data))).to_dict() == data


def test_a_spec_of_another_kind_is_refused_by_name(kind) -> None:
    other = next((n for n in KINDS if n != kind.name), None)
    if other is None:
        pytest.skip("only one kind registered")
    spec = get_kind(other).parse_space({"kind": other}).sample(random.Random(0))
    with pytest.raises(InvalidSpec) as info:
        kind.parse_spec(spec.to_dict())
    assert info.value.field == "kind"


def test_counts_and_inputs_of_the_built_primer(kind) -> None:
    torch = pytest.importorskip("torch")
    from archvocab.spaces.gpt2.build import count_parameters

    builder = kind.load_builder()
    space = kind.parse_space({"kind": kind.name})
    for seed in range(3):
        primer = builder.primer_spec(space.sample(random.Random(seed)), seq_len=8)
        assert primer.kind == kind.name
        model = builder.build_model(primer).eval()
        assert count_parameters(model) == primer.total_params() >= primer.decoder_params() > 0
        generator = torch.Generator().manual_seed(0)
        inputs = builder.example_inputs(primer, 2, 8, generator)
        again = builder.example_inputs(primer, 2, 8, torch.Generator().manual_seed(0))
        assert all(torch.equal(a, b) for a, b in zip(inputs, again))  # seeded
        with torch.inference_mode():
            out = model(*inputs)
        first = out[0] if isinstance(out, tuple) else out
        assert first.shape[0] == 2 and torch.isfinite(first).all()
