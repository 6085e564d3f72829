"""LTS's training-free search (Algorithm 1, Javaheripi et al., NeurIPS 2022) as ask/tell.

The engine proposes generations of architectures and is told their measured costs; it never
measures, stores or sends anything itself. Generation 0 is random; every later generation
breeds from a random subsample of the current feasible Pareto frontier (mutants, then
uniform crossovers), as in LTS as released, with three differences: the frontier is exact
and cheap (`search.pareto`), retries are bounded, and the decoder-parameter bounds are
checked before a candidate is proposed rather than after it was measured.

Determinism: generation g draws only from a `random.Random` seeded by (seed, g), and it
breeds from the frontier in proposal order, so the same seed and the same measured values
give the same proposals whatever order one generation's results arrive in, and `restore`
rebuilds an engine from its persisted rows that proposes exactly what the live one would.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self

import numpy as np

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec, SearchSpace, parse_spec
from archvocab.wire import Constraints, Population
from search.breeding import breed
from search.errors import AlreadyTold, InvalidHistory, SearchError, UnknownCandidate
from search.objectives import Objectives
from search.pareto import non_dominated_mask
from search.records import PENDING, Candidate, HistoryRecord, Outcome, PendingType

Scorer = Callable[[ArchSpec], Mapping[str, float]]

__all__ = ["PENDING", "Candidate", "HistoryRecord", "LTSEngine", "Scorer"]


class LTSEngine:
    """Ask/tell LTS over a search space of any kind (not thread-safe: callers serialise access).

    `scorer` gives a spec's zero-cost proxies (it must return ``decoder_params`` when the
    constraints bound it, and every proxy objective); proxy objectives are maximised and
    latency/memory minimised (`archvocab.wire.OBJECTIVE_SENSE`). Told values must hold every
    other objective and every bounded metric (latency_ms / memory_mb).
    """

    def __init__(
        self,
        space: SearchSpace,
        *,
        objectives: list[str],
        scorer: Scorer,
        seed: int,
        max_evaluations: int,
        population: Population | None = None,
        constraints: Constraints | None = None,
        max_attempts: int = 200,
    ) -> None:
        if (
            isinstance(max_evaluations, bool)
            or not isinstance(max_evaluations, int)
            or max_evaluations < 1
        ):
            raise InvalidSpec(
                "max_evaluations", f"must be a positive integer, got {max_evaluations!r}"
            )
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise InvalidSpec("max_attempts", f"must be a positive integer, got {max_attempts!r}")
        self._space = space
        self._scorer = scorer
        self._seed = seed
        self._max_evaluations = max_evaluations
        self._population = population or Population()
        self._constraints = constraints or Constraints()
        self._objectives = Objectives(objectives, self._constraints)
        self._max_attempts = max_attempts
        self._candidates: dict[str, Candidate] = {}  # insertion order = proposal order
        self._results: dict[str, dict[str, float] | None] = {}  # told; None = failed
        self._pending: set[str] = set()  # kept apart so tell() stays O(1) in long searches
        self._generation = -1
        self._finish_reason: str | None = None
        self._frontier: list[Candidate] | None = None  # cache, dropped on every tell

    # -- ask / tell ------------------------------------------------------------------------
    def ask(self) -> list[Candidate]:
        """The next generation's new candidates, or [] while results are pending or when finished.

        A generation is proposed only once the previous one is completely told. The last one
        is cut to the remaining budget; an empty one finishes the engine as "exhausted".
        """
        if self._finish_reason is not None or self._pending:
            return []
        remaining = self._max_evaluations - len(self._candidates)
        if remaining <= 0:
            self._finish_reason = "budget"
            return []
        generation = self._generation + 1
        children = breed(
            self._space,
            self._population,
            None if generation == 0 else [c.spec for c in self.frontier()],
            size=remaining,
            rng=random.Random(f"hwnas.search.lts:{self._seed}:{generation}"),
            seen=self._candidates.keys(),
            admit=self._admit,
            max_attempts=self._max_attempts,
        )
        if not children:
            self._finish_reason = "exhausted"
            return []
        self._generation = generation
        batch = [Candidate(spec, generation, proxies) for spec, proxies in children]
        for candidate in batch:
            self._add(candidate)
        return batch

    def tell(self, arch_id: str, values: Mapping[str, float] | None) -> None:
        """Record a pending candidate's measured values, or None when it failed.

        A failed candidate still counts against the budget, is never proposed again and is
        never on the frontier. Raises UnknownCandidate, AlreadyTold or InvalidResult.
        """
        candidate = self.candidate(arch_id)
        if arch_id not in self._pending:
            raise AlreadyTold(f"{arch_id}: a result was already told for this candidate")
        checked = None
        if values is not None:
            checked = self._objectives.check(arch_id, candidate.proxies, values)
        self._results[arch_id] = checked
        self._pending.discard(arch_id)
        self._frontier = None
        if not self._pending and len(self._candidates) >= self._max_evaluations:
            self._finish_reason = "budget"

    # -- state -----------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self._finish_reason is not None

    @property
    def finish_reason(self) -> str | None:
        """None while running, "budget" or "exhausted" when finished."""
        return self._finish_reason

    @property
    def pending(self) -> set[str]:
        """arch_ids proposed and not told yet (a copy)."""
        return set(self._pending)

    @property
    def generation(self) -> int:
        """The latest generation proposed; -1 before the first ask."""
        return self._generation

    @property
    def proposed(self) -> int:
        """How many candidates were proposed (failed ones included)."""
        return len(self._candidates)

    @property
    def objectives(self) -> tuple[str, ...]:
        return self._objectives.names

    def candidates(self) -> list[Candidate]:
        """Every candidate proposed, in proposal order."""
        return list(self._candidates.values())

    def candidate(self, arch_id: str) -> Candidate:
        try:
            return self._candidates[arch_id]
        except KeyError:
            raise UnknownCandidate(f"{arch_id!r} was never proposed by this search") from None

    def objective_values(self, arch_id: str) -> dict[str, float] | None:
        """Objective name -> value in objective order; None while pending or when it failed."""
        candidate = self.candidate(arch_id)
        told = self._results.get(arch_id)
        return None if told is None else self._objectives.merge(candidate.proxies, told)

    def is_feasible(self, arch_id: str) -> bool | None:
        """Within the latency/memory bounds; None while pending or when it failed."""
        candidate = self.candidate(arch_id)
        told = self._results.get(arch_id)
        return None if told is None else self._objectives.feasible(candidate.proxies, told)

    def frontier(self) -> list[Candidate]:
        """Exact non-dominated set of told, successful, feasible candidates, in proposal order."""
        if self._frontier is None:
            pool = [
                (c, told)
                for c in self._candidates.values()
                if (told := self._results.get(c.arch_id)) is not None
                and self._objectives.feasible(c.proxies, told)
            ]
            points = np.array([self._objectives.minimised(c.proxies, t) for c, t in pool])
            mask = non_dominated_mask(points.reshape(len(pool), len(self.objectives)))
            self._frontier = [c for (c, _), keep in zip(pool, mask, strict=True) if keep]
        return list(self._frontier)

    def history(self) -> list[HistoryRecord]:
        """What a store persists, in proposal order; `restore` rebuilds the engine from it."""
        return [
            HistoryRecord(c.spec, c.generation, self._results[a] if a in self._results else PENDING)
            for a, c in self._candidates.items()
        ]

    # -- rebuild ---------------------------------------------------------------------------
    @classmethod
    def restore(
        cls,
        space: SearchSpace,
        *,
        history: Iterable[HistoryRecord | tuple[ArchSpec | Mapping, int, Outcome]],
        **engine_kwargs: Any,
    ) -> Self:
        """Rebuild an engine from persisted proposals (spec, generation, values/None/PENDING);
        `engine_kwargs` are the constructor's.

        Records must be in proposal order, as the live engine made them: generations
        ascending without gaps, a new generation only after the previous one was told, no
        arch_id twice. Proxies are recomputed with the scorer. Raises InvalidHistory.
        A "budget" finish is restored; an "exhausted" one leaves no row and is found again
        by the next `ask`, which returns [] just as the live engine's did.
        """
        engine = cls(space, **engine_kwargs)
        for index, record in enumerate(history):
            engine._replay(index, *record)
        if (
            engine._candidates
            and not engine._pending
            and engine.proposed >= engine._max_evaluations
        ):
            engine._finish_reason = "budget"
        return engine

    def _replay(
        self, index: int, spec: ArchSpec | Mapping, generation: int, values: Outcome
    ) -> None:
        if isinstance(spec, Mapping):
            spec = parse_spec(spec)
        where = f"history record {index} ({spec.arch_id}, generation {generation})"
        if spec.arch_id in self._candidates:
            raise InvalidHistory(f"{where}: arch_id proposed twice")
        allowed = [g for g in (self._generation, self._generation + 1) if g >= 0]
        if generation not in allowed:
            raise InvalidHistory(f"{where}: generation must be {' or '.join(map(str, allowed))}")
        if generation > self._generation and self._pending:
            raise InvalidHistory(
                f"{where}: starts a generation while {len(self._pending)} are pending"
            )
        if len(self._candidates) >= self._max_evaluations:
            raise InvalidHistory(
                f"{where}: more proposals than max_evaluations={self._max_evaluations}"
            )
        candidate = Candidate(spec, generation, self._score(spec))
        self._generation = generation
        self._add(candidate)
        if not isinstance(values, PendingType):
            self.tell(candidate.arch_id, values)

    # -- helpers ---------------------------------------------------------------------------
    def _add(self, candidate: Candidate) -> None:
        self._candidates[candidate.arch_id] = candidate
        self._pending.add(candidate.arch_id)

    def _score(self, spec: ArchSpec) -> dict[str, float]:
        return {name: float(value) for name, value in self._scorer(spec).items()}

    def _admit(self, spec: ArchSpec) -> dict[str, float] | None:
        """The spec's proxies if it meets the decoder-parameter bounds, else None."""
        proxies = self._score(spec)
        lo, hi = self._constraints.min_decoder_params, self._constraints.max_decoder_params
        if lo is None and hi is None:
            return proxies
        if "decoder_params" not in proxies:
            raise SearchError(
                "decoder-parameter constraints need a scorer that returns 'decoder_params'"
            )
        params = proxies["decoder_params"]
        too_small = lo is not None and params < lo
        too_large = hi is not None and params > hi
        return None if too_small or too_large else proxies
