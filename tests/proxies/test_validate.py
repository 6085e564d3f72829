"""`hwnas proxies validate`: the zero-cost proxies against every published ground-truth set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from archvocab.errors import InvalidSpec
from hwnas.ground_truth import GROUND_TRUTH_ENV, ground_truth_dir
from proxies.agreement import top_k_common
from proxies.ground_truth import SETS, GroundTruthSet
from proxies.ground_truth import load_set as load_from
from proxies.validate import validate

DATA_DIR = ground_truth_dir()
needs_data = pytest.mark.skipif(
    not DATA_DIR.is_dir(), reason=f"shared ground-truth data not found at {DATA_DIR}"
)


def load_set(name: str) -> GroundTruthSet:
    """A published set from the data folder the setting names."""
    return load_from(name, DATA_DIR)


def test_top_k_common_counts_the_shared_best() -> None:
    scores = [10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    ppl = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]  # best = lowest
    assert top_k_common(scores, ppl, 0.2, lower_is_better=True) == 1.0
    assert top_k_common(scores, ppl, 0.2, lower_is_better=False) == 0.0
    assert top_k_common(scores, ppl[::-1], 0.3, lower_is_better=False) == 1.0
    swapped = [2.0, 1.0, *ppl[2:]]
    assert top_k_common(scores, swapped, 0.1, lower_is_better=True) == 0.0
    assert top_k_common(scores, swapped, 0.2, lower_is_better=True) == 1.0


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5])
def test_top_k_must_be_a_fraction(fraction: float) -> None:
    with pytest.raises(InvalidSpec) as info:
        top_k_common([1.0, 2.0], [1.0, 2.0], fraction, lower_is_better=True)
    assert info.value.field == "top_k"


# The published figures (../shared/data/README.md): decoder parameters vs valid perplexity.
PUBLISHED_SPEARMAN = {
    "lts/random_GPT2_wt103": -0.97,
    "lts/random_GPT2_lm1b": -0.99,
    "lts/random_TransXL_wt103": -0.97,
    "lts/random_TransXL_lm1b": -0.999,
    "lts/random_TransXL_wt103_homogeneous": -0.95,
}


@needs_data
@pytest.mark.parametrize(("name", "published"), PUBLISHED_SPEARMAN.items())
def test_decoder_params_rank_lts_models_as_published(name: str, published: float) -> None:
    result = validate(load_set(name), "decoder_params")
    assert result.spearman == pytest.approx(published, abs=0.01)
    assert result.kendall < -0.8 and result.top_k_common >= 0.5


@needs_data
def test_parameter_count_ranks_the_bert_benchmark_by_glue() -> None:
    data = load_set("tfnas/BERT_benchmark")
    assert data.kind == "flexibert" and len(data.specs) == 500 and not data.lower_is_better
    result = validate(data, "total_params")
    # The authors' column (every model at hidden 256, feed-forward 1024) gives +0.454; each
    # config's own count ranks GLUE a little better.
    assert result.kendall > 0.454


@needs_data
def test_every_set_loads_as_specs_of_its_kind() -> None:
    for name in SETS:
        data = load_set(name)
        assert len(data.specs) == len(data.targets) > 50
        assert {spec.kind for spec in data.specs} == {data.kind}


def test_unknown_and_missing_sets_are_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpec) as info:
        load_set("nope")
    assert "allowed: lts/random_GPT2_wt103" in info.value.message
    with pytest.raises(InvalidSpec) as info:
        load_from("tfnas/BERT_benchmark", data_dir=tmp_path)
    assert str(tmp_path) in info.value.message


@needs_data
def test_the_command_prints_json_for_every_proxy_and_set() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hwnas", "proxies", "validate", "--json", "--set"]
        + ["lts/random_GPT2_wt103", "--set", "nasbench-nlp/wikitext2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]
    # Every zero-cost proxy on each set of a kind it applies to (flops: decoders only).
    assert {(r["set"], r["proxy"]) for r in results} == {
        *(
            (s, p)
            for s in ("lts/random_GPT2_wt103", "nasbench-nlp/wikitext2")
            for p in ("decoder_params", "total_params")
        ),
        ("lts/random_GPT2_wt103", "flops"),
    }
    bad = subprocess.run(
        [sys.executable, "-m", "hwnas", "proxies", "validate", "--proxy", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "allowed: decoder_params, total_params" in bad.stderr


def test_missing_data_names_the_setting(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    env = {**os.environ, GROUND_TRUTH_ENV: str(missing)}
    for command in (["validate"], ["correlate"]):
        done = subprocess.run(
            [sys.executable, "-m", "hwnas", "proxies", *command],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert done.returncode == 2, done.stderr
        assert GROUND_TRUTH_ENV in done.stderr and str(missing) in done.stderr


def test_low_cost_proxies_are_registered_by_cost_and_kind() -> None:
    from proxies.registry import LOW_COST_PROXIES, PROXIES

    assert {p.name for p in PROXIES.values() if p.cost == "zero"} == {
        "decoder_params",
        "total_params",
        "flops",
    }
    low = {p.name: p for p in PROXIES.values() if p.cost == "low"}
    assert set(LOW_COST_PROXIES) <= set(low)
    assert all(low[name].kinds == ("gpt2", "transxl") for name in LOW_COST_PROXIES)


@needs_data
def test_a_proxy_is_refused_on_a_set_of_a_kind_it_does_not_apply_to() -> None:
    from proxies.validate import validate_many

    with pytest.raises(InvalidSpec) as info:
        validate_many(load_set("tfnas/BERT_benchmark"), ["decoder_params", "snip"])
    assert info.value.field == "proxy"
    assert "snip does not apply to space kind 'flexibert'" in info.value.message
    assert "it applies to: gpt2, transxl" in info.value.message


@needs_data
def test_the_benchmark_script_agrees_with_validate() -> None:
    """bench/proxies_over_seeds.py runs as a file and reports what `validate` computes, on an
    evenly thinned set."""
    script = Path(__file__).resolve().parents[2] / "bench" / "proxies_over_seeds.py"
    done = subprocess.run(
        [sys.executable, str(script), "--set", "lts/random_GPT2_wt103", "--limit", "20"]
        + ["--seeds", "2", "--proxy", "decoder_params", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    data = load_set("lts/random_GPT2_wt103")
    keep = [i * 10 for i in range(20)]
    thinned = replace(
        data, specs=[data.specs[i] for i in keep], targets=[data.targets[i] for i in keep]
    )
    expected = validate(thinned, "decoder_params")
    assert row["models"] == 20 and row["seeds"] == 1  # a zero-cost proxy has no seed
    assert row["spearman"]["median"] == pytest.approx(expected.spearman)
    assert row["kendall"]["median"] == pytest.approx(expected.kendall)


@needs_data
def test_parameter_count_of_the_authors_metric_models_ranks_glue_as_published() -> None:
    # The training-free NAS paper reports Kendall tau of about +0.45 for the number of
    # parameters; their metric models were all built at hidden 256 / feed-forward 1024.
    as_scored = validate(load_set("tfnas/BERT_benchmark_metric_models"), "total_params")
    as_trained = validate(load_set("tfnas/BERT_benchmark"), "total_params")
    assert as_scored.kendall == pytest.approx(0.45, abs=0.01)
    assert as_trained.kendall > as_scored.kendall  # each config's own sizes rank better
