"""LTSEngine: generations, budget, exhaustion, constraints, failures and the frontier."""

from __future__ import annotations

import random
import time
from itertools import pairwise

import numpy as np
import pytest
from search_factories import (
    SMALL_POPULATION,
    SpySpace,
    drive,
    make_engine,
    measure,
    minimised,
    score,
    small_space,
    tiny_space,
)

from archvocab.errors import InvalidSpec
from archvocab.wire import Constraints, Population
from proxies.params import decoder_params
from search import engine as engine_module
from search.hypervolume import Normaliser, added_volume, hypervolume
from search.noise import METRICS


def test_generations_have_population_sizes_and_valid_members() -> None:
    space = small_space()
    engine = make_engine(space, max_evaluations=48)
    generations = drive(engine)
    assert [len(g) for g in generations] == [12, 12, 12, 12]
    assert [{c.generation for c in g} for g in generations] == [{0}, {1}, {2}, {3}]
    proposals = [c for g in generations for c in g]
    assert all(space.contains(c.spec) for c in proposals)
    assert len({c.arch_id for c in proposals}) == len(proposals)
    assert all(c.proxies == score(c.spec) for c in proposals)
    assert engine.finish_reason == "budget" and engine.generation == 3


def test_budget_is_exact_and_last_generation_truncated() -> None:
    engine = make_engine(max_evaluations=31)
    first = engine.ask()
    assert len(first) == 12 and engine.ask() == []  # nothing new while results are pending
    assert engine.pending == {c.arch_id for c in first}
    for c in first:
        engine.tell(c.arch_id, measure(c.spec))
    sizes = [len(first)] + [len(g) for g in drive(engine)]
    assert sizes == [12, 12, 7]
    assert engine.proposed == 31 and engine.finish_reason == "budget"
    assert engine.ask() == []


def test_budget_smaller_than_initial_population() -> None:
    engine = make_engine(max_evaluations=5)
    batch = engine.ask()
    assert len(batch) == 5
    for c in batch[:-1]:
        engine.tell(c.arch_id, measure(c.spec))
    assert not engine.finished  # one result still outstanding
    engine.tell(batch[-1].arch_id, None)
    assert engine.finished and engine.finish_reason == "budget"


def test_tiny_space_is_exhausted_without_repeats() -> None:
    space = SpySpace(tiny_space())
    population = Population(initial=3, parents=2, mutations=3, crossovers=3)
    engine = make_engine(space, population=population, max_evaluations=50, max_attempts=25)
    proposals, calls = [], []
    start = time.perf_counter()
    while not engine.finished:
        space.calls = 0
        batch = engine.ask()
        calls.append(space.calls)
        for c in batch:
            engine.tell(c.arch_id, measure(c.spec))
        proposals += [c.spec for c in batch]
    assert time.perf_counter() - start < 5
    assert len(proposals) == 4 == len({s.arch_id for s in proposals})
    assert all(tiny_space().contains(s) for s in proposals)
    assert engine.finish_reason == "exhausted" and engine.ask() == []
    # Retries are bounded: per slot max_attempts operator calls, then as many random samples,
    # and the first slot that finds nothing new ends its generation.
    assert max(calls) <= 6 * 2 * 25
    assert 0 < calls[-1] <= 2 * 25


def test_decoder_param_bounds_are_checked_before_proposing() -> None:
    space = small_space()
    sizes = sorted(decoder_params(space.sample(random.Random(i))) for i in range(200))
    lo, hi = sizes[60], sizes[140]
    scored = []

    def counting_score(spec):
        scored.append(spec.arch_id)
        return score(spec)

    constraints = Constraints(min_decoder_params=lo, max_decoder_params=hi)
    engine = make_engine(space, constraints=constraints, scorer=counting_score, max_evaluations=60)
    proposals = [c for g in drive(engine) for c in g]
    assert len(proposals) == 60
    assert all(lo <= decoder_params(c.spec) <= hi for c in proposals)
    assert len(scored) > len(proposals)  # some children were rejected and never proposed


def test_impossible_constraints_exhaust_at_once() -> None:
    engine = make_engine(constraints=Constraints(max_decoder_params=1), max_attempts=10)
    assert engine.ask() == []
    assert engine.finished and engine.finish_reason == "exhausted" and engine.proposed == 0


def test_failures_count_against_budget_and_stay_off_the_frontier() -> None:
    def fails(spec):
        return int(spec.arch_id, 16) % 3 == 0

    engine = make_engine(max_evaluations=60)
    proposals = [c for g in drive(engine, fails=fails) for c in g]
    failed = {c.arch_id for c in proposals if fails(c.spec)}
    assert failed and len(proposals) == 60 == len({c.arch_id for c in proposals})
    assert not failed & {c.arch_id for c in engine.frontier()}
    assert all(engine.objective_values(a) is None and engine.is_feasible(a) is None for a in failed)


def test_all_failed_generation_falls_back_to_random_samples() -> None:
    engine = make_engine(max_evaluations=40)
    generations = drive(engine, fails=lambda spec: True)
    assert [len(g) for g in generations] == [12, 12, 12, 4]
    assert engine.frontier() == [] and engine.finish_reason == "budget"


def test_frontier_is_exact_nondominated_set_of_feasible_points() -> None:
    probe = make_engine(max_evaluations=12)
    latencies = sorted(measure(c.spec)["latency_ms"] for c in probe.ask())
    bound = latencies[len(latencies) // 2]
    engine = make_engine(max_evaluations=80, constraints=Constraints(max_latency_ms=bound))
    drive(engine)
    told = [c.arch_id for c in engine.candidates()]
    infeasible = [a for a in told if measure(engine.candidate(a).spec)["latency_ms"] > bound]
    feasible = [a for a in told if a not in infeasible]
    assert infeasible and all(engine.is_feasible(a) is False for a in infeasible)
    points = np.array([minimised(engine, a) for a in feasible])
    expected = [
        a
        for a, p in zip(feasible, points, strict=True)
        if not (np.all(points <= p, axis=1) & np.any(points < p, axis=1)).any()
    ]
    assert [c.arch_id for c in engine.frontier()] == expected  # same set, proposal order
    assert len(expected) > 1


def test_with_a_tolerance_only_points_dominated_beyond_it_leave_the_frontier() -> None:
    width = 0.1  # log half-width of latency and memory; decoder_params stays exact
    tolerance = {"latency_ms": width, "memory_mb": width}
    engine = make_engine(max_evaluations=80, tolerance=tolerance)
    drive(engine)
    told = [c.arch_id for c in engine.candidates()]
    values = {a: engine.objective_values(a) for a in told}

    def dominates(a: str, b: str, w: float) -> bool:
        """a's worst case dominates b's best case (each measured value within w)."""
        worst = [-values[a]["decoder_params"]] + [values[a][m] * np.exp(w) for m in METRICS]
        best = [-values[b]["decoder_params"]] + [values[b][m] * np.exp(-w) for m in METRICS]
        return all(x <= y for x, y in zip(worst, best, strict=True)) and worst != best

    expected = [b for b in told if not any(dominates(a, b, width) for a in told if a != b)]
    exact = {b for b in told if not any(dominates(a, b, 0.0) for a in told if a != b)}
    front = [c.arch_id for c in engine.frontier()]
    assert front == expected
    assert set(front) > exact  # the noise keeps nominally dominated points


@pytest.mark.parametrize("tolerance", [None, {"latency_ms": 0.05, "memory_mb": 0.05}])
def test_the_frontier_hypervolume_is_that_of_the_frontier_as_told(tolerance, monkeypatch) -> None:
    """What the server stores with each result, kept by the engine between results: after
    every tell, the hypervolume of the frontier's objective values."""
    engine = make_engine(max_evaluations=60, tolerance=tolerance)
    norm = Normaliser(
        engine.objectives,
        ideal={"decoder_params": 2e7, "latency_ms": 0.0, "memory_mb": 0.0},
        reference={"decoder_params": 0.0, "latency_ms": 400.0, "memory_mb": 2000.0},
    )
    volumes, computed = [], []
    monkeypatch.setattr(
        engine_module, "hypervolume", lambda points: computed.append("all") or hypervolume(points)
    )
    monkeypatch.setattr(  # a volume computed as the last one plus what a newcomer adds
        engine_module,
        "added_volume",
        lambda points, point: computed.append("added") or added_volume(points, point),
    )
    while batch := engine.ask():
        for candidate in batch:
            engine.tell(candidate.arch_id, measure(candidate.spec))
            front = [engine.objective_values(c.arch_id) for c in engine.frontier()]
            expected = hypervolume(norm.points(front))
            assert engine.frontier_hypervolume(norm) == pytest.approx(expected, rel=1e-12)
            volumes.append(expected)
    assert volumes[-1] > volumes[0] > 0
    # Computed again only where the volume moved, not wherever the frontier within the noise
    # took in a point that some member dominates (every newcomer here that nothing
    # dominates lies inside the reference box, so it moves the volume).
    moved = sum(a != b for a, b in pairwise(volumes)) + 1
    assert len(computed) == moved < len(volumes)
    # After the first, each volume is the one before plus what its newcomer adds.
    assert computed == ["all"] + ["added"] * (moved - 1)


def test_a_tolerance_must_be_a_non_negative_number() -> None:
    for bad in (-0.1, float("inf"), "wide", True):
        with pytest.raises(InvalidSpec, match="tolerance"):
            make_engine(tolerance={"latency_ms": bad})


def test_parents_are_drawn_from_the_current_frontier() -> None:
    space = SpySpace(small_space())
    engine = make_engine(space, max_evaluations=60)
    drive_rounds = 0
    while True:
        front = {c.arch_id for c in engine.frontier()}
        space.parents.clear()
        batch = engine.ask()
        if not batch:
            break
        if batch[0].generation > 0:
            assert space.parents and set(space.parents) <= front
            assert len(set(space.parents)) <= SMALL_POPULATION.parents
        for c in batch:
            engine.tell(c.arch_id, measure(c.spec))
        drive_rounds += 1
    assert drive_rounds == 5


def test_other_proxy_objective_and_two_objectives() -> None:
    engine = make_engine(objectives=["total_params", "latency_ms"], max_evaluations=30)
    drive(engine)
    front = engine.frontier()
    assert front
    values = [engine.objective_values(c.arch_id) for c in front]
    assert all(list(v) == ["total_params", "latency_ms"] for v in values)
    # On a 2-D front sorted by larger total_params, latency must strictly increase.
    ordered = sorted(values, key=lambda v: v["total_params"])
    assert all(a["latency_ms"] < b["latency_ms"] for a, b in pairwise(ordered))
