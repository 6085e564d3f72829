"""The NAS-Bench-NLP cell kind: graph validation, canonical ids, counts against the published
WikiText-2 logs (../shared/data/nasbench-nlp), operators, and the torch model around the cell."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
import torch

from archvocab.errors import InvalidSpec
from archvocab.registry import get_kind, parse_spec
from archvocab.spaces.gpt2.build import count_parameters
from archvocab.spaces.nasbench_nlp.build import build_model, example_inputs, primer_spec
from archvocab.spaces.nasbench_nlp.graph import (
    MAX_LINEAR_INPUTS,
    MAX_NODES,
    OPS,
    CellGraph,
    parse_recepie,
)
from archvocab.spaces.nasbench_nlp.space import RNNCellSpace, RNNCellSpec
from hwnas.ground_truth import ground_truth_dir

LOGS = ground_truth_dir() / "nasbench-nlp" / "wikitext2_logs.json"
SPACE = RNNCellSpace()
ELMAN = {
    "f": {"op": "linear", "input": ["x", "h_prev_0"]},
    "h_new_0": {"op": "activation_tanh", "input": ["f"]},
}


def tiny(recepie: Any, **sizes: Any) -> RNNCellSpec:
    hparams = {"d_embed": 6, "d_hidden": 10, "n_layer": 3, "vocab_size": 40, **sizes}
    return RNNCellSpec.from_recepie(recepie, **hparams)


@pytest.fixture(scope="module")
def logs() -> list[dict[str, Any]]:
    if not LOGS.exists():
        pytest.skip(f"NAS-Bench-NLP logs not found at {LOGS}")
    return json.loads(LOGS.read_text())


# -- the published logs -------------------------------------------------------------------------
def test_every_logged_model_loads_counts_exactly_and_is_a_member(logs) -> None:
    assert len(logs) == 345
    for entry in logs:
        spec = RNNCellSpec.from_log_entry(entry)
        assert spec.total_params() == entry["num_params"], entry["recepie_id"]
        SPACE.check_member(spec)


def test_built_models_have_the_analytic_and_logged_counts(logs) -> None:
    for entry in logs:  # every one builds
        spec = RNNCellSpec.from_log_entry(entry)
        with torch.device("meta"):  # the real layout, no memory for 15M weights each
            model = build_model(spec)
        assert count_parameters(model) == spec.total_params() == entry["num_params"]
        assert count_parameters(model.decoder_modules()) == spec.decoder_params()
        assert spec.decoder_params() == entry["num_params"] - spec.vocab_size * (spec.d_embed + 1)


def test_log_models_differing_only_in_names_or_input_order_share_an_id(logs) -> None:
    by_id: dict[str, set[str]] = {}
    for entry in logs:
        by_id.setdefault(RNNCellSpec.from_log_entry(entry).arch_id, set()).add(entry["recepie"])
    assert len(by_id) < len({e["recepie"] for e in logs})  # some recepies are the same cell
    for recepies in by_id.values():  # and merged ones count the same
        assert len({RNNCellSpec.from_recepie(r).total_params() for r in recepies}) == 1


# -- validation ---------------------------------------------------------------------------------
def test_a_cycle_is_rejected_naming_the_node_and_nothing_gets_built() -> None:
    cycle = {
        "node_3": {"op": "linear", "input": ["x", "h_new_0"]},
        "h_new_0": {"op": "activation_tanh", "input": ["node_3"]},
    }
    message = "node 'h_new_0' depends on itself through 'node_3'"
    with pytest.raises(InvalidSpec, match=message) as info:
        RNNCellSpec.from_recepie(cycle)
    assert info.value.field == "cell"
    with pytest.raises(InvalidSpec, match=message):  # what an agent parses before building
        parse_spec({"kind": "nasbench_nlp", "cell": cycle})
    with pytest.raises(InvalidSpec, match=message):
        CellGraph(parse_recepie(cycle))


def test_an_output_x_never_reaches_is_rejected_but_one_fed_through_a_state_is_not() -> None:
    clock = {**ELMAN, "h_new_1": {"op": "activation_sigm", "input": ["h_prev_1"]}}
    with pytest.raises(InvalidSpec, match="output 'h_new_1' is not reachable from the inputs"):
        RNNCellSpec.from_recepie(clock)
    fed = {
        "a": {"op": "linear", "input": ["h_prev_0", "h_prev_1"]},
        "h_new_0": {"op": "activation_tanh", "input": ["a"]},
        "h_new_1": {"op": "linear", "input": ["x", "h_prev_1"]},
    }
    assert RNNCellSpec.from_recepie(fed).cell.n_states == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"h_new_0": {"op": "relu", "input": ["f"]}}, "node 'h_new_0': unknown op 'relu'"),
        (
            {"h_new_0": {"op": "activation_tanh", "input": ["g"]}},
            "node 'h_new_0': unknown input 'g'",
        ),
        ({"f": {"op": "linear", "input": ["x", "h_prev_1"]}}, "node 'f': unknown input 'h_prev_1'"),
        ({"h_new_0": {"op": "blend", "input": ["f", "f"]}}, "'blend' takes 3 inputs, got 2"),
        ({"h_new_0": {"op": "activation_tanh", "input": ["f", "f"]}}, "takes 1 inputs, got 2"),
        (
            {"f": {"op": "linear", "input": []}},
            f"node 'f': op 'linear' takes 1 to {MAX_LINEAR_INPUTS} inputs",
        ),
        (
            {"g": {"op": "elementwise_sum", "input": ["x", "f"]}},
            "node 'g': op 'elementwise_sum' cannot read x",
        ),
        ({"h_new_2": {"op": "linear", "input": ["x"]}}, "output 'h_new_1' is missing"),
        ({"h_prev_0": {"op": "linear", "input": ["x"]}}, "node 'h_prev_0': x and h_prev_<i> name"),
        ({"f": {"op": "linear", "input": ["x", "f"]}}, "node 'f' takes itself as an input"),
        ({"f": {"op": "linear"}}, "node 'f': must be an object with exactly the keys op and input"),
    ],
)
def test_invalid_cells_are_rejected_naming_the_node(change: dict, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message) as info:
        RNNCellSpec.from_recepie({**ELMAN, **change})
    assert info.value.field == "cell"


def test_a_cell_without_outputs_or_as_bad_json_is_rejected() -> None:
    with pytest.raises(InvalidSpec, match="output 'h_new_0' is missing"):
        RNNCellSpec.from_recepie({"f": ELMAN["f"]})
    with pytest.raises(InvalidSpec, match="not valid JSON"):
        RNNCellSpec.from_recepie("{not json")


def test_the_longest_allowed_chain_loads_and_one_more_node_is_refused() -> None:
    chain = {"n0": {"op": "linear", "input": ["x", "h_prev_0"]}}
    for i in range(1, MAX_NODES - 1):
        chain[f"n{i}"] = {"op": "activation_tanh", "input": [f"n{i - 1}"]}
    chain["h_new_0"] = {"op": "linear", "input": [f"n{MAX_NODES - 2}", "h_prev_0"]}
    assert len(RNNCellSpec.from_recepie(chain).cell.nodes) == MAX_NODES
    chain["spare"] = {"op": "activation_sigm", "input": ["n0"]}
    with pytest.raises(InvalidSpec, match=f"has {MAX_NODES + 1} nodes; at most {MAX_NODES}"):
        RNNCellSpec.from_recepie(chain)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"cell": ELMAN, "d_hidden": 0}, "d_hidden"),
        ({"cell": ELMAN, "tied": "yes"}, "tied"),
        ({"cell": ELMAN, "n_layers": 3}, "n_layers"),
        ({"d_embed": 400}, "cell"),
        ({"kind": "gpt2", "cell": ELMAN}, "kind"),
    ],
)
def test_spec_fields_are_checked_by_name(data: dict, field: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        RNNCellSpec.from_dict(data)
    assert info.value.field == field


# -- canonical form and ids ---------------------------------------------------------------------
def test_dead_nodes_are_pruned_and_do_not_change_the_id_or_the_count() -> None:
    dead = {
        **ELMAN,
        "unused": {"op": "linear", "input": ["x", "f"]},
        "unused_act": {"op": "activation_sigm", "input": ["unused"]},
    }
    spec, pruned = RNNCellSpec.from_recepie(ELMAN), RNNCellSpec.from_recepie(dead)
    assert pruned.arch_id == spec.arch_id and pruned == spec
    assert pruned.total_params() == spec.total_params()
    assert len(pruned.cell.nodes) == 2


def test_names_and_commutative_input_order_do_not_change_the_id_but_blend_order_does() -> None:
    def cell(name: str, linear: list[str], blend: list[str]) -> dict:
        return {
            name: {"op": "linear", "input": linear},
            "g": {"op": "activation_sigm", "input": [name]},
            "h_new_0": {"op": "blend", "input": blend},
        }

    base = RNNCellSpec.from_recepie(cell("f", ["x", "h_prev_0"], ["g", "f", "h_prev_0"]))
    renamed = RNNCellSpec.from_recepie(cell("z", ["h_prev_0", "x"], ["g", "z", "h_prev_0"]))
    swapped = RNNCellSpec.from_recepie(cell("f", ["x", "h_prev_0"], ["g", "h_prev_0", "f"]))
    assert renamed.arch_id == base.arch_id
    assert swapped.arch_id != base.arch_id


def test_sampled_specs_round_trip_through_plain_data() -> None:
    rng = random.Random(0)
    for _ in range(40):
        spec = SPACE.sample(rng)
        data = json.loads(json.dumps(spec.to_dict()))
        again = parse_spec(data)
        assert again == spec and again.arch_id == spec.arch_id
        assert again.canonical_json() == spec.canonical_json()
        assert CellGraph.from_recepie(spec.cell.to_recepie()) == spec.cell  # a fixed point
        assert spec.n_layer == 3 and spec.max_seq_len is None


# -- the space ----------------------------------------------------------------------------------
SPACES = {
    "default": SPACE,
    "small": RNNCellSpace(
        n_states=(1, 2),
        max_nodes=6,
        ops=("linear", "activation_tanh", "elementwise_prod"),
        linear_inputs=(1, 2),
        d_embed=8,
        d_hidden=12,
        n_layer=2,
        vocab_size=30,
    ),
}


@pytest.mark.parametrize("name", list(SPACES))
def test_operators_return_members_deterministically(name: str) -> None:
    space = SPACES[name]
    for seed in range(40):
        results = []
        for _ in range(2):
            rng = random.Random(seed)
            a, b = space.sample(rng), space.sample(rng)
            results.append((a, b, space.mutate(a, rng), space.crossover(a, b, rng)))
        assert results[0] == results[1]
        a, b, mutant, child = results[0]
        for spec in (a, b, mutant, child):
            space.check_member(spec)
        assert mutant.cell != a.cell


def test_sampling_covers_the_spaces_choices() -> None:
    rng = random.Random(1)
    specs = [SPACE.sample(rng) for _ in range(150)]
    assert {s.cell.n_states for s in specs} == set(SPACE.n_states)
    assert set().union(*(s.cell.ops() for s in specs)) == set(OPS)


def test_membership_names_what_is_outside() -> None:
    spec = tiny(ELMAN)
    with pytest.raises(InvalidSpec) as info:
        SPACE.check_member(spec)
    assert info.value.field == "d_embed"
    one_input = RNNCellSpec.from_recepie(
        {
            "f": {"op": "linear", "input": ["x"]},
            "h_new_0": {"op": "activation_tanh", "input": ["f"]},
        }
    )
    with pytest.raises(InvalidSpec, match="node 'node_0': a linear over 1 inputs"):
        SPACE.check_member(one_input)
    narrow = RNNCellSpace(ops=("linear", "activation_sigm"))
    with pytest.raises(InvalidSpec, match="node 'h_new_0': op 'activation_tanh' not allowed"):
        narrow.check_member(RNNCellSpec.from_recepie(ELMAN))


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"ops": ["activation_tanh"]}, "ops"),
        ({"ops": ["linear", "conv"]}, "ops"),
        ({"n_states": [0]}, "n_states"),
        ({"n_states": [3], "max_nodes": 2}, "max_nodes"),
        ({"linear_inputs": []}, "linear_inputs"),
        ({"colour": "red"}, "colour"),
        ({"kind": "gpt2"}, "kind"),
    ],
)
def test_space_settings_are_checked_by_name(settings: dict, field: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        RNNCellSpace.from_dict(settings)
    assert info.value.field == field


def test_the_space_round_trips_and_is_registered() -> None:
    data = json.loads(json.dumps(SPACES["small"].to_dict()))
    assert RNNCellSpace.from_dict(data) == SPACES["small"]
    kind = get_kind("nasbench_nlp")
    assert kind.parse_space({"kind": "nasbench_nlp"}) == SPACE
    assert kind.load_builder().build_model is build_model


# -- the torch model ----------------------------------------------------------------------------
@pytest.mark.parametrize("tied", [True, False])
def test_forward_shapes_counts_and_carried_state(tied: bool) -> None:
    spec = tiny(SPACE.sample(random.Random(3)).cell.to_recepie(), tied=tied)
    model = build_model(spec).eval()
    assert count_parameters(model) == spec.total_params()
    tokens, hidden = example_inputs(spec, 2, 7, torch.Generator().manual_seed(0))
    assert tokens.shape == (2, 7) and not hidden.any()
    with torch.inference_mode():
        log_probs, new_hidden = model(tokens, hidden)
        first, carried = model(tokens[:, :3], hidden)
        rest, carried = model(tokens[:, 3:], carried)
    assert log_probs.shape == (2, 7, spec.vocab_size) and new_hidden.shape == hidden.shape
    assert torch.allclose(log_probs.exp().sum(-1), torch.ones(2, 7))
    assert torch.allclose(torch.cat([first, rest], dim=1), log_probs, atol=1e-6)
    assert torch.allclose(carried, new_hidden, atol=1e-6)


def test_every_op_computes_what_nas_bench_nlp_defines() -> None:
    recepie = {
        "a": {"op": "linear", "input": ["x", "h_prev_0"]},
        "s": {"op": "activation_sigm", "input": ["a"]},
        "t": {"op": "activation_tanh", "input": ["h_prev_0"]},
        "r": {"op": "activation_leaky_relu", "input": ["a"]},
        "p": {"op": "elementwise_prod", "input": ["t", "r"]},
        "q": {"op": "elementwise_sum", "input": ["p", "h_prev_0"]},
        "h_new_0": {"op": "blend", "input": ["s", "q", "t"]},
    }
    spec = tiny(recepie, n_layer=1, tied=False)
    layer = build_model(spec).layers[0]
    (node,) = (n for n in spec.cell.nodes if n.op == "linear")
    linear = layer.linears[node.name]
    weight = dict(zip(node.inputs, linear.weights))  # one weight per input, canonical order
    x, h = torch.randn(3, 6), torch.randn(3, 10)
    a = x @ weight["x"].T + h @ weight["h_prev_0"].T + linear.bias
    s, t = torch.sigmoid(a), torch.tanh(h)
    q = t * torch.where(a > 0, a, 0.01 * a) + h
    with torch.no_grad():
        (out,) = layer.step(x, [h])
        assert torch.allclose(out, s * q + (1 - s) * t, atol=1e-6)


def test_the_primer_is_tiny_with_the_same_cell() -> None:
    spec = SPACE.sample(random.Random(5))
    primer = primer_spec(spec, seq_len=8)
    assert primer.cell == spec.cell and primer.tied == spec.tied
    assert primer.total_params() < spec.total_params() / 100
    model = build_model(primer).eval()
    with torch.inference_mode():
        out, _ = model(*example_inputs(primer, 2, 8, torch.Generator().manual_seed(0)))
    assert out.shape == (2, 8, primer.vocab_size)
