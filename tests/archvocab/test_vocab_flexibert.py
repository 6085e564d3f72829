"""The FlexiBERT space kind: its size, specs, operators, counts, builder and the benchmark.

The benchmark tests read ../shared/data/tfnas (500 trained FlexiBERT encoders) and skip
cleanly where it is missing.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import replace
from types import ModuleType
from typing import Any

import pytest

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec, get_kind, parse_space, parse_spec
from archvocab.spaces.flexibert.space import DEFAULT_OPERATIONS, FlexiBERTSpace
from archvocab.spaces.flexibert.spec import (
    EncoderLayer,
    FlexiBERTSpec,
    operation_params,
    parameter_count,
)
from hwnas.ground_truth import ground_truth_dir

TFNAS_DIR = ground_truth_dir() / "tfnas"
PAPER_SIZE = 10_621_440  # "Training-free NAS for RNNs and Transformers", Table 1

SPACES = {
    "paper": FlexiBERTSpace(),
    # Depths differ by more than one layer, and head 3 divides only one hidden size: the
    # operators must repair heads when the hidden size changes.
    "odd": FlexiBERTSpace(
        hidden_size=(96, 128),
        n_layer=(1, 3, 6),
        operations=(("SA", "WMA"), ("LT", "DCT"), ("DSC", 3), ("DSC", 7)),
        num_operation_heads=(2, 3, 4),
        feed_forward_dimension=(64, 96),
        num_feed_forward=(1, 2, 4),
        vocab_size=500,
        max_position_embeddings=64,
        embedding_size=96,
    ),
}


def layer(
    op: tuple[str, str | int] = ("SA", "SDP"), heads: int = 2, ff: int = 512, stacks: int = 1
):
    return EncoderLayer(op[0], op[1], heads, ff, stacks)


def small_spec(*layers: EncoderLayer, hidden: int = 32, embedding: int = 16) -> FlexiBERTSpec:
    return FlexiBERTSpec(
        hidden_size=hidden,
        n_layer=len(layers),
        layers=layers,
        vocab_size=200,
        max_position_embeddings=40,
        embedding_size=embedding,
    )


# -- the space's size -------------------------------------------------------------------------
def test_space_size_is_the_papers() -> None:
    assert FlexiBERTSpace().size() == PAPER_SIZE


def member(space: FlexiBERTSpace, hidden: int, *layers: EncoderLayer) -> bool:
    return space.contains(FlexiBERTSpec(hidden_size=hidden, n_layer=len(layers), layers=layers))


def test_layer_count_agrees_with_membership() -> None:
    """Count, per hidden size, the layers from a wider grid that check_member accepts."""
    space = FlexiBERTSpace()
    wider = itertools.product(
        [*DEFAULT_OPERATIONS, ("DSC", 7), ("DSC", 3)],
        range(1, 9),
        (256, 512, 1024, 2048),
        range(1, 5),
    )
    candidates = [EncoderLayer(t, p, heads, ff, stacks) for (t, p), heads, ff, stacks in wider]
    total = 0
    for hidden in (64, 128, 256, 512):
        allowed = [
            c
            for c in candidates
            if hidden % c.num_operation_heads == 0 and member(space, hidden, c, c)
        ]
        depths = [depth for depth in range(1, 7) if member(space, hidden, *[layer()] * depth)]
        # Layers are chosen independently once hidden size and depth are fixed.
        total += sum(len(allowed) ** depth for depth in depths)
    assert total == space.size() == PAPER_SIZE


def test_size_equals_brute_force_enumeration() -> None:
    space = FlexiBERTSpace(
        hidden_size=(6, 8),
        n_layer=(1, 2),
        operations=(("SA", "SDP"), ("DSC", 3)),
        num_operation_heads=(2, 3),
        feed_forward_dimension=(16,),
        num_feed_forward=(1, 2),
    )
    members = set()
    # A wider grid than the space's: other hidden sizes, depths, heads and operations.
    for hidden, depth in itertools.product((6, 8, 9), (1, 2, 3)):
        options = [
            layer(op, heads, 16, stacks)
            for op in (("SA", "SDP"), ("DSC", 3), ("LT", "DFT"))
            for heads in (1, 2, 3)
            for stacks in (1, 2)
            if hidden % heads == 0
        ]
        for layers in itertools.product(options, repeat=depth):
            spec = FlexiBERTSpec(hidden_size=hidden, n_layer=depth, layers=layers)
            if space.contains(spec):
                members.add(spec.arch_id)
    assert len(members) == space.size()


# -- specs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("space_id", list(SPACES))
def test_seeded_random_specs_round_trip(space_id: str) -> None:
    space = SPACES[space_id]
    rng = random.Random(7)
    for _ in range(200):
        spec = space.sample(rng)
        data = json.loads(spec.canonical_json())
        again = FlexiBERTSpec.from_dict(data)
        assert again == spec and again.arch_id == spec.arch_id
        assert parse_spec(data) == spec  # through the registry, by "kind"
        assert data["kind"] == "flexibert" and len(data["layers"]) == spec.n_layer


def test_space_round_trips_through_plain_data() -> None:
    for space in SPACES.values():
        data = json.loads(json.dumps(space.to_dict()))
        assert FlexiBERTSpace.from_dict(data) == space
        assert parse_space(data) == space


def test_arch_id_changes_with_any_gene() -> None:
    spec = small_spec(layer(), layer(("DSC", 5)))
    changed = replace(spec, layers=(layer(), layer(("DSC", 9))))
    assert spec.arch_id != changed.arch_id


def spec_data(**layer_changes: Any) -> dict[str, Any]:
    data = FlexiBERTSpec(hidden_size=128, n_layer=2, layers=(layer(),) * 2).to_dict()
    data["layers"][1].update(layer_changes)
    return data


BAD_SPECS = {
    "unknown operation": (spec_data(operation_type="MLP"), "layers[1].operation_type"),
    "LT with a kernel": (
        spec_data(operation_type="LT", operation_parameter=5),
        "layers[1].operation_parameter",
    ),
    "SA with DFT": (spec_data(operation_parameter="DFT"), "layers[1].operation_parameter"),
    "DSC with SDP": (spec_data(operation_type="DSC"), "layers[1].operation_parameter"),
    "DSC even kernel": (
        spec_data(operation_type="DSC", operation_parameter=4),
        "layers[1].operation_parameter",
    ),
    "heads not dividing hidden": (
        spec_data(num_operation_heads=3),
        "layers[1].num_operation_heads",
    ),
    "zero heads": (spec_data(num_operation_heads=0), "layers[1].num_operation_heads"),
    "boolean stacks": (spec_data(num_feed_forward=True), "layers[1].num_feed_forward"),
    "unknown layer field": (spec_data(dropout=0.1), "layers[1].dropout"),
    "too few layers": ({**spec_data(), "n_layer": 3}, "layers"),
    "too many layers": ({**spec_data(), "n_layer": 1}, "layers"),
    "layers not a list": ({**spec_data(), "layers": "SA"}, "layers"),
    "layer not an object": ({**spec_data(), "layers": [["SA"], ["SA"]]}, "layers[0]"),
    "missing hidden": ({k: v for k, v in spec_data().items() if k != "hidden_size"}, "hidden_size"),
    "unknown field": ({**spec_data(), "d_model": 128}, "d_model"),
    "wrong kind": ({**spec_data(), "kind": "gpt2"}, "kind"),
}


@pytest.mark.parametrize("case", list(BAD_SPECS))
def test_bad_spec_is_rejected_naming_the_field(case: str) -> None:
    data, field = BAD_SPECS[case]
    with pytest.raises(InvalidSpec) as caught:
        FlexiBERTSpec.from_dict(data)
    assert caught.value.field == field


def test_missing_layer_field_is_named() -> None:
    data = spec_data()
    del data["layers"][0]["num_feed_forward"]
    with pytest.raises(InvalidSpec, match=r"layers\[0\]\.num_feed_forward: is required"):
        FlexiBERTSpec.from_dict(data)


def test_operation_error_lists_the_allowed_parameters() -> None:
    with pytest.raises(InvalidSpec, match="not valid for operation LT; allowed: DFT, DCT"):
        FlexiBERTSpec.from_dict(spec_data(operation_type="LT", operation_parameter=5))


NON_MEMBERS = {
    "eight heads": (dict(num_operation_heads=8), "layers[1].num_operation_heads"),
    "kernel 7": (
        dict(operation_type="DSC", operation_parameter=7),
        "layers[1].operation_parameter",
    ),
    "ff 2048": (dict(feed_forward_dimension=2048), "layers[1].feed_forward_dimension"),
    "two stacks": (dict(num_feed_forward=2), "layers[1].num_feed_forward"),
}


@pytest.mark.parametrize("case", list(NON_MEMBERS))
def test_valid_spec_outside_the_space_is_named(case: str) -> None:
    changes, field = NON_MEMBERS[case]
    spec = FlexiBERTSpec.from_dict(spec_data(**changes))  # a valid spec...
    with pytest.raises(InvalidSpec) as caught:
        FlexiBERTSpace().check_member(spec)  # ...but not a member
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"hidden_size": 192}, "hidden_size"),
        ({"n_layer": 3, "layers": (layer(),) * 3}, "n_layer"),
        ({"vocab_size": 1000}, "vocab_size"),
        ({"embedding_size": 256}, "embedding_size"),
    ],
)
def test_encoder_wide_genes_outside_the_space_are_named(changes: dict, field: str) -> None:
    spec = replace(FlexiBERTSpec(hidden_size=128, n_layer=2, layers=(layer(),) * 2), **changes)
    with pytest.raises(InvalidSpec) as caught:
        FlexiBERTSpace().check_member(spec)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"operations": {"LT": ["DFT", 9]}}, "operations.operation_parameter"),
        ({"operations": {"CONV": [3]}}, "operations.operation_type"),
        ({"num_operation_heads": [3], "hidden_size": [128]}, "hidden_size"),
        ({"n_layer": [2, 2]}, "n_layer"),
        ({"feed_forward_dimension": "512"}, "feed_forward_dimension"),
        ({"hidden_size": [1 << 20]}, "hidden_size"),
        ({"dropout": 0.1}, "dropout"),
        ({"hidden_size": [[128]]}, "hidden_size"),
        ({"operations": {"DSC": [[5]]}}, "operations.operation_parameter"),
        ({"operations": {"SA": ["SDP", "SDP"]}}, "operations"),
    ],
)
def test_bad_space_settings_are_named(settings: dict, field: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        FlexiBERTSpace.from_dict(settings)
    assert caught.value.field == field


# -- operators --------------------------------------------------------------------------------
def genes(x: EncoderLayer) -> dict[str, Any]:
    return {
        "operation": x.operation,
        "heads": x.num_operation_heads,
        "ff": x.feed_forward_dimension,
        "stacks": x.num_feed_forward,
    }


@pytest.mark.parametrize("space_id", list(SPACES))
def test_operators_return_members(space_id: str) -> None:
    space = SPACES[space_id]
    rng = random.Random(11)
    population = [space.sample(rng) for _ in range(20)]
    for _ in range(300):
        a, b = rng.sample(population, 2)
        child = space.mutate(space.crossover(a, b, rng), rng)
        space.check_member(child)  # raises naming the gene otherwise
        population[rng.randrange(len(population))] = child


@pytest.mark.parametrize("space_id", list(SPACES))
def test_operators_are_deterministic_for_a_seed(space_id: str) -> None:
    space = SPACES[space_id]

    def run(seed: int) -> list[str]:
        rng = random.Random(seed)
        a, b = space.sample(rng), space.sample(rng)
        return [a.arch_id, space.mutate(a, rng).arch_id, space.crossover(a, b, rng).arch_id]

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_sampling_reaches_every_choice() -> None:
    space = FlexiBERTSpace()
    rng = random.Random(5)
    specs = [space.sample(rng) for _ in range(300)]
    seen_layers = [x for spec in specs for x in spec.layers]
    assert {s.hidden_size for s in specs} == set(space.hidden_size)
    assert {s.n_layer for s in specs} == set(space.n_layer)
    assert {x.operation for x in seen_layers} == set(space.operations)
    assert {x.num_operation_heads for x in seen_layers} == set(space.num_operation_heads)
    assert {x.num_feed_forward for x in seen_layers} == set(space.num_feed_forward)


def test_crossover_with_p_zero_or_one_returns_a_parent() -> None:
    space = SPACES["odd"]
    rng = random.Random(21)
    for _ in range(50):
        a, b = space.sample(rng), space.sample(rng)
        assert space.crossover(a, b, rng, p=0.0) == a
        assert space.crossover(a, b, rng, p=1.0) == b


def test_mutation_with_p_zero_keeps_and_p_one_changes() -> None:
    space = FlexiBERTSpace()
    rng = random.Random(9)
    spec = space.sample(rng)
    assert space.mutate(spec, rng, p=0.0) == spec
    changed = [space.mutate(spec, rng, p=1.0) != spec for _ in range(20)]
    assert all(changed)


def test_crossover_child_genes_come_from_the_parents() -> None:
    space = SPACES["odd"]
    rng = random.Random(13)
    inherited_depth = set()
    for _ in range(300):
        a, b = space.sample(rng), space.sample(rng)
        child = space.crossover(a, b, rng)
        assert child.n_layer in (a.n_layer, b.n_layer)
        assert child.hidden_size in (a.hidden_size, b.hidden_size)
        for i, child_layer in enumerate(child.layers):
            parents = [genes(p.layers[i]) for p in (a, b) if p.n_layer > i]
            for name, value in genes(child_layer).items():
                offered = {parent[name] for parent in parents}
                # Heads are resampled only where an inherited count does not divide the hidden.
                repaired = name == "heads" and any(child.hidden_size % h for h in offered)
                assert value in offered or repaired
        if a.n_layer != b.n_layer:
            inherited_depth.add(child.n_layer == max(a.n_layer, b.n_layer))
    assert inherited_depth == {True, False}  # the deeper and the shallower depth both occur


# -- counts and the builder -------------------------------------------------------------------
@pytest.fixture(scope="module")
def build() -> ModuleType:
    pytest.importorskip("torch", reason="flexibert's builder needs torch (the agent extra)")
    from archvocab.spaces.flexibert import build as flexibert_build

    return flexibert_build


def count_parameters(model: Any) -> int:
    from archvocab.spaces.gpt2.build import count_parameters as count

    return count(model)


def embedding_table_count(model: Any) -> int:
    return sum(table.weight.numel() for table in model.embeddings.tables())


@pytest.mark.parametrize("space_id", list(SPACES))
def test_counts_equal_the_built_model(build: ModuleType, space_id: str) -> None:
    space = SPACES[space_id]
    small = replace(space, vocab_size=300) if space_id == "paper" else space  # faster builds
    rng = random.Random(17)
    specs = [small.sample(rng) for _ in range(12)]
    assert {x.operation for s in specs for x in s.layers} == set(space.operations)
    for spec in specs:
        model = build.build_model(spec)
        assert count_parameters(model) == spec.total_params() == parameter_count(spec)
        assert count_parameters(model) - embedding_table_count(model) == spec.decoder_params()


@pytest.mark.parametrize("embedding", [16, 32, 48])
def test_counts_with_and_without_the_embedding_projection(
    build: ModuleType, embedding: int
) -> None:
    spec = small_spec(*(layer(op, 4, 24, 3) for op in DEFAULT_OPERATIONS), embedding=embedding)
    model = build.build_model(spec)
    assert (model.embeddings.project is None) == (embedding == spec.hidden_size)
    assert count_parameters(model) == spec.total_params()
    for block, spec_layer in zip(model.blocks, spec.layers):
        own = count_parameters([block.operation, block.operation_output, block.operation_norm])
        assert own == operation_params(spec.hidden_size, spec_layer)


def run(build: ModuleType, spec: FlexiBERTSpec, tokens: Any) -> Any:
    import torch

    torch.manual_seed(0)
    model = build.build_model(spec).eval()
    with torch.inference_mode():
        return model(tokens)


@pytest.mark.parametrize("op", DEFAULT_OPERATIONS, ids=lambda op: f"{op}")
def test_forward_runs_for_every_operation(build: ModuleType, op: tuple[str, str | int]) -> None:
    import torch

    spec = small_spec(layer(op, 4, 24, 3), layer(op, 2, 16, 1))
    generator = torch.Generator().manual_seed(0)
    inputs = build.example_inputs(spec, 2, 12, generator)
    assert len(inputs) == 1 and inputs[0].shape == (2, 12) and inputs[0].dtype == torch.long
    out = run(build, spec, *inputs)
    assert out.shape == (2, 12, spec.hidden_size) and torch.isfinite(out).all()


def changed_positions(build: ModuleType, spec: FlexiBERTSpec, position: int) -> list[int]:
    """Which outputs change when the token at `position` changes."""
    import torch

    tokens = torch.randint(0, spec.vocab_size, (1, 24), generator=torch.Generator().manual_seed(1))
    other = tokens.clone()
    other[0, position] = (other[0, position] + 1) % spec.vocab_size
    delta = (run(build, spec, tokens) - run(build, spec, other)).abs().amax(dim=-1)[0]
    return [i for i, d in enumerate(delta.tolist()) if d > 1e-6]


@pytest.mark.parametrize("kernel", [5, 9])
def test_dynamic_convolution_sees_only_its_span(build: ModuleType, kernel: int) -> None:
    spec = small_spec(layer(("DSC", kernel), 4, 24, 1))
    reach = kernel // 2  # the key's separable convolution and the value window both span k
    assert changed_positions(build, spec, 10) == list(range(10 - reach, 10 + reach + 1))


@pytest.mark.parametrize("op", [("SA", "SDP"), ("SA", "WMA"), ("LT", "DFT"), ("LT", "DCT")])
def test_attention_and_transforms_mix_the_whole_sequence(build: ModuleType, op: tuple) -> None:
    spec = small_spec(layer(op, 2, 24, 1))
    # Position 11 of 24: no DCT-II basis vector is zero there (cos(pi * 23 * k / 48) != 0).
    assert changed_positions(build, spec, 11) == list(range(24))  # bidirectional, global


def test_dct_is_the_orthonormal_dct_ii(build: ModuleType) -> None:
    import torch
    from scipy import fft

    signal = torch.randn(7, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    ours = build._dct_matrix(7, signal) @ signal
    torch.testing.assert_close(
        ours, torch.from_numpy(fft.dct(signal.numpy(), axis=0, norm="ortho"))
    )


def test_dft_is_the_real_part_of_the_2d_fourier_transform_per_head(build: ModuleType) -> None:
    import torch

    mixing = build.LinearTransform(hidden=8, heads=2, transform="DFT")
    with torch.no_grad():
        mixing.input.weight.copy_(torch.eye(8))
        mixing.input.bias.zero_()
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(3))
    expected = torch.cat([torch.fft.fft2(x[..., :4]).real, torch.fft.fft2(x[..., 4:]).real], -1)
    torch.testing.assert_close(mixing(x), expected)


def test_sequence_longer_than_positions_is_refused(build: ModuleType) -> None:
    import torch

    model = build.build_model(small_spec(layer()))
    with pytest.raises(ValueError, match="sequence length 41 exceeds max_position_embeddings=40"):
        model(torch.zeros(1, 41, dtype=torch.long))


@pytest.mark.parametrize("seed", range(4))
def test_primer_takes_the_same_code_paths(build: ModuleType, seed: int) -> None:
    spec = FlexiBERTSpace().sample(random.Random(seed))
    primer = build.primer_spec(spec, seq_len=16)
    assert {x.operation for x in primer.layers} == {x.operation for x in spec.layers}
    assert {x.num_feed_forward for x in primer.layers} <= {x.num_feed_forward for x in spec.layers}
    assert (primer.embedding_size != primer.hidden_size) == (
        spec.embedding_size != spec.hidden_size
    )
    assert primer.total_params() < spec.total_params() / 50
    out = run(build, primer, *build.example_inputs(primer, 1, 16, __import__("torch").Generator()))
    assert out.shape == (1, 16, primer.hidden_size)


def test_registry_finds_the_kind(build: ModuleType) -> None:
    kind = get_kind("flexibert")
    assert kind.spec_type is FlexiBERTSpec and kind.space_type is FlexiBERTSpace
    assert kind.load_builder() is build
    spec = FlexiBERTSpace().sample(random.Random(0))
    assert isinstance(spec, ArchSpec) and kind.parse_spec(spec.to_dict()) == spec
    assert spec.n_layer == len(spec.layers) and spec.max_seq_len == 512


# -- the benchmark (../shared/data/tfnas) -----------------------------------------------------
@pytest.fixture(scope="module")
def benchmark() -> list[dict[str, Any]]:
    path = TFNAS_DIR / "BERT_benchmark.json"
    if not path.exists():
        pytest.skip(f"{path} not found (the shared data set is not mounted)")
    entries: list[dict[str, Any]] = json.loads(path.read_text())
    return entries


def test_every_benchmark_entry_loads_as_a_member(benchmark: list[dict[str, Any]]) -> None:
    space = FlexiBERTSpace()
    specs = [FlexiBERTSpec.from_benchmark(entry) for entry in benchmark]
    for spec in specs:
        space.check_member(spec)
    raw = {json.dumps(e["hparams"]["model_hparam_overrides"], sort_keys=True) for e in benchmark}
    assert len({spec.arch_id for spec in specs}) == len(raw) < len(benchmark)  # README: 491/500


def test_a_seeded_sample_of_benchmark_entries_builds(build: ModuleType, benchmark: list) -> None:
    import torch

    for entry in random.Random(23).sample(benchmark, 20):
        spec = FlexiBERTSpec.from_benchmark(entry)
        model = build.build_model(spec).eval()
        assert count_parameters(model) == spec.total_params()
        with torch.inference_mode():
            out = model(*build.example_inputs(spec, 1, 8, torch.Generator().manual_seed(0)))
        assert out.shape == (1, 8, spec.hidden_size) and torch.isfinite(out).all()


def test_every_benchmark_entry_builds_with_its_analytic_count(
    build: ModuleType, benchmark: list
) -> None:
    import torch

    for entry in benchmark:
        spec = FlexiBERTSpec.from_benchmark(entry)
        with torch.device("meta"):  # the real module layout, no memory
            model = build.build_model(spec)
        assert count_parameters(model) == spec.total_params(), entry["id"]


def test_from_benchmark_rejects_a_non_entry() -> None:
    with pytest.raises(InvalidSpec) as caught:
        FlexiBERTSpec.from_benchmark({"id": 3, "scores": {}})
    assert caught.value.field == "hparams"


def convbert_mixed_attention_params(hidden: int, heads: int, kernel: int) -> int:
    """The benchmark code's DSC (ConvBERT mixed attention, head ratio 2): heads // 2 attention
    and heads // 2 convolution heads of hidden / heads each, then BERT's output and norm."""
    groups, half = max(1, heads // 2), hidden // 2
    attention = 3 * (hidden * half + half)
    separable_key = hidden * kernel + hidden * half + half
    kernel_generator = half * groups * kernel + groups * kernel
    value = hidden * half + half
    return attention + separable_key + kernel_generator + value + hidden * hidden + 3 * hidden


def authors_metric_params(spec: FlexiBERTSpec) -> int:
    """The CSV's "Number of Parameters": the spec at hidden 256 and feed-forward 1024 (the
    authors' metric models), with the benchmark code's two layout differences."""
    hidden = 256
    resized = replace(
        spec,
        hidden_size=hidden,
        layers=tuple(replace(x, feed_forward_dimension=1024) for x in spec.layers),
    )
    total = resized.total_params()
    for x in resized.layers:
        if x.operation_type == "LT":  # their LT feeds the feed-forward stack directly
            total -= hidden * hidden + hidden + 2 * hidden
        elif x.operation_type == "DSC":
            mixed = convbert_mixed_attention_params(
                hidden, x.num_operation_heads, int(x.operation_parameter)
            )
            total += mixed - operation_params(hidden, x)
    return total


def test_authors_parameter_column_is_explained(benchmark: list[dict[str, Any]]) -> None:
    path = TFNAS_DIR / "BERT_results_activation.csv"
    if not path.exists():
        pytest.skip(f"{path} not found")
    import csv

    with path.open(newline="") as file:
        column = {int(row["ID"]): int(row["Number of Parameters"]) for row in csv.DictReader(file)}
    attention_only = 0
    for entry in benchmark:
        spec = FlexiBERTSpec.from_benchmark(entry)
        assert authors_metric_params(spec) == column[entry["id"]], entry["id"]
        if all(x.operation_type == "SA" for x in spec.layers):  # no correction at all
            attention_only += 1
            resized = replace(
                spec,
                hidden_size=256,
                layers=tuple(replace(x, feed_forward_dimension=1024) for x in spec.layers),
            )
            assert resized.total_params() == column[entry["id"]]
    assert attention_only > 10
