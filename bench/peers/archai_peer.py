"""Peer baseline: Archai 1.0.0's `EvolutionParetoSearch`, LiteTransformerSearch's released code.

Archai is an optional extra: its package pins old dependencies, so it is installed beside the
project's own without them (`pip install --no-deps archai==1.0.0 overrides==3.1.0`; it needs
pandas, matplotlib, tqdm and torch, which the dev install has). Without it, `available()` says
why and the benchmarks skip this peer.

Written as an Archai user writes it: the space is an `EvolutionarySearchSpace` whose sample,
mutation and crossover are the GPT-2 space's own (the same operators and probabilities as LTS,
p = 0.3 and 0.5); the objectives are `SearchObjectives` with `decoder_params` cheap and to be
maximised and latency and memory measured (asynchronous evaluators, so that one generation's
models are handed to the device together and may be measured at once). The search runs with
Archai's defaults (10 random models first; each iteration one mutation per frontier member,
5 crossovers and 5 random models), and ends when the device has measured `budget` distinct
architectures; what the generation in progress still asked for is dropped.
"""

from __future__ import annotations

import logging
import random
import tempfile
from collections.abc import Callable, Mapping

from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec
from bench.in_flight import InFlight
from bench.peers.optuna_peer import PeerRun

__all__ = ["INSTALL", "available", "run_archai"]

INSTALL = "pip install --no-deps archai==1.0.0 overrides==3.1.0"

Measure = Callable[[GPT2Spec], Mapping[str, float]]
Score = Callable[[GPT2Spec], Mapping[str, float]]


def available() -> str | None:
    """None when Archai's search imports here; else why not, and how to install it."""
    try:
        import archai.discrete_search.algos  # noqa: F401
    except ImportError as exc:
        return f"Archai 1.0.0 is not installed ({exc}); {INSTALL}"
    return None


class _Spent(Exception):
    """The device has measured the budget: the search stops there."""


class _Device:
    """The measurements a generation asks for, measured once each, in the order asked, by
    `in_flight`'s agents; stops the search once `budget` architectures are measured."""

    def __init__(self, measure: Measure, score: Score, budget: int, in_flight: InFlight) -> None:
        self._measure, self._score, self._budget = measure, score, budget
        self._in_flight = in_flight
        self.asked: list[GPT2Spec] = []
        self.values: dict[str, dict[str, float]] = {}
        self.measured: list[tuple[GPT2Spec, dict[str, float]]] = []  # in finish order

    def ask(self, spec: GPT2Spec) -> None:
        if spec.arch_id not in self.values and all(a.arch_id != spec.arch_id for a in self.asked):
            self.asked.append(spec)

    def value(self, spec: GPT2Spec, name: str) -> float:
        """`name` of `spec`, once every architecture asked for so far is measured."""
        queue, self.asked = self.asked, []
        flight = self._in_flight
        while queue or len(flight):
            while queue and flight.free and len(self.measured) + len(flight) < self._budget:
                asked = queue.pop(0)
                values = {**self._score(asked), **self._measure(asked)}
                flight.start(asked, values.get("wall_s", 0.0), (asked, values))
            if not len(flight):
                break
            done, values = flight.finish()
            self.values[done.arch_id] = values
            self.measured.append((done, values))
        if spec.arch_id not in self.values:
            raise _Spent
        return float(self.values[spec.arch_id][name])


def _quiet_archai() -> None:
    """Archai's loggers (each set to DEBUG by Archai, with a console handler and a file
    `archai.log` in the working directory) say warnings only, and to the console only."""
    for name in list(logging.root.manager.loggerDict):
        if name.split(".")[0] != "archai":
            continue
        logger = logging.getLogger(name)
        logger.setLevel(logging.WARNING)
        for handler in list(logger.handlers):
            if isinstance(handler, logging.FileHandler):
                logger.removeHandler(handler)
                handler.close()


def run_archai(
    space: GPT2Space,
    measure: Measure,
    score: Score,
    *,
    budget: int,
    seed: int,
    in_flight: InFlight | None = None,
) -> PeerRun:
    """Archai's `EvolutionParetoSearch` for `budget` distinct measured architectures: the run
    as `bench.peers.optuna_peer.run_optuna` gives it (values = {**score, **measure}, in
    measurement order). Archai never proposes an architecture it has seen, so `trials` is the
    count measured."""
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    missing = available()
    if missing is not None:
        raise RuntimeError(missing)
    from archai.discrete_search.algos import EvolutionParetoSearch
    from archai.discrete_search.api import SearchObjectives

    from bench.peers.archai_parts import Measured, Proxy, Space

    device = _Device(measure, score, budget, in_flight or InFlight(space, 1))
    rng = random.Random(f"bench.peers.archai_peer:{seed}")
    objectives = SearchObjectives()
    objectives.add_objective(
        "decoder_params", Proxy(score), higher_is_better=True, compute_intensive=False
    )
    for name in ("latency_ms", "memory_mb"):
        objectives.add_objective(name, Measured(device, name), higher_is_better=False)
    _quiet_archai()
    # Archai writes each iteration's state, frontier and plots to its output directory.
    with tempfile.TemporaryDirectory(prefix="hwnas-archai-") as out:
        search = EvolutionParetoSearch(
            Space(space, rng),
            objectives,
            out,
            num_iters=budget,  # more than the budget allows: the device ends it
            save_pareto_model_weights=False,
            seed=seed,
        )
        try:
            search.search()
        except _Spent:
            pass
    return PeerRun(device.measured, len(device.measured))
