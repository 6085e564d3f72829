"""LTSEngine determinism, restore from persisted rows, and its domain errors."""

from __future__ import annotations

import math
import random

import pytest
from search_factories import SMALL_POPULATION, drive, make_engine, measure, score, small_space

from archvocab.errors import InvalidSpec
from archvocab.wire import Constraints
from search import (
    PENDING,
    AlreadyTold,
    HistoryRecord,
    InvalidHistory,
    InvalidResult,
    LTSEngine,
    UnknownCandidate,
)


def fails(spec) -> bool:
    return int(spec.arch_id, 16) % 5 == 0


def proposal_ids(generations) -> list[list[str]]:
    return [[c.arch_id for c in g] for g in generations]


def test_same_seed_same_proposals_whatever_the_tell_order() -> None:
    runs = [
        proposal_ids(drive(make_engine(max_evaluations=70), fails=fails, shuffle_seed=order))
        for order in (None, 1, 2)
    ]
    assert runs[0] == runs[1] == runs[2]
    other_seed = proposal_ids(drive(make_engine(max_evaluations=70, seed=1), fails=fails))
    assert other_seed[0] != runs[0][0]


def test_frontier_order_is_proposal_order_whatever_the_tell_order() -> None:
    a, b = make_engine(max_evaluations=40), make_engine(max_evaluations=40)
    drive(a, shuffle_seed=3)
    drive(b, shuffle_seed=4)
    order = [c.arch_id for c in a.candidates()]
    front = [c.arch_id for c in a.frontier()]
    assert front == [c.arch_id for c in b.frontier()]
    assert front == sorted(front, key=order.index)


def restore_like(engine_kwargs: dict, history) -> LTSEngine:
    return LTSEngine.restore(small_space(), history=history, **engine_kwargs)


@pytest.mark.parametrize("cut", [0, 5, 12, 19, 24, 43, 60])
def test_restored_engine_proposes_what_the_live_one_would(cut: int) -> None:
    """Stop telling after `cut` results (mid-generation for most cuts), restore, continue both."""
    kwargs = {
        "objectives": ["decoder_params", "latency_ms", "memory_mb"],
        "scorer": score,
        "seed": 11,
        "max_evaluations": 60,
        "population": SMALL_POPULATION,
        "constraints": Constraints(max_memory_mb=1e9, min_decoder_params=1),
    }
    live = LTSEngine(small_space(), **kwargs)
    told = 0
    while told < cut:  # the last generation asked is left partly told for most cuts
        batch = live.ask()[: cut - told]
        assert batch
        for c in batch:
            live.tell(c.arch_id, None if fails(c.spec) else measure(c.spec))
        told += len(batch)
    history = live.history()
    assert sum(r.values is PENDING for r in history) == len(live.pending)
    restored = restore_like(kwargs, [tuple(r) for r in history])
    assert restored.pending == live.pending and restored.generation == live.generation
    assert [c.arch_id for c in restored.frontier()] == [c.arch_id for c in live.frontier()]
    assert restored.candidates() == live.candidates()
    for engine in (live, restored):  # finish the outstanding generation identically
        for arch_id in sorted(engine.pending):
            spec = engine.candidate(arch_id).spec
            engine.tell(arch_id, None if fails(spec) else measure(spec))
    assert proposal_ids(drive(restored, fails=fails)) == proposal_ids(drive(live, fails=fails))
    assert restored.finish_reason == live.finish_reason == "budget"


def test_restore_of_a_finished_search_and_of_dict_specs() -> None:
    live = make_engine(max_evaluations=30)
    drive(live)
    history = [HistoryRecord(r.spec.to_dict(), r.generation, r.values) for r in live.history()]
    restored = LTSEngine.restore(
        small_space(),
        history=history,
        objectives=list(live.objectives),
        scorer=score,
        seed=0,
        max_evaluations=30,
        population=SMALL_POPULATION,
    )
    assert restored.finished and restored.finish_reason == "budget" and restored.ask() == []
    assert restored.frontier() == live.frontier()


def _history_error(history, max_evaluations: int = 60) -> str:
    with pytest.raises(InvalidHistory) as info:
        LTSEngine.restore(
            small_space(),
            history=history,
            objectives=["decoder_params", "latency_ms"],
            scorer=score,
            seed=0,
            max_evaluations=max_evaluations,
        )
    return str(info.value)


def test_inconsistent_histories_are_rejected() -> None:
    rng = random.Random(0)
    a, b, c = (small_space().sample(rng) for _ in range(3))
    values = measure(a)
    assert "proposed twice" in _history_error([(a, 0, values), (a, 0, values)])
    assert "generation must be 0" in _history_error([(a, 1, values)])
    assert "generation must be 0 or 1" in _history_error([(a, 0, values), (b, 2, values)])
    assert "pending" in _history_error([(a, 0, PENDING), (b, 1, values)])
    assert "max_evaluations=2" in _history_error(
        [(a, 0, values), (b, 0, values), (c, 0, values)], max_evaluations=2
    )


def test_tell_errors_name_the_problem() -> None:
    engine = make_engine()
    batch = engine.ask()
    first = batch[0]
    with pytest.raises(UnknownCandidate, match="never proposed"):
        engine.tell("0123456789abcdef", measure(first.spec))
    with pytest.raises(InvalidResult, match="'memory_mb'"):
        engine.tell(first.arch_id, {"latency_ms": 1.0})
    with pytest.raises(InvalidResult, match="latency_ms must be a finite number"):
        engine.tell(first.arch_id, {"latency_ms": math.nan, "memory_mb": 1.0})
    with pytest.raises(InvalidResult, match="finite number"):
        engine.tell(first.arch_id, {"latency_ms": True, "memory_mb": 1.0})
    assert first.arch_id in engine.pending  # rejected values leave it pending
    engine.tell(first.arch_id, None)
    with pytest.raises(AlreadyTold, match="already told"):
        engine.tell(first.arch_id, measure(first.spec))
    with pytest.raises(UnknownCandidate):
        engine.objective_values("nope")


def test_bounded_metric_must_be_told_even_when_not_an_objective() -> None:
    engine = make_engine(
        objectives=["decoder_params", "latency_ms"], constraints=Constraints(max_memory_mb=5)
    )
    first = engine.ask()[0]
    with pytest.raises(InvalidResult, match="'memory_mb'"):
        engine.tell(first.arch_id, {"latency_ms": 1.0})
    engine.tell(first.arch_id, {"latency_ms": 1.0, "memory_mb": 6.0})
    assert engine.is_feasible(first.arch_id) is False


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"objectives": ["latency_ms", "speed"]}, "objectives"),
        ({"objectives": ["latency_ms", "latency_ms"]}, "objectives"),
        ({"objectives": []}, "objectives"),
        ({"max_evaluations": 0}, "max_evaluations"),
        ({"max_attempts": 0}, "max_attempts"),
    ],
)
def test_bad_settings_are_rejected(overrides: dict, field: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        make_engine(**overrides)
    assert info.value.field == field
