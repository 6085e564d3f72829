"""The strategies a request may name are the ones `search.strategies` registers, each in a
module named after it."""

from __future__ import annotations

import typing

from archvocab.wire import SearchCreate
from search.initial_design import INITIAL_DESIGNS
from search.strategies import ENGINES
from search.strategies.hwnas import SURROGATES, VALUES_PER


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
