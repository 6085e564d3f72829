"""bench.in_flight: several agents measuring at once on the replayed clock, and the spread of
what a search proposes while others are under way (issue 22's 4-agent comparison)."""

from __future__ import annotations

import random

import pytest

from archvocab.registry import parse_space
from bench.in_flight import InFlight
from bench.normalisation import make_normaliser
from bench.replay import DeviceReplay
from bench.strategy_runs import run_one

SPACE = {"n_layer": {"min": 2, "max": 6}, "d_model": {"min": 128, "max": 512, "step": 64}}


@pytest.fixture(scope="module")
def replayed():
    replay = DeviceReplay.load()
    space = parse_space({**replay.space, **SPACE})
    return replay, space, make_normaliser(replay, space)


def test_measurements_finish_in_the_order_of_their_replayed_ends(replayed):
    _, space, _ = replayed
    rng = random.Random(0)
    specs = [space.sample(rng) for _ in range(3)]
    flight = InFlight(space, 3)
    for spec, wall_s, name in zip(specs, [5.0, 2.0, 3.0], "abc", strict=True):
        flight.start(spec, wall_s, name)
    assert flight.free == 0
    assert [flight.finish() for _ in range(2)] == ["b", "c"]
    assert flight.clock == 3.0
    flight.start(specs[1], 4.0, "d")  # starts at 3.0, ends at 7.0: after "a"'s 5.0
    assert [flight.finish(), flight.finish()] == ["a", "d"]
    assert flight.clock == 7.0
    # Each start with others under way is measured against them: "b" against "a", "c" against
    # "a" and "b", "d" (b's architecture again, "b" having ended) against "a" alone.
    assert len(flight.nearest) == 3 and flight.same == 0
    assert flight.nearest[2] == flight.nearest[0] > 0


def test_a_proposal_of_an_architecture_under_way_is_counted_and_lies_at_distance_0(replayed):
    _, space, _ = replayed
    spec = space.sample(random.Random(1))
    flight = InFlight(space, 2)
    flight.start(spec, 1.0)
    flight.start(spec, 1.0)
    assert (flight.same, flight.nearest) == (1, [0.0])


@pytest.mark.parametrize("strategy", ["hwnas", "lts", "optuna-tpe"])
def test_four_agents_measure_the_budget_once_each_and_finish_sooner(replayed, strategy):
    replay, space, normaliser = replayed
    one = run_one(strategy, space, replay, normaliser, seed=0, budget=40)
    four = run_one(strategy, space, replay, normaliser, seed=0, budget=40, agents=4)
    assert one["batch"] is None
    assert four["measurements"] == one["measurements"] == 40
    # The same device-seconds are spread over 4 agents: the wall clock is about a quarter
    # (agents idle while a generation's last results come in, for LTS).
    assert four["device_s"][-1] / 4 <= four["batch"]["wall_clock_s"] < four["device_s"][-1] / 2
    assert four["batch"]["agents"] == 4 and four["batch"]["nearest_median"] > 0


def test_hwnas_never_proposes_an_architecture_under_way(replayed):
    replay, space, normaliser = replayed
    run = run_one("hwnas", space, replay, normaliser, seed=2, budget=60, agents=4)
    assert run["batch"]["same_as_under_way"] == 0
    assert run["repeats"] == 0


def test_an_empty_in_flight_is_still_the_agents_given() -> None:
    from archvocab.spaces.gpt2.space import GPT2Space

    flight = InFlight(GPT2Space(), 4)
    assert len(flight) == 0 and bool(flight)
    assert (flight or InFlight(GPT2Space(), 1)).agents == 4
