"""bench/search_efficiency.py: the --quick run's structure and sanity (no timings asserted)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from archvocab.registry import parse_space
from archvocab.wire import SearchCreate
from bench import search_efficiency as se
from bench.curve import Curve
from bench.efficiency_report import device_half_lines
from bench.efficiency_tables import TARGET_SHARE
from bench.normalisation import extremes, make_normaliser, score
from bench.replay import DeviceReplay
from bench.strategy_runs import STRATEGIES, Steer, make_engine
from proxies.params import decoder_params
from search.hypervolume import hypervolume
from server.services.quality import FIRST_RESULTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("search_efficiency") / "quick.json"
    assert se.main(["--quick", "--json", str(out)]) == 0
    return json.loads(out.read_text()), str(out)


def test_every_strategy_and_seed_ran_to_its_budget(quick: tuple[dict, str]) -> None:
    payload, _ = quick
    budgets = {
        "lts": se.QUICK["budget_lts"],
        "hwnas": se.QUICK["budget_hwnas"],
        "hwnas-residual-gp": se.QUICK["budget_hwnas"],
        "hwnas-per-second": se.QUICK["budget_hwnas"],
        "hwnas-random-start": se.QUICK["budget_hwnas"],
        "nsga2": se.QUICK["budget_peers"],
        "optuna-nsga2": se.QUICK["budget_peers"],
        "optuna-tpe": se.QUICK["budget_tpe"],
        "optuna-gp": se.QUICK["budget_gp"],
        "archai": se.QUICK["budget_peers"],
    }
    assert payload["budgets"] == budgets
    assert set(payload["results"]) == set(STRATEGIES)
    for strategy, runs in payload["results"].items():
        assert [run["seed"] for run in runs] == list(range(se.QUICK["seeds"]))
        for run in runs:
            assert run["measurements"] == budgets[strategy] == len(run["hv"])
            assert 0 <= run["from_table"] <= run["measurements"]
            assert len(run["device_s"]) == len(run["hv"])


def test_curves_are_monotone_and_in_the_unit_box(quick: tuple[dict, str]) -> None:
    payload, _ = quick
    for runs in payload["results"].values():
        for run in runs:
            hv, device = run["hv"], run["device_s"]
            assert all(b >= a for a, b in zip(hv, hv[1:]))
            assert all(b > a for a, b in zip(device, device[1:]))
            assert device[0] > 0
            assert 0 < hv[-1] < 1


def test_report_has_targets_and_the_fixed_normalisation(quick: tuple[dict, str]) -> None:
    payload, _ = quick
    report = "\n".join(payload["report"])
    assert "fixed normalisation shared by every strategy" in report
    verdicts = [line for line in payload["report"] if line.startswith(("PASS:", "FAIL:"))]
    assert "with noise control's measurements (a reference reading every 5 jobs)" in report
    # Issue 22's: 99% of LTS within 60 and within half the best peer's count; at 30 the best
    # peer's at 60; at 60 above every peer (the quick run's hwnas stops at 60: not at 120).
    for words in (
        "within 60 measurements",
        "within half the measurements of the best peer",
        "hwnas at 30 measurements",
        "at 60 measurements hwnas's median",
        "device-seconds to reach its hypervolume at 60 measurements",
    ):
        assert sum(words in line for line in verdicts) == 1, words
    assert not any("at 120 measurements" in line for line in verdicts)
    summary = payload["summary"]
    assert {
        "reach",
        "reach_100",
        "ahead_of_peers",
        "target_measurements",
        "target_measurements_with_noise",
        "target_fewer",
        "target_half_of_best_peer",
        "target_early",
        "target_device_half",
        "target_above_peers",
    } <= set(summary)
    # A peer verdict only where hwnas and the peer share a checkpoint (the GP stops at 11).
    assert summary["ahead_of_peers"]["optuna-gp"] is None
    assert not any("optuna-gp's" in line for line in verdicts)
    for peer in ("optuna-nsga2", "optuna-tpe", "archai"):  # hwnas ahead of it, or not
        assert sum(f"above {peer}'s" in line for line in verdicts) == 1, peer
    assert len(verdicts) == 10
    for where in ("table", "interpolated"):
        assert set(payload["summary"]["linearity"][where]) == {"latency_ms", "memory_mb"}
    ideal, reference = payload["normaliser"]["ideal"], payload["normaliser"]["reference"]
    assert ideal["decoder_params"] > reference["decoder_params"] > 0
    assert ideal["latency_ms"] == ideal["memory_mb"] == 0
    assert reference["latency_ms"] > 0 and reference["memory_mb"] > 0


def test_reach_agrees_with_the_curves(quick: tuple[dict, str]) -> None:
    payload, _ = quick
    levels = {run["seed"]: run["hv"][-1] for run in payload["results"]["lts"]}
    for strategy, got in payload["summary"]["reach"].items():
        for run in payload["results"][strategy]:
            count = got["counts"][str(run["seed"])]
            level = TARGET_SHARE * levels[run["seed"]]
            if count is None:
                assert max(run["hv"]) < level
            else:
                assert run["hv"][count - 1] >= level
                assert count == 1 or run["hv"][count - 2] < level


def test_extremes_bound_the_space() -> None:
    replay = DeviceReplay.load()
    space = parse_space(replay.space or {})
    largest, smallest = extremes(space)
    rng = random.Random(0)
    sizes = [decoder_params(space.sample(rng)) for _ in range(500)]
    assert decoder_params(smallest) <= min(sizes) and max(sizes) <= decoder_params(largest)


def test_incremental_hypervolume_matches_a_full_recomputation() -> None:
    replay = DeviceReplay.load()
    space = parse_space(replay.space or {})
    normaliser = make_normaliser(replay, space)
    curve = Curve(normaliser)
    rng = random.Random(1)
    rows = []
    for _ in range(60):
        spec = space.sample(rng)
        got = replay.measure(spec)
        rows.append({**score(spec), "latency_ms": got.latency_ms, "memory_mb": got.memory_mb})
        curve.add(rows[-1], got.wall_s, got.from_table)
    assert curve.hv[-1] == pytest.approx(hypervolume(normaliser.points(rows)), rel=1e-12)


def test_the_documented_command_runs_as_a_script(tmp_path: Path) -> None:
    out = tmp_path / "script.json"
    done = subprocess.run(
        [
            sys.executable,
            "bench/search_efficiency.py",
            "--quick",
            "--seeds",
            "1",
            "--strategies",
            "lts",
            "hwnas",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "### Targets" in done.stdout
    assert set(json.loads(out.read_text())["results"]) == {"lts", "hwnas"}


def test_hwnas_is_steered_as_the_server_steers_it() -> None:
    """Not by the benchmark's yardstick: by its own normalisation until the first results
    are in, then by the one the server fixes from them (latency and memory at twice the
    largest of the first ten, decoder_params over a sample of the space)."""
    replay = DeviceReplay.load()
    space = parse_space(replay.space or {})
    engine = make_engine("hwnas", space, 0, 20)
    assert engine._fixed_normaliser is None
    told: list[dict[str, float]] = []
    steer = Steer(SearchCreate(strategy="hwnas", space=space.to_dict(), seed=0))
    while batch := engine.ask(1):
        for candidate in batch:
            got = replay.measure(candidate.spec)
            values = {"latency_ms": got.latency_ms, "memory_mb": got.memory_mb}
            engine.tell(candidate.arch_id, values)
            told.append(values)
            steer.told(engine, {**candidate.proxies, **values})
            assert (engine._fixed_normaliser is None) == (len(told) < FIRST_RESULTS)
    fixed = engine._fixed_normaliser.to_dict()
    for metric in ("latency_ms", "memory_mb"):
        assert fixed["ideal"][metric] == 0
        largest = max(v[metric] for v in told[:FIRST_RESULTS])
        assert fixed["reference"][metric] == pytest.approx(2 * largest)
    yardstick = make_normaliser(replay, space).to_dict()
    assert fixed["reference"]["decoder_params"] > yardstick["reference"]["decoder_params"]
    assert fixed["ideal"]["decoder_params"] < yardstick["ideal"]["decoder_params"]


def test_a_saved_run_is_reported_again_without_running(
    quick: tuple[dict, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    payload, path = quick
    monkeypatch.setattr(se, "run_all", lambda *a, **k: pytest.fail("ran the searches again"))
    assert se.main(["--quick", "--report-from", path]) == 0
    assert capsys.readouterr().out.splitlines() == payload["report"]


def test_reused_curves_are_taken_from_the_saved_run_and_the_rest_run_again(
    quick: tuple[dict, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    payload, path = quick
    out = tmp_path / "again.json"
    argv = ["--quick", "--strategies", "lts", "hwnas", "optuna-gp", "--json", str(out)]
    assert se.main([*argv, "--reuse", path, "optuna-gp", "lts"]) == 0
    again = json.loads(out.read_text())
    assert list(again["results"]) == ["lts", "hwnas", "optuna-gp"]  # in the order asked
    assert again["results"]["optuna-gp"] == payload["results"]["optuna-gp"]
    assert again["results"]["lts"] == payload["results"]["lts"]
    # hwnas ran again: the same seeds and code give the same curve, in a new run's time
    assert [r["hv"] for r in again["results"]["hwnas"]] == [
        r["hv"] for r in payload["results"]["hwnas"]
    ]
    assert again["results"]["hwnas"][0]["wall_s"] != payload["results"]["hwnas"][0]["wall_s"]
    assert again["reused"] == {
        "from": path,
        "command": payload["command"],
        "strategies": ["optuna-gp", "lts"],
    }
    assert f"Curves of optuna-gp, lts reused from {path}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seeds", "3"], "has seeds 2, this run 3"),
        (["--agents", "4"], "has agents 1, this run 4"),
        (["--budget-gp", "12"], "has budget of optuna-gp 11, this run 12"),
        (["--strategies", "hwnas"], "optuna-gp is not both in --strategies and in"),
    ],
)
def test_a_saved_run_that_ran_otherwise_is_not_reused(
    quick: tuple[dict, str], extra: list[str], message: str
) -> None:
    _, path = quick
    with pytest.raises(SystemExit, match=message):
        se.main(["--quick", *extra, "--reuse", path, "optuna-gp"])


def test_device_seconds_to_the_peers_hypervolume_are_compared_seed_by_seed() -> None:
    peer = [{"hv": [0.3] * 60, "device_s": [float(i + 1) for i in range(60)]}] * 2
    fast = {"hv": [0.1, 0.3, 0.5], "device_s": [10.0, 20.0, 30.0]}  # 20 s of the peer's 60
    slow = {"hv": [0.1, 0.2, 0.31], "device_s": [20.0, 40.0, 45.0]}  # 45 s: over half
    summary: dict = {}
    [line] = device_half_lines([fast, fast], peer, "optuna-gp", summary)
    assert line.startswith("PASS") and "2 measurements, 20 s vs 60 s" in line
    assert summary["target_device_half"] is True
    [line] = device_half_lines([fast, slow], peer, "optuna-gp", summary)
    assert line.startswith("FAIL") and "(median ratio 0.54)" in line
    never = {"hv": [0.1], "device_s": [1.0]}
    [line] = device_half_lines([never, never], peer, "optuna-gp", summary)
    assert line.startswith("FAIL") and "never; never" in line
