"""SteadyStateEngine ("hwnas"): slots, budget, initial design, screening, determinism, restore,
constraints, failures, and hypervolume against LTS on the synthetic hardware."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from search_factories import (
    OBJECTIVES,
    SMALL_POPULATION,
    SpySpace,
    drive,
    make_engine,
    measure,
    score,
    small_space,
    tiny_space,
)

from archvocab.spaces.gpt2.space import GPT2Space, IntRange
from archvocab.spaces.gpt2.spec import GPT2Spec
from archvocab.wire import Constraints, Population
from proxies.flops import flops
from proxies.params import decoder_params, total_params
from search import PENDING, LTSEngine
from search.hypervolume import Normaliser, hypervolume
from search.records import DEVICE_SECONDS, Candidate
from search.strategies.hwnas import (
    VALUES_PER,
    SteadyStateEngine,
    round_size,
    screening_pool,
)

INITIAL = SMALL_POPULATION.initial  # 12


def score_with_flops(spec: GPT2Spec) -> dict[str, float]:
    return {**score(spec), "flops": float(flops(spec))}


def mid_space() -> GPT2Space:
    """A mid-size slice of the default space: too large to stumble on the frontier at random."""
    return GPT2Space(
        n_layer=IntRange(2, 8), d_model=IntRange(128, 512, 64), d_inner=IntRange(256, 2048, 64)
    )


def make_steady(space: Any = None, **overrides: Any) -> SteadyStateEngine:
    return make_engine(space, engine=SteadyStateEngine, **{"pool_size": 32, **overrides})


def never(spec: GPT2Spec) -> bool:
    return False


def some_fail(spec: GPT2Spec) -> bool:
    return int(spec.arch_id, 16) % 5 == 0


def result(spec: GPT2Spec, fails: Callable[[GPT2Spec], bool]) -> dict[str, float] | None:
    return None if fails(spec) else measure(spec)


def drive_async(
    engine: SteadyStateEngine,
    *,
    slots: int = 4,
    order_seed: int = 0,
    tell_at_once: int = 1,
    shuffle_seed: int | None = None,
    fails: Callable[[GPT2Spec], bool] = never,
    max_steps: int = 5000,
) -> list[list[Candidate]]:
    """Agents in parallel: ask(slots), then tell `tell_at_once` pending results chosen by
    `order_seed` (in an order shuffled by `shuffle_seed`); until the engine finishes.
    Returns every ask's batch (empty ones included). Checks the slot invariant on the way."""
    pick, shuffle = random.Random(order_seed), random.Random(shuffle_seed)
    batches = []
    for _ in range(max_steps):
        before = len(engine.pending)
        batch = engine.ask(slots)
        assert len(batch) <= max(0, slots - before)
        assert len(engine.pending) <= slots
        batches.append(batch)
        if not engine.pending:
            assert engine.finished, "nothing pending and nothing proposed: the engine stalled"
            return batches
        chosen = pick.sample(sorted(engine.pending), min(tell_at_once, len(engine.pending)))
        if shuffle_seed is not None:
            shuffle.shuffle(chosen)
        for arch_id in chosen:
            engine.tell(arch_id, result(engine.candidate(arch_id).spec, fails))
    raise AssertionError(f"engine did not finish within {max_steps} steps")


def flat(batches: list[list[Candidate]]) -> list[Candidate]:
    return [c for b in batches for c in b]


def tell_some(
    engine: SteadyStateEngine, cut: int, *, slots: int, outcome: Callable[[GPT2Spec], Any]
) -> None:
    """`cut` times: ask with `slots`, then tell one pending candidate (seeded by `cut`)."""
    rng = random.Random(cut)
    for _ in range(cut):
        engine.ask(slots)
        arch_id = rng.choice(sorted(engine.pending))
        engine.tell(arch_id, outcome(engine.candidate(arch_id).spec))


def ids(candidates: list[Candidate]) -> list[str]:
    return [c.arch_id for c in candidates]


# -- budget, members, slots ------------------------------------------------------------------
def test_budget_members_no_repeats_and_slots() -> None:
    space = small_space()
    engine = make_steady(space, max_evaluations=100)
    proposals = flat(drive_async(engine, slots=4))
    assert len(proposals) == 100 == engine.proposed
    assert len(set(ids(proposals))) == 100
    assert all(space.contains(c.spec) for c in proposals)
    assert all(c.proxies == score(c.spec) for c in proposals)
    assert ids(engine.candidates()) == ids(proposals)
    assert engine.finished and engine.finish_reason == "budget" and engine.ask(4) == []


@pytest.mark.parametrize("slots", [1, 3, 7])
def test_ask_fills_only_the_free_slots(slots: int) -> None:
    engine = make_steady(max_evaluations=40)
    first = engine.ask(slots)
    assert len(first) == slots and engine.pending == set(ids(first))
    assert engine.ask(slots) == []  # every slot busy
    engine.tell(first[0].arch_id, measure(first[0].spec))
    assert len(engine.ask(slots)) == 1  # one slot freed, one proposal
    assert len(engine.pending) == slots


def test_a_large_fleet_gets_rounds_of_candidates_screened_from_one_pool() -> None:
    """With 60 slots a round waits for 3 free (`round_size`) and then fills them, each
    candidate screened, none repeated; with fewer slots nothing changes (one pool each)."""
    slots = 60
    size = round_size(slots)
    assert size == 3 and round_size(39) == 1
    engine = make_steady(GPT2Space(), max_evaluations=400, pool_size=64)
    out = engine.ask(slots)
    assert len(out) == INITIAL  # the random design first, then results to model
    for c in out:
        engine.tell(c.arch_id, measure(c.spec))
    first_round = engine.ask(slots)
    assert len(first_round) == slots
    asked = ids(out + first_round)
    for told in range(1, 2 * size + 1):
        engine.tell(first_round[told - 1].arch_id, measure(first_round[told - 1].spec))
        round_ = engine.ask(slots)
        assert len(round_) == (size if told % size == 0 else 0), told
        asked += ids(round_)
        assert all(c.predicted is not None for c in round_)
    assert len(asked) == len(set(asked)) == INITIAL + slots + 2 * size


@pytest.mark.parametrize("cut", [20, 45])
def test_a_restored_engine_proposes_a_large_fleets_rounds_as_the_live_one(cut: int) -> None:
    kwargs = {
        "objectives": list(OBJECTIVES),
        "scorer": score,
        "seed": 3,
        "max_evaluations": 150,
        "population": SMALL_POPULATION,
        "constraints": Constraints(),
        "pool_size": 32,
    }
    live = SteadyStateEngine(GPT2Space(), **kwargs)
    tell_some(live, cut, slots=40, outcome=measure)
    restored = SteadyStateEngine.restore(
        GPT2Space(), history=[tuple(r) for r in live.history()], **kwargs
    )
    assert ids(flat(drive_async(live, slots=40))) == ids(flat(drive_async(restored, slots=40)))


def test_budget_is_exact_with_busy_slots() -> None:
    engine = make_steady(max_evaluations=10)
    batch = engine.ask(8)
    assert len(batch) == 8
    for c in batch[:6]:
        engine.tell(c.arch_id, measure(c.spec))
    assert len(engine.ask(8)) == 2 and engine.proposed == 10  # only 2 left in the budget
    assert engine.ask(8) == [] and not engine.finished  # still waiting for results
    for arch_id in sorted(engine.pending):
        engine.tell(arch_id, None)
    assert engine.finished and engine.finish_reason == "budget"


def test_tiny_space_is_exhausted_without_repeats() -> None:
    population = Population(initial=3, parents=2, mutations=3, crossovers=3)
    engine = make_steady(tiny_space(), population=population, max_evaluations=50, max_attempts=25)
    proposals = flat(drive_async(engine, slots=2))
    assert len(proposals) == 4 == len(set(ids(proposals)))
    assert all(tiny_space().contains(c.spec) for c in proposals)
    assert engine.finish_reason == "exhausted" and engine.ask() == []


# -- initial design and predictions ----------------------------------------------------------
@pytest.mark.parametrize(
    ("scorer", "needed"),
    # Models need len(features) + 3 results: [1, decoder_params, total_params, n_layer] -> 7;
    # with flops as well -> 8.
    [(score, 7), (score_with_flops, 8)],
)
def test_waits_for_enough_results_once_the_initial_design_is_out(scorer, needed: int) -> None:
    engine = make_steady(scorer=scorer, max_evaluations=40)
    initial = engine.ask(INITIAL)
    assert len(initial) == INITIAL and all(c.predicted is None for c in initial)
    for c in initial[: needed - 1]:
        engine.tell(c.arch_id, measure(c.spec))
        assert engine.ask(INITIAL + 8) == []  # too few results to model, the rest pending
    engine.tell(initial[needed - 1].arch_id, measure(initial[needed - 1].spec))
    screened = engine.ask(INITIAL + 8)
    assert len(screened) == (INITIAL + 8) - (INITIAL - needed)  # every free slot filled
    assert all(c.predicted is not None for c in screened)
    assert all(set(c.predicted) == {"latency_ms", "memory_mb"} for c in screened)
    assert all(c.generation == needed for c in screened)  # proposed after `needed` results


def test_too_few_results_and_nothing_pending_still_proposes_at_random() -> None:
    """A small initial design, or one that failed, must not stall the search."""
    population = Population(initial=3, parents=2, mutations=3, crossovers=3)
    engine = make_steady(population=population, max_evaluations=30)
    first = engine.ask(3)
    for c in first:
        engine.tell(c.arch_id, measure(c.spec))
    more = engine.ask(3)  # 3 results < 7 needed, nothing pending: random samples
    assert len(more) == 3 and all(c.predicted is None for c in more)

    failing = make_steady(max_evaluations=30)
    proposals = flat(drive_async(failing, slots=2, fails=lambda spec: True))
    assert len(proposals) == 30 and failing.finish_reason == "budget"
    assert failing.frontier() == [] and all(c.predicted is None for c in proposals)


def test_first_ask_with_more_slots_than_the_initial_design() -> None:
    engine = make_steady(max_evaluations=40)
    assert len(engine.ask(INITIAL + 8)) == INITIAL


def test_screened_candidates_carry_predictions_of_what_the_measurement_tells() -> None:
    engine = make_steady(GPT2Space(), scorer=score_with_flops, max_evaluations=60)
    proposals = flat(drive_async(engine, slots=3))
    initial, later = proposals[:INITIAL], proposals[INITIAL:]
    assert all(c.predicted is None for c in initial)
    assert later and all(c.predicted is not None for c in later)
    assert all(set(c.predicted) == {"latency_ms", "memory_mb"} for c in later)
    # Synthetic latency carries +-20% uniform noise and a depth x size interaction the linear
    # model lacks; memory +-10%. A model worth using still beats, by far, the best constant
    # guess made with hindsight (the median of what was measured).
    for metric, bound in (("latency_ms", 0.3), ("memory_mb", 0.1)):
        actual = [measure(c.spec)[metric] for c in later]
        errors = [abs(c.predicted[metric] / a - 1) for c, a in zip(later, actual)]
        constant = [abs(statistics.median(actual) / a - 1) for a in actual]
        assert statistics.median(errors) < bound, metric
        assert statistics.median(errors) < 0.5 * statistics.median(constant), metric


def test_told_proxy_objectives_and_bounded_metrics_are_predicted() -> None:
    """A proxy the scorer does not give (told by the agents, possibly negative) and a bounded
    metric that is no objective are modelled and predicted; zero-cost proxies are not."""

    def told(spec: GPT2Spec) -> dict[str, float]:
        noise = random.Random(f"synflow:{spec.arch_id}").gauss(0, 0.1)
        return {**measure(spec), "synflow": math.log(decoder_params(spec)) - 13 + noise}

    engine = make_steady(
        objectives=["decoder_params", "memory_mb", "synflow"],
        constraints=Constraints(max_latency_ms=1e6),
        max_evaluations=30,
    )
    while not engine.finished:
        for c in engine.ask(2):
            engine.tell(c.arch_id, told(c.spec))
    values = [told(c.spec)["synflow"] for c in engine.candidates()]
    assert min(values) < 0 < max(values)
    later = [c for c in engine.candidates() if c.predicted is not None]
    assert len(later) == 30 - INITIAL
    assert all(set(c.predicted) == {"memory_mb", "synflow", "latency_ms"} for c in later)


class ParentSpy(SpySpace):
    """SpySpace that also allows crossing a parent with itself (the steady engine draws both
    parents with replacement; such a child only repeats its parent and is dropped)."""

    def crossover(self, a: GPT2Spec, b: GPT2Spec, rng: random.Random, p: float) -> GPT2Spec:
        self.calls += 1
        self.parents += [a.arch_id, b.arch_id]
        return self.space.crossover(a, b, rng, p)


def test_parents_come_from_the_measured_frontier() -> None:
    space = ParentSpy(small_space())
    engine = make_steady(space, max_evaluations=40, pool_size=16)
    rng = random.Random(0)
    bred = 0
    while not engine.finished:
        front = set(ids(engine.frontier()))
        space.parents.clear()
        batch = engine.ask(2)
        if any(c.predicted is not None for c in batch):
            assert space.parents and set(space.parents) <= front
            bred += 1
        if engine.pending:
            arch_id = rng.choice(sorted(engine.pending))
            engine.tell(arch_id, measure(engine.candidate(arch_id).spec))
    assert bred > 10


# -- determinism and restore -----------------------------------------------------------------
def test_same_seed_and_tells_give_the_same_proposals() -> None:
    def run(seed: int, shuffle_seed: int | None) -> list[list[Candidate]]:
        engine = make_steady(seed=seed, max_evaluations=50)
        return drive_async(
            engine, slots=4, tell_at_once=2, shuffle_seed=shuffle_seed, fails=some_fail
        )

    first = run(0, None)
    for again in (run(0, None), run(0, 1)):  # the same sets told, in another order
        assert [ids(b) for b in again] == [ids(b) for b in first]
        assert [c.predicted for c in flat(again)] == [c.predicted for c in flat(first)]
    assert ids(flat(run(1, None)))[:INITIAL] != ids(flat(first))[:INITIAL]


FRONT_START = {"initial_design": "analytic_front"}


@pytest.mark.parametrize(
    ("cut", "settings"),
    [(cut, {}) for cut in (0, 5, 12, 17, 30, 49)]
    + [(cut, {"surrogate": "residual_gp"}) for cut in (17, 30)]
    + [(cut, FRONT_START) for cut in (0, 5, 17)],
)
def test_restored_engine_asks_what_the_live_one_would(cut: int, settings: dict) -> None:
    """Tell `cut` results with slots busy (so rows are pending), restore from the history,
    and continue both identically."""
    kwargs = {
        **settings,
        "objectives": ["decoder_params", "latency_ms", "memory_mb"],
        "scorer": score_with_flops,
        "seed": 7,
        "max_evaluations": 50,
        "population": SMALL_POPULATION,
        "constraints": Constraints(max_memory_mb=1e9, min_decoder_params=1),
        "pool_size": 32,
    }
    live = SteadyStateEngine(small_space(), **kwargs)
    tell_some(live, cut, slots=3, outcome=lambda spec: result(spec, some_fail))
    live.ask(3)
    history = live.history()
    pending_rows = sum(r.values is PENDING for r in history)
    assert pending_rows == len(live.pending) and (cut == 0 or pending_rows > 0)

    restored = SteadyStateEngine.restore(
        small_space(), history=[tuple(r) for r in history], **kwargs
    )
    assert restored.pending == live.pending and restored.told == live.told
    assert restored.candidates() == live.candidates()
    assert ids(restored.frontier()) == ids(live.frontier())
    for step in range(6):  # free a slot, ask both, compare, tell both the same
        for engine in (live, restored):
            if engine.pending:
                arch_id = sorted(engine.pending)[0]
                engine.tell(arch_id, result(engine.candidate(arch_id).spec, some_fail))
        modelled = len(live.measured()) >= 8  # 5 features (flops included) + 3
        a, b = live.ask(3), restored.ask(3)
        assert ids(a) == ids(b), step
        assert [c.predicted for c in a] == [c.predicted for c in b]
        for c in a:  # predictions exactly when past the initial design with models fitted
            index = ids(live.candidates()).index(c.arch_id)
            assert (c.predicted is not None) == (index >= INITIAL and modelled)
    assert ids(flat(drive_async(live, slots=3))) == ids(flat(drive_async(restored, slots=3)))
    assert live.finish_reason == restored.finish_reason == "budget"


def test_restore_of_a_finished_search_from_dict_specs() -> None:
    live = make_steady(max_evaluations=30)
    drive_async(live, slots=2, fails=some_fail)
    history = [(r.spec.to_dict(), r.generation, r.values) for r in live.history()]
    restored = SteadyStateEngine.restore(
        small_space(),
        history=history,
        objectives=list(OBJECTIVES),
        scorer=score,
        seed=0,
        max_evaluations=30,
        population=SMALL_POPULATION,
    )
    assert restored.finished and restored.finish_reason == "budget" and restored.ask() == []
    assert restored.frontier() == live.frontier()


# -- constraints and failures ----------------------------------------------------------------
def test_decoder_param_bounds_are_checked_before_proposing() -> None:
    space = GPT2Space()
    sizes = sorted(decoder_params(space.sample(random.Random(i))) for i in range(200))
    lo, hi = sizes[60], sizes[140]
    scored: list[str] = []

    def counting(spec: GPT2Spec) -> dict[str, float]:
        scored.append(spec.arch_id)
        return score_with_flops(spec)

    engine = make_steady(
        space,
        scorer=counting,
        constraints=Constraints(min_decoder_params=lo, max_decoder_params=hi),
        max_evaluations=50,
    )
    proposals = flat(drive_async(engine, slots=3))
    assert len(proposals) == 50 and engine.finish_reason == "budget"
    assert all(lo <= decoder_params(c.spec) <= hi for c in proposals)
    assert len(set(scored)) > len(proposals)  # some offspring were rejected unproposed


def latency_quantile(space: GPT2Space, q: float) -> tuple[float, float]:
    """A latency bound at quantile q of random members, and the share of 2,000 fresh random
    members (what the initial design samples from) that meet it."""
    rng = random.Random("bound")
    latencies = sorted(measure(space.sample(rng))["latency_ms"] for _ in range(400))
    bound = latencies[int(q * len(latencies))]
    check = random.Random("share")
    share = np.mean([measure(space.sample(check))["latency_ms"] <= bound for _ in range(2000)])
    return bound, float(share)


def test_predicted_infeasible_candidates_are_not_preferred() -> None:
    space = GPT2Space()
    bound, random_share = latency_quantile(space, 0.25)
    constraints = Constraints(max_latency_ms=bound)
    shares, initial_feasible = [], []
    for seed in range(3):
        engine = make_steady(
            space, scorer=score_with_flops, constraints=constraints, seed=seed, max_evaluations=60
        )
        proposals = flat(drive_async(engine, slots=3))
        screened = [c for c in proposals if c.predicted is not None]
        assert len(screened) == 60 - INITIAL
        shares.append(np.mean([engine.is_feasible(c.arch_id) for c in screened]))
        initial_feasible += [engine.is_feasible(c.arch_id) for c in proposals[:INITIAL]]
        front = engine.frontier()
        assert front and all(measure(c.spec)["latency_ms"] <= bound for c in front)
    # Random members meet the bound about a quarter of the time; screened proposals far more.
    assert 0.15 < random_share < 0.35
    assert min(shares) > random_share and statistics.median(shares) > 1.4 * random_share
    assert statistics.median(shares) > np.mean(initial_feasible)


def test_optimism_decides_which_predictions_count_as_feasible() -> None:
    """optimism=0 screens on the prediction the candidate carries: nearly every pick is
    predicted within the bound (a predicted-infeasible one only when the whole pool is).
    With optimism the screen judges latency a few typical residuals lower, so picks whose
    mean prediction misses the bound get through, and more often the more optimistic."""
    space = GPT2Space()
    bound, _ = latency_quantile(space, 0.25)
    within = {}
    for optimism in (0.0, 2.0):
        engine = make_steady(
            space,
            scorer=score_with_flops,
            constraints=Constraints(max_latency_ms=bound),
            optimism=optimism,
            max_evaluations=60,
        )
        screened = [c for c in flat(drive_async(engine, slots=3)) if c.predicted is not None]
        assert len(screened) == 60 - INITIAL
        within[optimism] = np.mean([c.predicted["latency_ms"] <= bound for c in screened])
    assert within[0.0] > 0.9
    assert within[2.0] < within[0.0] - 0.2, within


def test_failures_stay_off_the_frontier_and_the_search_goes_on() -> None:
    engine = make_steady(max_evaluations=80)
    proposals = flat(drive_async(engine, slots=4, fails=some_fail))
    failed = {c.arch_id for c in proposals if some_fail(c.spec)}
    assert failed and len(proposals) == 80 == len(set(ids(proposals)))
    assert engine.finish_reason == "budget"
    assert not failed & set(ids(engine.frontier()))
    assert all(engine.objective_values(a) is None for a in failed)
    assert any(c.predicted is not None for c in proposals)


def test_a_residual_model_that_cannot_be_fitted_falls_back_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The residual Gaussian process fails to fit (injected): the search goes on, screened by
    the plain cost models, and the engine hands out the reason once, not once a round."""

    def cannot_fit(*args: Any, **kwargs: Any) -> None:
        raise np.linalg.LinAlgError("the kernel matrix is not positive definite")

    engine = make_steady(surrogate="residual_gp", max_evaluations=40)
    monkeypatch.setattr("search.residual.ResidualModel", cannot_fit)
    proposals = flat(drive_async(engine, slots=2))
    assert len(proposals) == 40 and engine.finish_reason == "budget"
    assert sum(c.predicted is not None for c in proposals) >= 40 - INITIAL - 2
    [reason] = engine.take_fallbacks()
    assert "LinAlgError: the kernel matrix is not positive definite" in reason
    assert "plain cost models" in reason
    assert engine.take_fallbacks() == []


def test_the_residual_surrogate_screens_like_the_plain_one_when_it_fits() -> None:
    engine = make_steady(surrogate="residual_gp", scorer=score_with_flops, max_evaluations=40)
    proposals = flat(drive_async(engine, slots=2))
    assert engine.take_fallbacks() == []
    assert sum(c.predicted is not None for c in proposals) >= 40 - INITIAL - 2


def test_an_unknown_surrogate_is_refused_with_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="surrogate: must be one of cost_model, residual_gp"):
        make_steady(surrogate="forest")


def test_an_unknown_initial_design_is_refused_with_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="initial_design: must be one of random, analytic_front"):
        make_steady(initial_design="latin")


@pytest.mark.parametrize("surrogate", ["cost_model", "residual_gp"])
def test_a_candidate_under_way_holds_the_gap_it_was_sent_for(surrogate: str) -> None:
    """The next proposal screens against a frontier where the candidate still being measured
    stands at the optimistic prediction it was picked for, not at its mean: otherwise the
    part of its gap between the two draws the next agent to the same place."""
    engine = make_steady(mid_space(), surrogate=surrogate, max_evaluations=100)
    while engine.told < 30:
        (done,) = engine.ask(1)
        engine.tell(done.arch_id, measure(done.spec))
    (under_way,) = engine.ask(1)
    models, normaliser = engine._fit_models(), engine._normaliser()
    pair = [(under_way.spec, under_way.proxies)]
    hoped = normaliser.points(engine._predict(models, pair, optimistic=True))[0]
    mean = normaliser.points(engine._predict(models, pair))[0]
    # the proxy is known; optimism moves the two objectives the measurement tells
    assert (hoped <= mean).all() and (hoped < mean).sum() == 2
    believed = engine._believed_points(models, normaliser, [])
    assert any(np.allclose(p, hoped) for p in believed)
    assert not any(np.allclose(p, mean) for p in believed)


def test_an_unknown_value_per_is_refused_with_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="value_per: must be one of measurement, device_second"):
        make_steady(value_per="hour")


def timed(spec: GPT2Spec) -> dict[str, float]:
    """A measurement that tells its cost: a fixed build and timing base plus time that grows
    with the model's latency, as the agent's own measurements do on a CPU."""
    values = measure(spec)
    return {**values, DEVICE_SECONDS: 2.0 + 0.1 * values["latency_ms"]}


def test_proposals_weigh_added_volume_against_predicted_device_seconds() -> None:
    """With value_per "device_second" the engine models the seconds measurements told and
    prefers, among offspring that add volume, the ones cheap to measure; with "measurement"
    (or before any measurement told its seconds) it weighs every one alike."""
    picked: dict[str, list[float]] = {}
    for value_per in VALUES_PER:
        engine = make_steady(mid_space(), value_per=value_per, max_evaluations=60)
        cost: list[float] = []
        while not engine.finished:
            (candidate,) = engine.ask(1)
            got = timed(candidate.spec)
            engine.tell(candidate.arch_id, got)
            if candidate.predicted is not None:
                cost.append(got[DEVICE_SECONDS])
        picked[value_per] = cost
        pool = [(c.spec, c.proxies) for c in engine.candidates()]
        predicted = engine._costs(pool)
        if value_per == "measurement":
            assert predicted is None
            continue
        assert predicted is not None
        told = [timed(spec)[DEVICE_SECONDS] for spec, _ in pool]
        assert np.corrcoef(predicted, told)[0, 1] > 0.95
    # the screened proposals cost less, in sum, when their seconds count
    assert sum(picked["device_second"]) < 0.9 * sum(picked["measurement"])


def test_without_told_device_seconds_proposals_weigh_every_measurement_alike() -> None:
    plain = make_steady(mid_space(), value_per="measurement", max_evaluations=40)
    weighed = make_steady(mid_space(), value_per="device_second", max_evaluations=40)
    assert ids(flat(drive_async(plain, slots=1))) == ids(flat(drive_async(weighed, slots=1)))
    assert weighed._costs([(c.spec, c.proxies) for c in weighed.candidates()]) is None


def test_a_large_fleet_screens_fewer_offspring_per_proposal() -> None:
    """Up to 4 agents, each proposal breeds the whole pool; beyond, it shrinks in proportion to
    no less than 256 (or the pool asked for, if smaller), so a proposal's CPU, which the server
    spends once per result, does not grow with the fleet's results per second."""
    assert [screening_pool(1024, s) for s in (1, 4, 8, 16, 1000)] == [1024, 1024, 512, 256, 256]
    assert screening_pool(32, 1000) == 32
    bred: dict[int, float] = {}
    for slots in (1, 16):
        engine = make_steady(mid_space(), pool_size=1024, max_evaluations=100)
        while engine.told < INITIAL:
            for done in engine.ask(INITIAL):
                engine.tell(done.arch_id, measure(done.spec))
        admit, calls = engine._admit, []

        def counted(spec: GPT2Spec, admit: Any = admit, calls: list[int] = calls) -> Any:
            calls.append(1)
            return admit(spec)

        engine._admit = counted  # type: ignore[method-assign]
        proposed = engine.ask(slots)
        assert len(proposed) == slots
        bred[slots] = len(calls) / slots
    # dedupe and inadmissible offspring make the counts a little lower than the sizes
    assert 900 <= bred[1] <= 1024
    assert 200 <= bred[16] <= 256


# -- screening pays: hypervolume against LTS -------------------------------------------------
def extreme_normaliser(space: GPT2Space) -> Normaliser:
    """Ideal and reference from the space's extremes and the synthetic hardware's noise
    bounds: every corner of the genes (depth, width, feed-forward, embedding) is scored."""
    specs = []
    for n_layer, d_model, d_embed, div_val in itertools.product(
        (space.n_layer.min, space.n_layer.max), space.d_model.values(), space.d_embed, space.div_val
    ):
        inners = space.d_inner.values(lower=math.ceil(space.d_inner_min_factor * d_model))
        heads = [h for h in space.n_head if d_model % h == 0]
        if not inners or not heads:
            continue  # no member has this width
        for d_inner in (inners[0], inners[-1]):
            spec = GPT2Spec(
                n_layer=n_layer,
                d_model=d_model,
                d_inner=(d_inner,) * n_layer,
                n_head=(heads[0],) * n_layer,
                d_embed=d_embed,
                div_val=div_val,
                cutoffs=space.cutoffs,
                vocab_size=space.vocab_size,
                n_positions=space.n_positions,
            )
            assert space.contains(spec)
            specs.append(spec)
    dp = [decoder_params(s) for s in specs]
    tp = [total_params(s) for s in specs]
    # measure(): latency = dp * 1e-5 * (1 + 0.1 n_layer) * U(0.8, 1.2),
    #            memory = tp * 4 / 2^20 * U(0.9, 1.1)
    lo_depth, hi_depth = space.n_layer.min, space.n_layer.max
    ideal = {
        "decoder_params": max(dp),
        "latency_ms": min(dp) * 1e-5 * (1 + 0.1 * lo_depth) * 0.8,
        "memory_mb": min(tp) * 4 / 2**20 * 0.9,
    }
    reference = {
        "decoder_params": min(dp),
        "latency_ms": max(dp) * 1e-5 * (1 + 0.1 * hi_depth) * 1.2,
        "memory_mb": max(tp) * 4 / 2**20 * 1.1,
    }
    return Normaliser(OBJECTIVES, ideal, reference)


def final_hypervolume(engine, normaliser: Normaliser) -> float:
    rows = [engine.objective_values(c.arch_id) for c in engine.frontier()]
    points = normaliser.points(rows)
    assert ((points >= 0) & (points <= 1)).all()  # the extremes really bound every result
    return hypervolume(points)


def test_screening_beats_lts_at_the_same_budget() -> None:
    space = mid_space()
    normaliser = extreme_normaliser(space)
    steady, lts = [], []
    for seed in range(5):
        common = {
            "objectives": list(OBJECTIVES),
            "scorer": score_with_flops,
            "seed": seed,
            "max_evaluations": 120,
            "population": SMALL_POPULATION,
        }
        ours = SteadyStateEngine(space, pool_size=64, **common)
        drive_async(ours, slots=4, order_seed=seed)
        theirs = LTSEngine(space, **common)
        drive(theirs)
        assert ours.proposed == theirs.proposed == 120
        steady.append(final_hypervolume(ours, normaliser))
        lts.append(final_hypervolume(theirs, normaliser))
    assert statistics.median(steady) > statistics.median(lts) + 0.02, (steady, lts)
    assert sum(s > t for s, t in zip(steady, lts, strict=True)) >= 4, (steady, lts)
