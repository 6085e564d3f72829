"""One search by each strategy against the replayed device, one measurement at a time (one
agent), recorded as a hypervolume curve under the fixed normalisation (bench.normalisation):
`lts` (LTS Algorithm 1 with the paper's population), `hwnas` (steady-state + surrogate
screening, with its defaults and steered as the server steers it: nothing of the benchmark's
yardstick handed in), `hwnas-residual-gp` (the same with surrogate "residual_gp": the cost
models corrected by a Gaussian process of their residuals), `hwnas-per-second` (the same
weighing each proposal by its predicted device-seconds: value_per "device_second"),
`nsga2` (pymoo's NSGA-II) and the peers `optuna-nsga2`, `optuna-tpe` and `optuna-gp`
(Optuna's samplers as their users write them, bench.peers.optuna_peer) and `archai`
(Archai 1.0.0's EvolutionParetoSearch, an optional extra: bench.peers.archai_peer)."""

from __future__ import annotations

import statistics
import time
from typing import Any

from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec
from archvocab.wire import NoiseSettings, Population, SearchCreate
from bench.curve import Curve
from bench.in_flight import InFlight
from bench.normalisation import OBJECTIVES, score
from bench.peers.archai_peer import available as archai_available
from bench.peers.archai_peer import run_archai
from bench.peers.optuna_peer import PeerRun, run_optuna
from bench.replay import DeviceReplay
from search.engine import Engine
from search.hypervolume import Normaliser
from search.noise import steering_widths
from search.records import DEVICE_SECONDS
from search.strategies.hwnas import SteadyStateEngine
from search.strategies.lts import LTSEngine
from search.strategies.nsga2 import NSGA2Engine
from server.services.quality import FIRST_RESULTS, fixed_from_first, initial_normalisation

OPTUNA = {"optuna-nsga2": "nsga2", "optuna-tpe": "tpe", "optuna-gp": "gp"}  # -> sampler
# hwnas's contenders -> what they change of its defaults (search.strategies.hwnas: SURROGATES,
# VALUES_PER)
HWNAS: dict[str, dict[str, Any]] = {
    "hwnas": {},
    "hwnas-residual-gp": {"surrogate": "residual_gp"},
    "hwnas-per-second": {"value_per": "device_second"},
    "hwnas-random-start": {"initial_design": "random"},
}
# The general-purpose optimisers hwnas is measured against (issue 22's peers).
PEERS = (*OPTUNA, "archai")
STRATEGIES = ("lts", *HWNAS, "nsga2", *PEERS)
PEER_POPULATION = 100
# The noise hwnas's frontier allows for, as a search on this CPU class gets it
# (server.services.engines).
TOLERANCE = steering_widths("cpu", NoiseSettings().confidence)


def make_engine(
    strategy: str, space: GPT2Space, seed: int, budget: int, initial: int | None = None
) -> Engine:
    """The strategy's engine with its defaults; `initial` replaces hwnas's initial design."""
    common: dict[str, Any] = {
        "objectives": OBJECTIVES,
        "scorer": score,
        "seed": seed,
        "max_evaluations": budget,
    }
    if strategy == "lts":
        return LTSEngine(space, population=Population(), **common)
    if strategy in HWNAS:  # its defaults (SearchCreate's), its own normalisation
        request = SearchCreate(strategy="hwnas")
        population = request.population
        if initial is not None:
            population = population.model_copy(update={"initial": initial})
        settings = {
            "surrogate": request.surrogate,
            "value_per": request.value_per,
            "initial_design": request.initial_design,
            **HWNAS[strategy],
        }
        return SteadyStateEngine(
            space, population=population, tolerance=TOLERANCE, **settings, **common
        )
    if strategy == "nsga2":
        return NSGA2Engine(space, population=Population(initial=PEER_POPULATION), **common)
    raise ValueError(f"not an engine strategy: {strategy}")


def run_engine(
    engine: Engine,
    replay: DeviceReplay,
    curve: Curve,
    steer: Steer | None = None,
    in_flight: InFlight | None = None,
) -> list[float]:
    """Ask, measure on the replayed device, tell, record; with `steer`, hand the engine the
    normalisation the server fixes after the first results. One agent measures one candidate
    at a time, or `in_flight`'s agents measure at once: each is handed the next proposal as it
    comes free, the engine asked with the agents as its slots (the server's measuring slots),
    and results are told in the order they finish on the replayed clock. A generation bigger
    than the agents waits its turn in a queue. Returns the seconds each proposal round took."""
    if in_flight is None:
        in_flight = InFlight(engine.space, 1)
    rounds: list[float] = []
    waiting: list = []  # proposed, no agent free yet (a generational strategy's generation)
    while True:
        while in_flight.free and not engine.finished:
            if not waiting:
                start = time.perf_counter()
                waiting = list(engine.ask(in_flight.agents))
                rounds.append(time.perf_counter() - start)
                if not waiting:
                    break
            candidate = waiting.pop(0)
            got = replay.measure(candidate.spec)
            in_flight.start(candidate.spec, got.wall_s, (candidate, got))
        if not len(in_flight):
            if not engine.finished:
                raise RuntimeError(f"{engine.strategy}: nothing proposed, search not finished")
            return rounds
        candidate, got = in_flight.finish()
        told = {"latency_ms": got.latency_ms, "memory_mb": got.memory_mb}
        engine.tell(candidate.arch_id, {**told, DEVICE_SECONDS: got.wall_s})
        curve.add({**candidate.proxies, **told}, got.wall_s, got.from_table)
        if steer is not None:
            steer.told(engine, {**candidate.proxies, **told})


class Steer:
    """What the server does for a search's engine (server.services.quality): once
    `FIRST_RESULTS` measurements are in, the search's normalisation is fixed from them and
    handed to the engine, which steered by its own adaptive one until then."""

    def __init__(self, request: SearchCreate) -> None:
        self._request = request
        self._initial = initial_normalisation(request)
        self._first: list[dict[str, float]] = []

    def told(self, engine: Engine, values: dict[str, float]) -> None:
        self._first.append(values)
        if len(self._first) == FIRST_RESULTS:
            fixed = fixed_from_first(self._initial, self._request, self._first)
            objectives = self._request.objectives
            engine.use_normaliser(Normaliser(objectives, fixed["ideal"], fixed["reference"]))


def peer_search(
    peer: str,
    space: GPT2Space,
    measure: Any,
    seed: int,
    budget: int,
    in_flight: InFlight | None = None,
) -> PeerRun:
    """One of `PEERS` searching with its own loop, measuring through `measure(spec)`."""
    if peer == "archai":
        return run_archai(space, measure, score, budget=budget, seed=seed, in_flight=in_flight)
    return run_optuna(
        space,
        measure,
        score,
        budget=budget,
        seed=seed,
        sampler=OPTUNA[peer],
        population_size=PEER_POPULATION,
        in_flight=in_flight,
    )


def without_missing(names: list[str], say: Any) -> list[str]:
    """`names` less the optional peers not installed here, each skipped with a message that
    says why and how to install it."""
    missing = archai_available() if "archai" in names else None
    if missing is None:
        return names
    say(f"skipping archai: {missing}")
    return [n for n in names if n != "archai"]


def run_peer(
    peer: str,
    space: GPT2Space,
    replay: DeviceReplay,
    curve: Curve,
    seed: int,
    budget: int,
    in_flight: InFlight | None = None,
) -> int:
    """A peer's search (its own ask/tell loop), recorded in `curve` in its order; the trials
    it asked for that repeated an architecture it had measured (or one under way, with
    `in_flight`'s agents)."""

    def measure(spec: GPT2Spec) -> dict[str, float]:
        got = replay.measure(spec)
        return {
            "latency_ms": got.latency_ms,
            "memory_mb": got.memory_mb,
            "wall_s": got.wall_s,
            "from_table": float(got.from_table),
        }

    run = peer_search(peer, space, measure, seed, budget, in_flight)
    for _, values in run.measured:
        curve.add(values, values["wall_s"], values["from_table"] > 0)
    return run.repeats


def run_one(
    strategy: str,
    space: GPT2Space,
    replay: DeviceReplay,
    normaliser: Normaliser,
    seed: int,
    budget: int,
    initial: int | None = None,
    agents: int = 1,
) -> dict[str, Any]:
    """One search; its curve and the benchmark's own wall time for it (`initial`: hwnas's
    initial design, in place of its default; `agents` measuring at once, replayed)."""
    curve = Curve(normaliser)
    start = time.perf_counter()
    repeats = 0
    rounds: list[float] = []
    in_flight = InFlight(space, agents)
    if strategy in PEERS:
        repeats = run_peer(strategy, space, replay, curve, seed, budget, in_flight)
    else:
        steer = None
        if strategy in HWNAS:  # steered as the server steers a search of this space
            steer = Steer(SearchCreate(strategy="hwnas", space=space.to_dict(), seed=seed))
        engine = make_engine(strategy, space, seed, budget, initial)
        rounds = run_engine(engine, replay, curve, steer, in_flight)
    return {
        "seed": seed,
        "budget": budget,
        "measurements": len(curve.hv),
        "repeats": repeats,
        "from_table": curve.from_table,
        "wall_s": time.perf_counter() - start,
        # the median and the slowest proposal round (engines only: a peer asks per trial)
        "round_s": [round(statistics.median(rounds), 4), round(max(rounds), 4)] if rounds else None,
        "hv": [round(h, 6) for h in curve.hv],
        "device_s": [round(d, 2) for d in curve.device_s],
        "batch": in_flight.summary() if agents > 1 else None,
    }
