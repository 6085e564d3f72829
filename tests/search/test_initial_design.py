"""hwnas's analytic-front initial design: the front it keeps, what it picks, its fallbacks."""

from __future__ import annotations

import random

import numpy as np
from search_factories import OBJECTIVES, SMALL_POPULATION, make_engine, score

from archvocab.spaces.gpt2.space import GPT2Space, IntRange
from archvocab.spaces.gpt2.spec import GPT2Spec
from proxies.flops import flops
from search.hypervolume import hypervolume
from search.initial_design import (
    analytic_columns,
    analytic_front_design,
    greedy_volume,
    sample_pool,
)
from search.pareto import dominates
from search.strategies.hwnas import SteadyStateEngine

SENSES = {"decoder_params": "max", "latency_ms": "min", "memory_mb": "min"}


def space() -> GPT2Space:
    return GPT2Space(
        n_layer=IntRange(2, 6), d_model=IntRange(128, 512, 64), d_inner=IntRange(256, 2048, 64)
    )


def scored(spec: GPT2Spec) -> dict[str, float]:
    return {**score(spec), "flops": float(flops(spec))}


def pool(size: int = 300, seed: int = 0) -> list[tuple[GPT2Spec, dict[str, float]]]:
    return sample_pool(space(), scored, random.Random(seed), size)


def test_the_columns_minimise_every_count_and_maximise_the_known_proxy() -> None:
    pairs = pool(20)
    columns = analytic_columns(pairs, SENSES)
    assert columns is not None
    table, objectives = columns
    assert objectives == 1 and table.shape == (len(pairs), 4)  # params, total, flops, depth
    for (spec, proxies), row in zip(pairs, table, strict=True):
        assert list(row) == [
            -proxies["decoder_params"],
            proxies["total_params"],
            proxies["flops"],
            spec.n_layer,
        ]


def test_no_objective_known_at_proposal_means_no_design() -> None:
    senses = {"latency_ms": "min", "memory_mb": "min"}
    assert analytic_columns(pool(10), senses) is None
    assert analytic_front_design(pool(10), senses, 5) is None


def test_each_pick_adds_the_most_volume_to_those_before_it() -> None:
    # One objective (-params) and one cost, all on a front. Scaled (0 at -10 and at cost 0,
    # 1 just past -1 and cost 10), the knee (-6, 4) alone encloses 0.38 of the square, the
    # ends 0.09 and 0.08; then (-8, 7) adds 0.074 and (-3, 2) 0.053, the ends 0.037 and 0.025.
    points = np.array([[-10.0, 10.0], [-1.0, 1.0], [-6.0, 4.0], [-8.0, 7.0], [-3.0, 2.0]])
    assert greedy_volume(points, 1, 3) == [2, 3, 4]
    assert greedy_volume(points, 1, 5)[3:] == [0, 1]


def test_greedy_volume_takes_every_row_once_when_asked_for_more() -> None:
    points = np.array([[-1.0, 1.0], [-1.0, 1.0], [-2.0, 3.0]])
    assert sorted(greedy_volume(points, 1, 5)) == [0, 1, 2]


def test_the_design_lies_on_the_analytic_front_and_beats_random_picks_on_it() -> None:
    pairs = pool()
    columns = analytic_columns(pairs, SENSES)
    assert columns is not None
    table = columns[0]
    design = analytic_front_design(pairs, SENSES, 10)
    assert design is not None and len({spec.arch_id for spec, _ in design}) == 10
    index = {spec.arch_id: i for i, (spec, _) in enumerate(pairs)}
    rows = np.array([table[index[spec.arch_id]] for spec, _ in design])
    # No other sample beats them on the proxy and on every count.
    assert not any(dominates(other, row) for row in rows for other in table)
    # In the counts' volume, they hold more than the pool's first ten (a random design).
    scale = np.maximum(np.abs(table).max(axis=0), 1.0) * 1.1
    shifted = np.column_stack([table[:, 0] - table[:, 0].min(), table[:, 1:]]) / scale
    chosen = [index[spec.arch_id] for spec, _ in design]
    assert hypervolume(shifted[chosen]) > hypervolume(shifted[:10])


def test_a_front_smaller_than_the_design_is_filled_from_the_pool() -> None:
    pairs = pool(40)
    design = analytic_front_design(pairs, SENSES, 39)
    assert design is not None and len({spec.arch_id for spec, _ in design}) == 39


def test_an_engine_with_the_analytic_front_design_starts_with_it_for_its_seed() -> None:
    settings = {
        "scorer": scored,
        "initial_design": "analytic_front",
        "pool_size": 64,
        "objectives": list(OBJECTIVES),
    }
    engine = make_engine(space(), engine=SteadyStateEngine, **settings)
    first = engine.ask(SMALL_POPULATION.initial)
    again = make_engine(space(), engine=SteadyStateEngine, **settings)
    assert [c.arch_id for c in again.ask(SMALL_POPULATION.initial)] == [c.arch_id for c in first]
    design = analytic_front_design(
        sample_pool(space(), scored, random.Random("hwnas.search.initial_design:0"), 64),
        SENSES,
        SMALL_POPULATION.initial,
    )
    assert design is not None
    assert [c.arch_id for c in first] == [spec.arch_id for spec, _ in design]
    random_start = make_engine(
        space(), engine=SteadyStateEngine, **{**settings, "initial_design": "random"}
    )
    assert {c.arch_id for c in random_start.ask(SMALL_POPULATION.initial)} != {
        c.arch_id for c in first
    }


def test_an_engine_whose_objectives_are_all_measured_starts_randomly_and_says_so_once() -> None:
    settings = {"scorer": scored, "pool_size": 64}
    blind = make_engine(
        space(), engine=SteadyStateEngine, objectives=["snip", "latency_ms"], **settings
    )
    first = blind.ask(SMALL_POPULATION.initial)
    assert len({c.arch_id for c in first}) == SMALL_POPULATION.initial
    [reason] = blind.take_fallbacks()
    assert "none of the objectives (snip, latency_ms) is known at proposal" in reason
    assert blind.take_fallbacks() == []
    sighted = make_engine(space(), engine=SteadyStateEngine, **settings)
    sighted.ask(SMALL_POPULATION.initial)
    assert sighted.take_fallbacks() == []
