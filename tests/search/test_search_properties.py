"""Property-based tests (Hypothesis) of breeding and the engines, over every space kind.

For random small spaces of every registered kind, populations, budgets, bounds, seeds and
orders of results:

- `breed` (LTS's generation) gives new, distinct, admitted members of the space, at most one
  per slot, and the same children for the same seed;
- every strategy proposes distinct members within the budget and the decoder-parameter
  bounds, finishes "budget" exactly when it spent the budget, keeps failures and infeasible
  candidates off its frontier, and proposes the same for the same seed (the generational
  ones whatever order results arrive in);
- an engine restored from its history (specs as JSON) proposes what the live one would.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from search_factories import OBJECTIVES, measure, score

from archvocab.registry import ArchSpec, kind_names, parse_space
from archvocab.spaces.flexibert.space import DEFAULT_OPERATIONS
from archvocab.wire import Constraints, Population
from search import LTSEngine, NSGA2Engine, SteadyStateEngine
from search.breeding import breed
from search.engine import Engine
from search.errors import InvalidHistory
from search.records import PENDING, Candidate, PendingType

ENGINES: dict[str, type[Engine]] = {
    "lts": LTSEngine,
    "nsga2": NSGA2Engine,
    "hwnas": SteadyStateEngine,
}
GENERATIONAL = ("lts", "nsga2")  # a generation barrier: the tell order changes nothing
MAX_ATTEMPTS = 30  # fruitless draws before an engine gives a slot up


# -- random small spaces of every kind (a few to a few thousand members) ------------------------
def choices(values: list[Any]) -> st.SearchStrategy[list[Any]]:
    return st.lists(st.sampled_from(values), min_size=1, max_size=len(values), unique=True)


@st.composite
def grid_space(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    """d_model 32 always has d_inner >= 2 x 32 = 64 on the grid, so every draw is a space."""
    data: dict[str, Any] = {
        "kind": kind,
        "n_layer": {"min": 1, "max": draw(st.integers(1, 3))},
        "d_model": {"min": 32, "max": draw(st.sampled_from([32, 64])), "step": 32},
        "d_inner": {"min": 64, "max": draw(st.sampled_from([64, 128, 256])), "step": 64},
        "n_head": draw(choices([1, 2, 4])),
        "d_embed": draw(choices([32, 64])),
        "div_val": draw(choices([1, 2])),
        "cutoffs": [200, 500],
        "vocab_size": 1000,
    }
    if kind == "gpt2":
        data["n_positions"] = 64
    else:
        data.update(tgt_len=64, mem_len=draw(st.sampled_from([0, 16])))
    return data


@st.composite
def flexibert_space(draw: st.DrawFn) -> dict[str, Any]:
    operations: dict[str, list[Any]] = {}
    for op_type, parameter in draw(choices(list(DEFAULT_OPERATIONS))):
        operations.setdefault(op_type, []).append(parameter)
    return {
        "kind": "flexibert",
        "hidden_size": draw(choices([16, 32])),
        "n_layer": draw(choices([1, 2])),
        "operations": operations,
        "num_operation_heads": draw(choices([1, 2])),
        "feed_forward_dimension": draw(choices([16, 32])),
        "num_feed_forward": draw(choices([1, 2])),
        "vocab_size": 1000,
        "max_position_embeddings": 64,
    }


@st.composite
def rnncell_space(draw: st.DrawFn) -> dict[str, Any]:
    n_states = draw(choices([1, 2]))
    others = ["activation_tanh", "activation_sigm", "elementwise_prod", "elementwise_sum", "blend"]
    return {
        "kind": "nasbench_nlp",
        "n_states": n_states,
        # At least two nodes: a one-member space (h_new_0 = linear(x)) makes every mutation
        # try its 200 edits before falling back, and NSGA-II's mating loop takes seconds.
        "max_nodes": draw(st.integers(2, 6)),
        "ops": ["linear", *draw(st.lists(st.sampled_from(others), unique=True, max_size=3))],
        "linear_inputs": draw(choices([1, 2, 3])),
        "d_embed": 32,
        "d_hidden": 48,
        "vocab_size": 1000,
    }


SPACE_SETTINGS = {
    "gpt2": grid_space("gpt2"),
    "transxl": grid_space("transxl"),
    "flexibert": flexibert_space(),
    "nasbench_nlp": rnncell_space(),
}
SPACES = st.one_of(*SPACE_SETTINGS.values())
SEEDS = st.integers(0, 2**32)


@st.composite
def populations(draw: st.DrawFn) -> Population:
    mutations = draw(st.integers(0, 4))
    return Population(
        initial=draw(st.integers(1, 6)),
        parents=draw(st.integers(1, 4)),
        mutations=mutations,
        crossovers=draw(st.integers(0 if mutations else 1, 4)),
        mutation_prob=draw(st.sampled_from([0.0, 0.3, 1.0]) | st.floats(0, 1)),
        crossover_prob=draw(st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0, 1)),
    )


POPULATIONS = populations()


def test_every_kind_has_a_space_strategy() -> None:
    assert set(SPACE_SETTINGS) == set(kind_names())


# -- helpers ----------------------------------------------------------------------------------
def fails(spec: ArchSpec) -> bool:
    """About one measurement in five fails, decided by the arch_id."""
    return int(spec.arch_id, 16) % 5 == 0


def outcome(spec: ArchSpec) -> dict[str, float] | None:
    return None if fails(spec) else measure(spec)


def ids(candidates: list[Candidate]) -> list[str]:
    return [c.arch_id for c in candidates]


def step(engine: Engine, slots: int, pick: random.Random) -> list[Candidate]:
    """One agent round: ask for `slots`, then tell one pending result chosen by `pick`."""
    batch = engine.ask(slots)
    if engine.pending:
        arch_id = pick.choice(sorted(engine.pending))
        engine.tell(arch_id, outcome(engine.candidate(arch_id).spec))
    return batch


def finish(engine: Engine, slots: int, pick: random.Random) -> list[str]:
    """Run `step` until the engine finishes; the arch_ids it proposed on the way."""
    proposed: list[str] = []
    for _ in range(200):
        if engine.finished:
            return proposed
        before = engine.told
        proposed += ids(step(engine, slots, pick))
        assert engine.finished or engine.told > before or engine.pending, "the engine stalled"
    raise AssertionError("the engine did not finish within 200 rounds")


@st.composite
def bounds(draw: st.DrawFn, space: Any) -> Constraints:
    """No bounds, or decoder-parameter bounds (and a memory bound) that some members meet."""
    if not draw(st.booleans()):
        return Constraints()
    rng = random.Random(draw(SEEDS))
    params = sorted(space.sample(rng).decoder_params() for _ in range(8))
    lo, hi = sorted(draw(st.lists(st.sampled_from(params), min_size=2, max_size=2)))
    memory = draw(st.none() | st.floats(1e-3, 1e3))
    return Constraints(min_decoder_params=lo, max_decoder_params=hi, max_memory_mb=memory)


def engine_kwargs(
    seed: int, budget: int, population: Population, constraints: Constraints
) -> dict[str, Any]:
    return {
        "objectives": list(OBJECTIVES),
        "scorer": score,
        "seed": seed,
        "max_evaluations": budget,
        "population": population,
        "constraints": constraints,
        "max_attempts": MAX_ATTEMPTS,
    }


def make(strategy: str, space: Any, kwargs: dict[str, Any]) -> Engine:
    extra = {"pool_size": 16} if strategy == "hwnas" else {}
    return ENGINES[strategy](space, **kwargs, **extra)


def within(constraints: Constraints, proxies: dict[str, float]) -> bool:
    lo, hi = constraints.min_decoder_params, constraints.max_decoder_params
    params = proxies["decoder_params"]
    return (lo is None or params >= lo) and (hi is None or params <= hi)


def unproposed_share(engine: Engine, space: Any, constraints: Constraints) -> float:
    """The share of random samples that are admissible and not yet proposed. An engine gives
    up after MAX_ATTEMPTS = 30 fruitless samples, which at a share of 0.4 happens with odds
    of 0.6**30 (2e-7): an engine that finished "exhausted" above it gave up too early."""
    taken = {c.arch_id for c in engine.candidates()}
    rng = random.Random(0)
    draws = [space.sample(rng) for _ in range(200)]
    fresh = [s for s in draws if s.arch_id not in taken and within(constraints, score(s))]
    return len(fresh) / len(draws)


# -- breeding ---------------------------------------------------------------------------------
ADMIT_EVERY = st.sampled_from([None, 1, 2, 3])  # reject arch_ids divisible by it (1: all)


@settings(max_examples=120, deadline=None)
@given(
    settings_=SPACES,
    population=POPULATIONS,
    size=st.integers(0, 12),
    seed=SEEDS,
    n_frontier=st.none() | st.integers(0, 5),
    n_seen=st.integers(0, 6),
    reject=ADMIT_EVERY,
    max_attempts=st.integers(1, 20),
)
def test_breed_gives_new_distinct_admitted_members_one_per_slot(
    settings_: dict[str, Any],
    population: Population,
    size: int,
    seed: int,
    n_frontier: int | None,
    n_seen: int,
    reject: int | None,
    max_attempts: int,
) -> None:
    space = parse_space(settings_)
    draw = random.Random(f"parents:{seed}")
    frontier = None
    if n_frontier is not None:  # a frontier holds each member once
        sampled = [space.sample(draw) for _ in range(n_frontier)]
        frontier = list({s.arch_id: s for s in sampled}.values())
    seen = frozenset(space.sample(draw).arch_id for _ in range(n_seen))
    admitted: list[str] = []

    def admit(spec: ArchSpec) -> dict[str, float] | None:
        admitted.append(spec.arch_id)
        if reject is not None and int(spec.arch_id, 16) % reject == 0:
            return None
        return score(spec)

    def run() -> list[tuple[ArchSpec, dict[str, float]]]:
        rng = random.Random(seed)
        return breed(
            space,
            population,
            frontier,
            size=size,
            rng=rng,
            seen=seen,
            admit=admit,
            max_attempts=max_attempts,
        )

    children = run()
    slots = population.initial if frontier is None else population.mutations + population.crossovers
    assert len(children) <= min(size, slots)
    if reject == 1:
        assert children == []  # nothing is admissible
    child_ids = [spec.arch_id for spec, _ in children]
    assert len(set(child_ids)) == len(child_ids) and not set(child_ids) & seen
    for spec, proxies in children:
        space.check_member(spec)
        assert spec.kind == space.kind
        assert proxies == score(spec) and spec.arch_id in admitted
        assert reject is None or int(spec.arch_id, 16) % reject != 0
    assert [spec.arch_id for spec, _ in run()] == child_ids  # the same for the same seed


# -- the engines ------------------------------------------------------------------------------
@st.composite
def searches(draw: st.DrawFn) -> tuple[str, Any, dict[str, Any], int]:
    """(strategy, space, engine keywords, slots)."""
    space = parse_space(draw(SPACES, label="space"))
    strategy = draw(st.sampled_from(sorted(ENGINES)), label="strategy")
    kwargs = engine_kwargs(
        draw(SEEDS, label="seed"),
        draw(st.integers(1, 18), label="budget"),
        draw(POPULATIONS, label="population"),
        draw(bounds(space), label="constraints"),
    )
    return strategy, space, kwargs, draw(st.integers(1, 4), label="slots")


@settings(max_examples=60, deadline=None)
@given(search=searches(), order=SEEDS)
def test_engines_propose_distinct_members_within_budget_and_bounds(
    search: tuple[str, Any, dict[str, Any], int], order: int
) -> None:
    strategy, space, kwargs, slots = search
    engine = make(strategy, space, kwargs)
    proposed = finish(engine, slots, random.Random(order))
    candidates = engine.candidates()
    assert ids(candidates) == proposed
    assert len(set(proposed)) == len(proposed) <= kwargs["max_evaluations"]
    spent = len(proposed) == kwargs["max_evaluations"]
    event(f"{strategy}: {engine.finish_reason}")
    assert engine.finish_reason == ("budget" if spent else "exhausted")
    if not spent:
        assert unproposed_share(engine, space, kwargs["constraints"]) < 0.4
    for candidate in candidates:
        space.check_member(candidate.spec)
        assert candidate.proxies == score(candidate.spec)
        assert within(kwargs["constraints"], candidate.proxies)
    for candidate in engine.frontier():
        assert not fails(candidate.spec) and engine.is_feasible(candidate.arch_id)

    # The same proposals for the same seed: for the generational strategies whatever order
    # the results arrive in, for hwnas (whose proposals follow the results) in the same order.
    again = order + 1 if strategy in GENERATIONAL else order
    assert finish(make(strategy, space, kwargs), slots, random.Random(again)) == proposed


@settings(max_examples=40, deadline=None)
@given(search=searches(), share=st.floats(0, 1), order=SEEDS)
def test_a_restored_engine_proposes_what_the_live_one_would(
    search: tuple[str, Any, dict[str, Any], int], share: float, order: int
) -> None:
    """Run a share of the search (often leaving results pending), rebuild from the history
    with the specs as JSON, then run both on to the end the same way."""
    strategy, space, kwargs, slots = search
    live = make(strategy, space, kwargs)
    pick = random.Random(order)
    for _ in range(round(share * kwargs["max_evaluations"])):
        if live.finished:
            break
        step(live, slots, pick)
    event(f"{strategy}: {'finished' if live.finished else len(live.pending)} pending at the cut")
    history = [
        (json.loads(json.dumps(r.spec.to_dict())), r.generation, r.values) for r in live.history()
    ]
    restored = type(live).restore(
        space, history=history, **kwargs, **({"pool_size": 16} if strategy == "hwnas" else {})
    )
    assert restored.candidates() == live.candidates()
    assert restored.pending == live.pending and restored.told == live.told
    assert ids(restored.frontier()) == ids(live.frontier())
    assert finish(restored, slots, random.Random(1)) == finish(live, slots, random.Random(1))
    assert restored.finish_reason == live.finish_reason


@settings(max_examples=40, deadline=None)
@given(search=searches(), first=st.floats(0, 1), more=st.floats(0, 1), order=SEEDS)
def test_a_stale_engine_caught_up_proposes_what_the_live_one_would(
    search: tuple[str, Any, dict[str, Any], int], first: float, more: float, order: int
) -> None:
    """Two server processes: one restores the search at a cut, the other runs on; the stale
    one then catches up on the rows added since (results of its pending candidates, then the
    new proposals), and both run on to the end the same way."""
    strategy, space, kwargs, slots = search
    live = make(strategy, space, kwargs)
    pick = random.Random(order)

    def run(share: float) -> None:
        for _ in range(round(share * kwargs["max_evaluations"])):
            if live.finished:
                break
            step(live, slots, pick)

    run(first)
    extra = {"pool_size": 16} if strategy == "hwnas" else {}
    stale = type(live).restore(space, history=live.history(), **kwargs, **extra)
    run(more)
    history = live.history()
    told = [
        (r.spec.arch_id, r.values)
        for r in history[: stale.proposed]
        if r.spec.arch_id in stale.pending and not isinstance(r.values, PendingType)
    ]
    proposed = [
        (json.loads(json.dumps(r.spec.to_dict())), r.generation, r.values)
        for r in history[stale.proposed :]
    ]
    event(f"{strategy}: {len(told)} told and {len(proposed)} proposed since the cut")
    stale.catch_up(told=told, proposed=proposed)
    assert stale.candidates() == live.candidates()
    assert stale.pending == live.pending and stale.told == live.told
    assert ids(stale.frontier()) == ids(live.frontier())
    if live.finish_reason != "exhausted":  # leaves no row: the next ask finds it again
        assert stale.finish_reason == live.finish_reason
    assert finish(stale, slots, random.Random(1)) == finish(live, slots, random.Random(1))
    assert stale.finish_reason == live.finish_reason


def test_a_catch_up_that_does_not_continue_the_engine_is_refused() -> None:
    space = parse_space({"kind": "gpt2"})
    kwargs = engine_kwargs(
        0, 8, Population(initial=4, parents=2, mutations=2, crossovers=2), Constraints()
    )
    engine = make("lts", space, kwargs)
    batch = engine.ask(1)
    stranger = space.sample(random.Random(99))
    with pytest.raises(InvalidHistory, match="not pending"):
        engine.catch_up(told=[(stranger.arch_id, None)], proposed=[])
    with pytest.raises(InvalidHistory, match="proposed twice"):
        engine.catch_up(told=[], proposed=[(batch[0].spec, 0, PENDING)])
