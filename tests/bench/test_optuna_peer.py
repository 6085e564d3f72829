"""bench.peers.optuna_peer: Optuna's NSGA-II as a peer baseline on the GPT-2 space."""

from __future__ import annotations

import math
import random

import moocore
import numpy as np
import pytest

from archvocab.spaces.gpt2.space import GPT2Space, IntRange
from archvocab.spaces.gpt2.spec import GPT2Spec
from bench.peers.optuna_peer import MAX_TRIALS_PER_BUDGET, SAMPLERS, PeerRun, run_optuna
from proxies.params import decoder_params, total_params

# Small enough to stay fast, large enough (millions of members) that repeats are rare.
SMALL = GPT2Space(
    n_layer=IntRange(2, 4), d_model=IntRange(128, 256, 64), d_inner=IntRange(256, 1024, 64)
)
# Four members in all: d_inner in {256, 320} for each of two layers.
TINY = GPT2Space(
    n_layer=IntRange(2, 2),
    d_model=IntRange(128, 128, 64),
    d_inner=IntRange(256, 320, 64),
    n_head=(2,),
    d_embed=(128,),
    div_val=(1,),
)


def score(spec: GPT2Spec) -> dict[str, float]:
    return {
        "decoder_params": float(decoder_params(spec)),
        "total_params": float(total_params(spec)),
    }


def measure(spec: GPT2Spec) -> dict[str, float]:
    """A deterministic stand-in device: per-layer and per-head overheads make some shapes
    cheaper per parameter than others, so there is something for a search to learn; a
    1.5% log-normal noise seeded by the arch id, as the replayed device has."""
    rng = random.Random(int(spec.arch_id, 16))
    latency = 0.2 * spec.n_layer + 0.05 * sum(spec.n_head) + decoder_params(spec) / 1e6
    memory = total_params(spec) * 4 / 2**20 + 0.002 * spec.d_model * spec.n_layer
    return {
        "latency_ms": latency * math.exp(rng.gauss(0, 0.015)),
        "memory_mb": memory * math.exp(rng.gauss(0, 0.015)),
        "device_s": 0.1,  # an extra key the peer must keep
    }


def ids(results: list[tuple[object, dict[str, float]]]) -> list[str]:
    return [spec.arch_id for spec, _ in results]


def test_budget_distinct_members_with_all_objectives() -> None:
    results = run_optuna(SMALL, measure, score, budget=120, seed=0, population_size=30).measured
    assert len(results) == 120
    assert len(set(ids(results))) == 120
    for spec, values in results:
        SMALL.check_member(spec)  # raises InvalidSpec for a non-member
        assert values == {**score(spec), **measure(spec)}
        assert {"decoder_params", "latency_ms", "memory_mb", "device_s"} <= set(values)


def test_same_seed_same_sequence_other_seed_other_sequence() -> None:
    def run(seed: int) -> list[str]:
        return ids(
            run_optuna(SMALL, measure, score, budget=60, seed=seed, population_size=20).measured
        )

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_repeats_are_not_measured_again_and_the_loop_ends() -> None:
    """In a four-member space NSGA-II keeps proposing repeats: each member is measured once,
    and asking for more members than exist stops at the trial cap with all four."""
    calls: list[str] = []

    def counting_measure(spec: GPT2Spec) -> dict[str, float]:
        calls.append(spec.arch_id)
        return measure(spec)

    run = run_optuna(TINY, counting_measure, score, budget=10, seed=0, population_size=4)
    assert len(run.measured) == 4
    assert sorted(calls) == sorted(set(calls)) == sorted(ids(run.measured))
    assert run.trials == MAX_TRIALS_PER_BUDGET * 10 and run.repeats == run.trials - 4


@pytest.mark.parametrize("sampler", ["tpe", "gp"])
def test_the_other_samplers_measure_distinct_members_by_their_seed(sampler: str) -> None:
    """TPE and the GP sampler as their users get them: default settings, the run's seed.
    (Both model only after 10 random trials, and a GP trial costs seconds here: 11.)"""

    def run(seed: int) -> PeerRun:
        return run_optuna(SMALL, measure, score, budget=11, seed=seed, sampler=sampler)

    first = run(1)
    assert len(first.measured) == len(set(ids(first.measured))) == 11
    for spec, values in first.measured:
        SMALL.check_member(spec)
        assert values == {**score(spec), **measure(spec)}
    assert ids(run(1).measured) == ids(first.measured)
    assert ids(run(2).measured) != ids(first.measured)


def test_samplers_are_told_apart_and_an_unknown_one_is_refused() -> None:
    runs = {s: run_optuna(SMALL, measure, score, budget=11, seed=0, sampler=s) for s in SAMPLERS}
    assert len({ids(r.measured)[-1] for r in runs.values()}) == len(SAMPLERS)
    with pytest.raises(ValueError, match="nsga2, tpe, gp"):
        run_optuna(SMALL, measure, score, budget=5, seed=0, sampler="cmaes")


def test_later_generations_dominate_more_hypervolume() -> None:
    """NSGA-II does something: the last 100 architectures measured cover more hypervolume
    than the first 100 (the initial random population and its first offspring). Uniform
    random sampling has no such drift: with this setup its ratio stayed below 1.0 for each of
    seeds 0-9, NSGA-II's lay between 1.02 and 1.10."""
    results = run_optuna(SMALL, measure, score, budget=300, seed=0, population_size=30).measured
    # Every objective minimised, then scaled to [0, 1] over all 300 so none dominates the volume.
    points = np.array([[-v["decoder_params"], v["latency_ms"], v["memory_mb"]] for _, v in results])
    low, high = points.min(axis=0), points.max(axis=0)
    scaled = (points - low) / (high - low)
    ref = np.full(3, 1.1)
    first = moocore.hypervolume(scaled[:100], ref=ref)
    last = moocore.hypervolume(scaled[-100:], ref=ref)
    assert last > 1.01 * first
