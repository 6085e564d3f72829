"""Factories for the search tests: small spaces and populations, synthetic hardware, a driver.

A plain module, not conftest.py: tests import these helpers by name, and a module called
`conftest` could resolve to another test directory's conftest.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np

from archvocab.spaces.gpt2.space import GPT2Space, IntRange
from archvocab.spaces.gpt2.spec import GPT2Spec
from archvocab.wire import Constraints, Population
from proxies.params import decoder_params, total_params
from search.engine import Engine
from search.records import Candidate
from search.strategies.lts import LTSEngine

SMALL_POPULATION = Population(initial=12, parents=4, mutations=6, crossovers=6)
OBJECTIVES = ["decoder_params", "latency_ms", "memory_mb"]


def tiny_space() -> GPT2Space:
    """Exactly four members: two layers of d_inner 256 or 320, everything else fixed."""
    return GPT2Space(
        n_layer=IntRange(2, 2),
        d_model=IntRange(128, 128, 64),
        d_inner=IntRange(256, 320, 64),
        n_head=(2,),
        d_embed=(128,),
        div_val=(1,),
    )


def small_space() -> GPT2Space:
    """About 1,350 members: big enough to search, small enough to collide often."""
    return GPT2Space(
        n_layer=IntRange(2, 3),
        d_model=IntRange(128, 192, 64),
        d_inner=IntRange(256, 512, 64),
        n_head=(2, 4),
        d_embed=(128,),
        div_val=(1,),
    )


def score(spec: GPT2Spec) -> dict[str, float]:
    return {
        "decoder_params": float(decoder_params(spec)),
        "total_params": float(total_params(spec)),
    }


def measure(spec: GPT2Spec) -> dict[str, float]:
    """Synthetic hardware: cost grows with size and depth, plus noise seeded by the arch_id."""
    noise = random.Random(spec.arch_id)
    latency = decoder_params(spec) * 1e-5 * (1 + 0.1 * spec.n_layer) * (0.8 + 0.4 * noise.random())
    memory = total_params(spec) * 4 / 2**20 * (0.9 + 0.2 * noise.random())
    return {"latency_ms": latency, "memory_mb": memory}


def make_engine(space: Any = None, *, engine: type[Engine] = LTSEngine, **overrides: Any) -> Any:
    """An engine of any strategy over small_space() (or `space`) with small test defaults."""
    kwargs: dict[str, Any] = {
        "objectives": list(OBJECTIVES),
        "scorer": score,
        "seed": 0,
        "max_evaluations": 60,
        "population": SMALL_POPULATION,
        "constraints": Constraints(),
    }
    kwargs.update(overrides)
    return engine(small_space() if space is None else space, **kwargs)


def drive(
    engine: LTSEngine,
    *,
    fails: Callable[[GPT2Spec], bool] = lambda spec: False,
    shuffle_seed: int | None = None,
    max_generations: int = 200,
) -> list[list[Candidate]]:
    """Ask and tell until the engine finishes; returns the generations it proposed."""
    generations = []
    rng = random.Random(shuffle_seed)
    for _ in range(max_generations):
        batch = engine.ask()
        if not batch:
            assert engine.finished, "ask() returned nothing while the engine is still running"
            return generations
        generations.append(batch)
        told = list(batch)
        if shuffle_seed is not None:
            rng.shuffle(told)
        for candidate in told:
            engine.tell(
                candidate.arch_id, None if fails(candidate.spec) else measure(candidate.spec)
            )
    raise AssertionError(f"engine did not finish within {max_generations} generations")


def minimised(engine: LTSEngine, arch_id: str) -> np.ndarray:
    values = engine.objective_values(arch_id)
    assert values is not None
    sense = {"decoder_params": -1.0, "total_params": -1.0, "latency_ms": 1.0, "memory_mb": 1.0}
    return np.array([sense[name] * values[name] for name in engine.objectives])


class SpySpace:
    """Wraps a space and records every operator call and the parents it was given."""

    def __init__(self, space: GPT2Space) -> None:
        self.space = space
        self.calls = 0
        self.parents: list[str] = []

    def sample(self, rng: random.Random) -> GPT2Spec:
        self.calls += 1
        return self.space.sample(rng)

    def mutate(self, spec: GPT2Spec, rng: random.Random, p: float) -> GPT2Spec:
        self.calls += 1
        self.parents.append(spec.arch_id)
        return self.space.mutate(spec, rng, p)

    def crossover(self, a: GPT2Spec, b: GPT2Spec, rng: random.Random, p: float) -> GPT2Spec:
        self.calls += 1
        assert a.arch_id != b.arch_id, "crossover of a parent with itself can only repeat it"
        self.parents += [a.arch_id, b.arch_id]
        return self.space.crossover(a, b, rng, p)
