"""The strategies a request may name are the ones `search.strategies` registers, each in a
module named after it."""

from __future__ import annotations

import typing

from archvocab.wire import SearchCreate
from search.strategies import ENGINES


def test_the_wire_names_exactly_the_registered_strategies() -> None:
    named = typing.get_args(SearchCreate.model_fields["strategy"].annotation)
    assert sorted(named) == sorted(ENGINES)


def test_each_strategy_lives_in_a_module_named_after_it() -> None:
    for name, engine in ENGINES.items():
        assert engine.strategy == name
        assert engine.__module__ == f"search.strategies.{name}"
