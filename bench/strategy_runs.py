"""One search by each strategy against the replayed device, one measurement at a time (one
agent), recorded as a hypervolume curve under the fixed normalisation (bench.normalisation):
`lts` (LTS Algorithm 1 with the paper's population), `hwnas` (steady-state + surrogate
screening, steered by the fixed normalisation), `nsga2` (pymoo's NSGA-II) and the peer
`optuna` (Optuna's NSGA-II sampler, bench.peers.optuna_peer)."""

from __future__ import annotations

import time
from typing import Any

from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec
from archvocab.wire import NoiseSettings, Population
from bench.curve import Curve
from bench.normalisation import OBJECTIVES, score
from bench.peers.optuna_peer import run_optuna_nsga2
from bench.replay import DeviceReplay
from search.engine import Engine
from search.hypervolume import Normaliser
from search.noise import steering_widths
from search.strategies.hwnas import SteadyStateEngine
from search.strategies.lts import LTSEngine
from search.strategies.nsga2 import NSGA2Engine

STRATEGIES = ("lts", "hwnas", "nsga2", "optuna")
HWNAS_INITIAL = 32
PEER_POPULATION = 100
# The noise hwnas's frontier allows for, as a search on this CPU class gets it
# (server.services.engines).
TOLERANCE = steering_widths("cpu", NoiseSettings().confidence)


def make_engine(
    strategy: str, space: GPT2Space, seed: int, budget: int, normaliser: Normaliser
) -> Engine:
    common: dict[str, Any] = {
        "objectives": OBJECTIVES,
        "scorer": score,
        "seed": seed,
        "max_evaluations": budget,
    }
    if strategy == "lts":
        return LTSEngine(space, population=Population(), **common)
    if strategy == "hwnas":
        population = Population(initial=HWNAS_INITIAL)
        return SteadyStateEngine(
            space, population=population, normaliser=normaliser, tolerance=TOLERANCE, **common
        )
    if strategy == "nsga2":
        return NSGA2Engine(space, population=Population(initial=PEER_POPULATION), **common)
    raise ValueError(f"not an engine strategy: {strategy}")


def run_engine(engine: Engine, replay: DeviceReplay, curve: Curve) -> None:
    """Ask, measure one candidate at a time on the replayed device, tell, record."""
    while not engine.finished:
        batch = engine.ask(1)
        if not batch:
            if not engine.finished:
                raise RuntimeError(f"{engine.strategy}: nothing proposed, search not finished")
            break
        for candidate in batch:
            got = replay.measure(candidate.spec)
            told = {"latency_ms": got.latency_ms, "memory_mb": got.memory_mb}
            engine.tell(candidate.arch_id, told)
            curve.add({**candidate.proxies, **told}, got.wall_s, got.from_table)


def run_optuna(
    space: GPT2Space, replay: DeviceReplay, curve: Curve, seed: int, budget: int
) -> None:
    """The peer's search (its own ask/tell loop), recorded in `curve` in its order."""

    def measure(spec: GPT2Spec) -> dict[str, float]:
        got = replay.measure(spec)
        return {
            "latency_ms": got.latency_ms,
            "memory_mb": got.memory_mb,
            "wall_s": got.wall_s,
            "from_table": float(got.from_table),
        }

    found = run_optuna_nsga2(
        space, measure, score, budget=budget, seed=seed, population_size=PEER_POPULATION
    )
    for _, values in found:
        curve.add(values, values["wall_s"], values["from_table"] > 0)


def run_one(
    strategy: str,
    space: GPT2Space,
    replay: DeviceReplay,
    normaliser: Normaliser,
    seed: int,
    budget: int,
) -> dict[str, Any]:
    """One search; its curve and the benchmark's own wall time for it."""
    curve = Curve(normaliser)
    start = time.perf_counter()
    if strategy == "optuna":
        run_optuna(space, replay, curve, seed, budget)
    else:
        run_engine(make_engine(strategy, space, seed, budget, normaliser), replay, curve)
    return {
        "seed": seed,
        "budget": budget,
        "measurements": len(curve.hv),
        "from_table": curve.from_table,
        "wall_s": time.perf_counter() - start,
        "hv": [round(h, 6) for h in curve.hv],
        "device_s": [round(d, 2) for d in curve.device_s],
    }
