"""The parts an Archai user writes for `EvolutionParetoSearch` (bench.peers.archai_peer): the
search space and the objectives' evaluators. Imports Archai, so it is imported only where
Archai is installed. Module-level classes: `overrides` 3.1.0, which Archai 1.0.0 requires,
reads the defining frame's bytecode and fails on classes defined inside a function."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from typing import Any

from archai.discrete_search.api import (
    ArchaiModel,
    AsyncModelEvaluator,
    EvolutionarySearchSpace,
    ModelEvaluator,
)
from overrides import overrides

from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec


def as_model(spec: GPT2Spec) -> ArchaiModel:
    """A spec as Archai holds it: the spec in the metadata, which survives Archai clearing
    `arch` after each iteration."""
    return ArchaiModel(arch=spec, archid=spec.arch_id, metadata={"config": spec})


class Space(EvolutionarySearchSpace):
    """The GPT-2 space's own sample, mutation (p = 0.3) and crossover (p = 0.5)."""

    def __init__(self, space: GPT2Space, rng: random.Random) -> None:
        self._space, self._rng = space, rng

    @overrides
    def random_sample(self) -> ArchaiModel:
        return as_model(self._space.sample(self._rng))

    @overrides
    def mutate(self, arch: ArchaiModel) -> ArchaiModel:
        return as_model(self._space.mutate(arch.metadata["config"], self._rng))

    @overrides
    def crossover(self, arch_list: list[ArchaiModel]) -> ArchaiModel:
        a, b = (m.metadata["config"] for m in arch_list[:2])
        return as_model(self._space.crossover(a, b, self._rng))

    @overrides
    def save_arch(self, model: ArchaiModel, file_path: str) -> None:
        with open(file_path, "w") as f:
            json.dump(model.metadata["config"].to_dict(), f)

    @overrides
    def load_arch(self, file_path: str) -> ArchaiModel:
        with open(file_path) as f:
            return as_model(GPT2Spec.from_dict(json.load(f)))

    @overrides
    def save_model_weights(self, model: ArchaiModel, file_path: str) -> None:
        raise NotImplementedError("architectures only: nothing is trained")

    @overrides
    def load_model_weights(self, model: ArchaiModel, file_path: str) -> None:
        raise NotImplementedError("architectures only: nothing is trained")


class Proxy(ModelEvaluator):
    """`decoder_params`, the cheap objective."""

    def __init__(self, score: Callable[[GPT2Spec], Mapping[str, float]]) -> None:
        self._score = score

    @overrides
    def evaluate(self, model: ArchaiModel, budget: float | None = None) -> float:
        return float(self._score(model.metadata["config"])["decoder_params"])


class Measured(AsyncModelEvaluator):
    """One measured objective: a generation's models are sent to the device together, then
    their values fetched (`device`: bench.peers.archai_peer's, which measures each once)."""

    def __init__(self, device: Any, name: str) -> None:
        self._device, self._name = device, name
        self._sent: list[GPT2Spec] = []

    @overrides
    def send(self, model: ArchaiModel, budget: float | None = None) -> None:
        self._device.ask(model.metadata["config"])
        self._sent.append(model.metadata["config"])

    @overrides
    def fetch_all(self) -> list[float | None]:
        sent, self._sent = self._sent, []
        return [self._device.value(spec, self._name) for spec in sent]
