"""bench/peers/archai_peer.py: Archai 1.0.0's EvolutionParetoSearch on hwnas's GPT-2 space,
measuring through the caller's device, to a budget of distinct architectures."""

from __future__ import annotations

import os

import moocore
import numpy as np
import pytest

from bench import strategy_runs
from bench.in_flight import InFlight
from bench.peers import archai_peer
from bench.peers.archai_peer import INSTALL, run_archai
from tests.bench.test_optuna_peer import SMALL, ids, measure, score

_missing = archai_peer.available()
if _missing is not None and os.environ.get("HWNAS_REQUIRE_ARCHAI") == "1":
    pytest.fail(f"HWNAS_REQUIRE_ARCHAI=1 but {_missing}", pytrace=False)
needs_archai = pytest.mark.skipif(_missing is not None, reason=_missing or "")


@needs_archai
def test_budget_distinct_members_with_all_objectives() -> None:
    run = run_archai(SMALL, measure, score, budget=45, seed=0)
    assert len(run.measured) == len(set(ids(run.measured))) == 45 == run.trials
    assert run.repeats == 0
    for spec, values in run.measured:
        SMALL.check_member(spec)  # raises InvalidSpec for a non-member
        assert values == {**score(spec), **measure(spec)}  # the device's extra keys kept


@needs_archai
def test_same_seed_same_sequence_other_seed_other_sequence() -> None:
    def run(seed: int) -> list[str]:
        return ids(run_archai(SMALL, measure, score, budget=30, seed=seed).measured)

    assert run(3) == run(3)
    assert run(3) != run(4)


@needs_archai
def test_later_generations_dominate_more_hypervolume() -> None:
    """Archai's evolution does something: the last 60 architectures measured cover more
    hypervolume than the first 60 (its 10 random models and their first offspring)."""
    results = run_archai(SMALL, measure, score, budget=180, seed=0).measured
    points = np.array([[-v["decoder_params"], v["latency_ms"], v["memory_mb"]] for _, v in results])
    low, high = points.min(axis=0), points.max(axis=0)
    scaled = (points - low) / (high - low)
    ref = np.full(3, 1.1)
    assert moocore.hypervolume(scaled[-60:], ref=ref) > 1.01 * moocore.hypervolume(
        scaled[:60], ref=ref
    )


@needs_archai
def test_a_generation_is_measured_by_several_agents_at_once() -> None:
    def timed(spec):
        return {**measure(spec), "wall_s": 1.0 + spec.n_layer}

    flight = InFlight(SMALL, 4)
    run = run_archai(SMALL, timed, score, budget=40, seed=1, in_flight=flight)
    assert len(run.measured) == len(set(ids(run.measured))) == 40
    # Four at a time: every start after the first found others under way, none the same.
    assert len(flight.nearest) >= 40 - 4 and flight.same == 0
    # Told in the order they finished on the replayed clock, which is about a quarter of the
    # device time one agent would have taken.
    one_agent = sum(v["wall_s"] for _, v in run.measured)
    assert flight.clock < 0.4 * one_agent
    alone = run_archai(SMALL, timed, score, budget=40, seed=1)
    assert ids(alone.measured) != ids(run.measured)  # the same set, another finishing order
    assert sorted(ids(alone.measured)) == sorted(ids(run.measured))


def test_without_archai_the_peer_is_skipped_saying_how_to_install_it(monkeypatch) -> None:
    absent = f"Archai 1.0.0 is not installed (No module named 'archai'); {INSTALL}"
    monkeypatch.setattr(strategy_runs, "archai_available", lambda: absent)
    said: list[str] = []
    assert strategy_runs.without_missing(["hwnas", "archai", "optuna-gp"], said.append) == [
        "hwnas",
        "optuna-gp",
    ]
    assert said == [f"skipping archai: {absent}"]
    assert strategy_runs.without_missing(["hwnas"], said.append) == ["hwnas"]
    assert len(said) == 1
    monkeypatch.setattr(archai_peer, "available", lambda: absent)
    with pytest.raises(RuntimeError, match="pip install --no-deps archai==1.0.0"):
        run_archai(SMALL, measure, score, budget=5, seed=0)
