"""The replay benchmark's yardsticks: the greedy k-point choice from LTS's frontier and the
initial-design sweep (bench/greedy_bound.py, bench/initial_design.py)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from archvocab.spaces.gpt2.space import GPT2Space
from bench.greedy_bound import greedy
from bench.initial_design import main as initial_design_main
from bench.initial_design import seeds_ahead, sweep, table
from bench.strategy_runs import make_engine
from search.hypervolume import hypervolume


def test_greedy_takes_the_point_that_adds_most_each_time():
    rng = np.random.default_rng(0)
    points = rng.uniform(0.1, 0.9, size=(12, 3))
    volumes = greedy(points, 12)
    assert volumes[0] == pytest.approx(max(np.prod(1 - p) for p in points))
    assert volumes == sorted(volumes)
    assert volumes[-1] == pytest.approx(hypervolume(points))
    # Hypervolume is submodular: greedy holds at least 1 - 1/e of the best 3 points' volume.
    best3 = max(hypervolume(points[list(c)]) for c in itertools.combinations(range(6), 3))
    assert greedy(points[:6], 3)[-1] >= (1 - 1 / np.e) * best3


def test_greedy_stops_at_the_points_it_has():
    assert len(greedy(np.array([[0.5, 0.5, 0.5], [0.2, 0.8, 0.6]]), 5)) == 2


def test_the_initial_design_size_reaches_the_engine_and_the_sweep_reports_each_size():
    # Before any result, hwnas proposes its initial design and then waits for results.
    for initial in (4, 10):
        engine = make_engine("hwnas", GPT2Space(), seed=0, budget=20, initial=initial)
        assert len(engine.ask(16)) == initial
    result = sweep(
        [4, 10],
        [0],
        budget=30,
        space_overrides={"n_layer": {"min": 2, "max": 4}},
        variants=["hwnas", "hwnas-random-start"],
    )
    names = ["hwnas 4", "hwnas 10", "hwnas-random-start 4", "hwnas-random-start 10"]
    assert list(result["curves"]) == names
    assert all(len(hv) == 30 for per_seed in result["curves"].values() for hv in per_seed.values())
    # The two designs start differently: their first measurements differ.
    first = {name: per_seed[0][0] for name, per_seed in result["curves"].items()}
    assert first["hwnas 10"] != first["hwnas-random-start 10"]
    assert result["space"]["n_layer"]["max"] == 4
    lines = table(result["curves"], budget=30)
    assert lines[2].startswith("| hwnas 4 |") and lines[3].startswith("| hwnas 10 (default) |")
    assert lines[5].startswith("| hwnas-random-start 10 |")


def test_the_sweep_counts_the_seeds_on_which_the_first_curve_is_ahead(tmp_path, capsys):
    curves = {
        "hwnas 10": {"0": [0.2, 0.3], "1": [0.1, 0.4]},
        "hwnas-random-start 10": {"0": [0.1, 0.35], "1": [0.1, 0.3]},
    }
    lines = seeds_ahead(curves, budget=2)
    assert lines[0].startswith("| seeds on which hwnas 10 is ahead of |")
    assert lines[2].split("|")[1].strip() == "hwnas-random-start 10"
    saved = tmp_path / "run.json"
    long = {name: {s: hv * 5 for s, hv in per.items()} for name, per in curves.items()}
    saved.write_text(json.dumps({"curves": long}))
    assert initial_design_main(["--report-from", str(saved)]) == 0
    # At 10 measurements (the 10th value: the first curve's 0.3 and 0.4 against 0.35 and 0.3).
    assert "| hwnas-random-start 10 | 1/2 |" in capsys.readouterr().out
