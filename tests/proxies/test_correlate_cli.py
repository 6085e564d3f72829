"""proxies.correlate (pure functions) and `hwnas proxies correlate` (the command)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scipy import stats

from archvocab.errors import InvalidSpec
from archvocab.spaces.gpt2.spec import GPT2Spec
from hwnas.cli import main
from hwnas.ground_truth import ground_truth_dir
from hwnas.proxies_cli import HEADERS, plain_table, render, table_rows
from proxies import PROXIES
from proxies.correlate import (
    Correlation,
    LoggedModel,
    correlate_file,
    correlate_models,
    load_lts_log,
    spearman,
)
from proxies.params import decoder_params

REPO = Path(__file__).resolve().parents[2]
LTS_DIR = ground_truth_dir() / "lts"
GPT2_SETS = ("random_GPT2_wt103", "random_GPT2_lm1b")


def lts_file(name: str) -> Path:
    path = LTS_DIR / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"shared LTS log {path} not found ($HWNAS_GROUND_TRUTH/lts)")
    return path


def config(n_layer: int, d_model: int = 64, d_inner: int = 128) -> dict[str, Any]:
    """An LTS-style model_config."""
    return {
        "n_layer": n_layer,
        "d_model": d_model,
        "d_embed": -1,
        "d_inner": d_inner,
        "n_head": 2,
        "div_val": 1,
        "cutoffs": [100, 1000],
        "n_token": 1000,
        "tgt_len": 32,
    }


def write_log(tmp_path: Path, models: list[dict[str, Any]]) -> Path:
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"set": "synthetic", "models": models}))
    return path


def scipy_rho(name: str) -> tuple[float, float]:
    models = json.loads(lts_file(name).read_text())["models"]
    scores = [decoder_params(GPT2Spec.from_lts_config(m["config"])) for m in models]
    result = stats.spearmanr(scores, [m["perplexity"]["valid_ppl"] for m in models])
    return float(result.statistic), float(result.pvalue)


# -- pure functions -------------------------------------------------------------------------
def test_load_lts_log_returns_spec_ppl_and_params() -> None:
    models = load_lts_log(lts_file("random_GPT2_wt103"))
    assert len(models) == 200
    spec, valid_ppl, params = models[0]
    assert isinstance(spec, GPT2Spec) and isinstance(valid_ppl, float)
    assert params["nonembedding"] == decoder_params(spec)


def test_models_without_perplexity_are_left_out(tmp_path: Path) -> None:
    path = write_log(
        tmp_path,
        [
            {"id": "a", "config": config(2), "perplexity": {"valid_ppl": 30.0}, "params": {}},
            {"id": "b", "config": config(3), "perplexity": {}, "params": {}},
            {"id": "c", "config": config(4), "params": {}},
        ],
    )
    assert [m.spec.n_layer for m in load_lts_log(path)] == [2]


def test_invalid_config_names_the_model(tmp_path: Path) -> None:
    bad = config(2)
    bad["n_head"] = 3  # does not divide d_model=64
    path = write_log(tmp_path, [{"id": "m7", "config": bad, "perplexity": {"valid_ppl": 1.0}}])
    with pytest.raises(InvalidSpec) as info:
        load_lts_log(path)
    assert info.value.field == "file"
    assert "model 'm7'" in info.value.message and "n_head" in info.value.message


def test_correlate_models_counts_exact_matches() -> None:
    specs = [GPT2Spec.from_lts_config(config(n)) for n in (1, 2, 3, 4)]
    models = [
        LoggedModel(spec, 100.0 - 10 * i, {"nonembedding": decoder_params(spec) + (i == 3)})
        for i, spec in enumerate(specs)
    ]
    result = correlate_models(models, "decoder_params", file="x.json")
    assert result == Correlation(
        "x.json", 4, "decoder_params", -1.0, result.p_value, "nonembedding", 3
    )
    assert correlate_models(models, "total_params").matches == 0  # no logged "total"


def test_spearman_matches_scipy_and_needs_two_models() -> None:
    rho, p = spearman([1, 2, 3, 4, 5], [5.0, 3.0, 4.0, 1.0, 2.0])
    expected = stats.spearmanr([1, 2, 3, 4, 5], [5.0, 3.0, 4.0, 1.0, 2.0])
    assert (rho, p) == (pytest.approx(expected.statistic), pytest.approx(expected.pvalue))
    with pytest.raises(InvalidSpec, match="need at least 2 models"):
        spearman([1], [2.0])


def test_unknown_proxy_is_refused_before_reading(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpec) as info:
        correlate_file(tmp_path / "missing.json", "no_such_proxy")
    assert info.value.field == "proxy"


@pytest.mark.parametrize("name", GPT2_SETS)
def test_correlate_file_agrees_with_scipy(name: str) -> None:
    result = correlate_file(lts_file(name), "decoder_params")
    rho, p_value = scipy_rho(name)
    assert result.rho == pytest.approx(rho, abs=1e-12)
    assert result.p_value == pytest.approx(p_value, rel=1e-9)
    assert result.rho < -0.9


# -- rendering ------------------------------------------------------------------------------
RESULTS = [
    Correlation("/data/a.json", 200, "decoder_params", -0.96701, 1.4e-119, "nonembedding", 200),
    Correlation("/data/b.json", 3, "custom", 0.5, 0.67, None, None),
]


def test_plain_table_without_rich() -> None:
    out = io.StringIO()
    render(RESULTS, out, use_rich=False)
    lines = out.getvalue().splitlines()
    assert lines[0].split("  ")[0] == "file"
    assert all(header in lines[0] for header in HEADERS)
    assert set(lines[1]) <= {"-", " "}
    assert lines[2].split() == [
        "a.json",
        "200",
        "decoder_params",
        "-0.9670",
        "1.40e-119",
        "200/200",
        "nonembedding",
    ]
    assert lines[3].split() == ["b.json", "3", "custom", "+0.5000", "6.70e-01", "n/a"]
    assert out.getvalue() == plain_table(table_rows(RESULTS))


def test_rich_table_has_the_same_cells() -> None:
    pytest.importorskip("rich")
    out = io.StringIO()
    render(RESULTS, out, use_rich=True)
    text = out.getvalue()
    for row in table_rows(RESULTS):
        for cell in row:
            assert cell in text


# -- the command ----------------------------------------------------------------------------
def hwnas(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hwnas", "proxies", "correlate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def test_command_json_defaults_agree_with_scipy() -> None:
    for name in GPT2_SETS:
        lts_file(name)
    proc = hwnas("--json")
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)["results"]
    assert [Path(r["file"]).stem for r in results] == list(GPT2_SETS)
    for result, name in zip(results, GPT2_SETS, strict=True):
        rho, p_value = scipy_rho(name)
        assert result["rho"] == pytest.approx(rho, abs=1e-12)
        assert result["p_value"] == pytest.approx(p_value, rel=1e-9)
        assert result["models"] == 200 and result["proxy"] == "decoder_params"
        assert result["logged_field"] == "nonembedding"
    assert [r["matches"] for r in results] == [200, 0]  # lm1b: see test_lts_logs.py


def test_installed_script_prints_a_table() -> None:
    script = Path(sys.executable).with_name("hwnas")
    if not script.exists():
        pytest.skip(f"no installed hwnas script next to {sys.executable}")
    path = lts_file("random_GPT2_wt103")
    proc = subprocess.run(
        [str(script), "proxies", "correlate", str(path), "--proxy", "decoder_params"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "random_GPT2_wt103.json" in proc.stdout
    assert f"{scipy_rho('random_GPT2_wt103')[0]:+.4f}" in proc.stdout
    assert "200/200 nonembedding" in proc.stdout


def test_command_unknown_proxy_exits_2_listing_valid_ones() -> None:
    proc = hwnas("--proxy", "no_such_proxy")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip() == (
        f"hwnas proxies correlate: unknown proxy 'no_such_proxy'; allowed: {', '.join(PROXIES)}"
    )


def test_command_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["proxies", "correlate", str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert "cannot read a log file" in err and "nope.json" in err


def test_command_in_process_with_total_params(capsys: pytest.CaptureFixture) -> None:
    path = lts_file("random_GPT2_wt103")
    assert main(["proxies", "correlate", str(path), "--proxy", "total_params", "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert (result["proxy"], result["logged_field"], result["matches"]) == (
        "total_params",
        "total",
        200,
    )
