"""The strategies a request may name are the ones `search.strategies` registers, each in a
module named after it."""

from __future__ import annotations

import typing

import pytest

from archvocab.wire import SearchCreate
from search.initial_design import INITIAL_DESIGNS
from search.strategies import ENGINES
from search.strategies.hwnas import SURROGATES, VALUES_PER
from tests.search.search_factories import make_engine, measure


def test_the_wire_names_exactly_the_registered_strategies() -> None:
    named = typing.get_args(SearchCreate.model_fields["strategy"].annotation)
    assert sorted(named) == sorted(ENGINES)


def test_each_strategy_lives_in_a_module_named_after_it() -> None:
    for name, engine in ENGINES.items():
        assert engine.strategy == name
        assert engine.__module__ == f"search.strategies.{name}"


def test_the_wire_names_exactly_hwnas_surrogates() -> None:
    named, _none = typing.get_args(SearchCreate.model_fields["surrogate"].annotation)
    assert sorted(typing.get_args(named)) == sorted(SURROGATES)


def test_the_wire_names_exactly_hwnas_values_per() -> None:
    named, _none = typing.get_args(SearchCreate.model_fields["value_per"].annotation)
    assert sorted(typing.get_args(named)) == sorted(VALUES_PER)


def test_the_wire_names_exactly_hwnas_initial_designs() -> None:
    named, _none = typing.get_args(SearchCreate.model_fields["initial_design"].annotation)
    assert sorted(typing.get_args(named)) == sorted(INITIAL_DESIGNS)


@pytest.mark.parametrize("strategy", sorted(ENGINES))
def test_most_asked_bounds_each_round_and_is_a_generation_exactly(strategy: str) -> None:
    # A service asks for a round larger than it may write in one transaction only after the
    # transaction (server.services.searches.advance): the bound must hold, and a generational
    # strategy's must be its generation's size, so that small generations are not put off.
    extra = {"layers": [1, 2, 3, 4]} if strategy == "layer_scaled" else {}
    engine = make_engine(engine=ENGINES[strategy], max_evaluations=40, **extra)
    generational = strategy != "hwnas"
    rounds = 0
    while not engine.finished and rounds < 200:
        bound = engine.most_asked(3)
        batch = engine.ask(3)
        assert len(batch) <= bound
        if generational and batch:
            assert len(batch) == bound
        rounds += bool(batch)
        for candidate in batch[:2] if not generational else batch:
            engine.tell(candidate.arch_id, measure(candidate.spec))
        if not batch:  # the rest of what is pending
            for arch_id in sorted(engine.pending):
                engine.tell(arch_id, None)
    assert engine.finished and rounds >= (1 if strategy == "layer_scaled" else 2)
    assert engine.most_asked(3) == 0
