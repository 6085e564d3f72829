"""LTS's training-free search (Algorithm 1, Javaheripi et al., NeurIPS 2022) as ask/tell.

Generation 0 is random; every later generation breeds from a random subsample of the current
feasible Pareto frontier (mutants, then uniform crossovers), as in LTS as released, with
three differences: the frontier is exact and cheap (`search.pareto`), retries are bounded,
and the decoder-parameter bounds are checked before a candidate is proposed rather than after
it was measured. A generation is proposed only once the previous one is completely told (the
generation barrier LTS has).

Determinism: generation g draws only from a `random.Random` seeded by (seed, g), and it
breeds from the frontier in proposal order, so the same seed and the same measured values
give the same proposals whatever order one generation's results arrive in, and `restore`
rebuilds an engine from its persisted rows that proposes exactly what the live one would.
"""

from __future__ import annotations

import random
from typing import Any

from search.breeding import breed
from search.engine import Engine, Scorer
from search.errors import InvalidHistory
from search.records import PENDING, Candidate, HistoryRecord

__all__ = ["PENDING", "Candidate", "HistoryRecord", "LTSEngine", "Scorer"]


class LTSEngine(Engine):
    """LTS Algorithm 1 with the paper's defaults (`archvocab.wire.Population`)."""

    strategy = "lts"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._generation = -1

    @property
    def generation(self) -> int:
        """The latest generation proposed; -1 before the first ask."""
        return self._generation

    def _propose(self, slots: int, remaining: int) -> list[Candidate] | None:
        if self._pending:
            return None  # the generation barrier
        generation = self._generation + 1
        children = breed(
            self._space,
            self._population,
            None if generation == 0 else [c.spec for c in self.frontier()],
            size=remaining,
            rng=random.Random(f"hwnas.search.strategies.lts:{self._seed}:{generation}"),
            seen=self._candidates.keys(),
            admit=self._admit,
            max_attempts=self._max_attempts,
        )
        if children:
            self._generation = generation
        return [Candidate(spec, generation, proxies) for spec, proxies in children]

    def _round_size(self, slots: int) -> int:
        if self._pending:
            return 0
        if self._generation < 0:
            return self._population.initial
        return self._population.mutations + self._population.crossovers

    def _check_order(self, where: str, generation: int) -> None:
        allowed = [g for g in (self._generation, self._generation + 1) if g >= 0]
        if generation not in allowed:
            raise InvalidHistory(f"{where}: generation must be {' or '.join(map(str, allowed))}")
        if generation > self._generation and self._pending:
            raise InvalidHistory(
                f"{where}: starts a generation while {len(self._pending)} are pending"
            )
        self._generation = generation
