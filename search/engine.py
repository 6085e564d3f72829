"""What every ask/tell search engine shares: proposals, told results, budget, frontier, history.

A strategy subclasses `Engine` and implements `_propose(slots)`: the new candidates to send
for measurement now. The base class keeps the books: every proposal in order, which are
pending, what was told (None for a failure), the exact feasible frontier, and the history a
store persists. `restore` rebuilds an engine from that history and `catch_up` brings a stale
one up to it (what another server process added); strategies whose proposals depend on
more than the set of told results (a generation barrier, an external library's state) check
or replay the order in `_check_order` / `_replay`.

Engines never measure, store or send anything themselves, and are not thread-safe: callers
serialise access.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import NDArray

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec, SearchSpace, parse_spec
from archvocab.wire import Constraints, Population
from search.errors import AlreadyTold, InvalidHistory, SearchError, UnknownCandidate
from search.hypervolume import Normaliser, added_volume, hypervolume, shaping
from search.objectives import Objectives
from search.pareto import weakly_dominated
from search.records import PENDING, Candidate, HistoryRecord, Outcome, PendingType

Scorer = Callable[[ArchSpec], Mapping[str, float]]


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidSpec(name, f"must be a positive integer, got {value!r}")
    return value


def _inserted(array: NDArray, at: int, item: Any) -> NDArray:
    """A copy of `array` with `item` inserted before index `at` along the first axis:
    `np.insert` without its argument handling, which cost twice the copy."""
    return np.concatenate((array[:at], np.asarray(item, dtype=array.dtype)[None], array[at:]))


class Engine:
    """Ask/tell bookkeeping over a search space of any kind.

    `scorer` gives a spec's zero-cost proxies (it must return ``decoder_params`` when the
    constraints bound it, and every zero-cost proxy objective); proxy objectives are
    maximised and latency/memory minimised (`archvocab.wire.OBJECTIVE_SENSE`). Told values
    must hold every other objective and every bounded metric (latency_ms / memory_mb).
    `tolerance` (objective -> log half-width) is the measurement noise the frontier allows
    for (`search.noise.steering_widths`): a candidate leaves it only when dominated beyond it.
    """

    strategy: ClassVar[str] = ""
    # Whether a proposal round costs more than the bookkeeping around it (a model fitted, a
    # pool screened): a service then runs it outside its store's write lock.
    slow_rounds: ClassVar[bool] = False

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
        tolerance: Mapping[str, float] | None = None,
    ) -> None:
        self._space = space
        self._scorer = scorer
        self._seed = seed
        self._max_evaluations = _positive_int("max_evaluations", max_evaluations)
        self._max_attempts = _positive_int("max_attempts", max_attempts)
        self._population = population or Population()
        self._constraints = constraints or Constraints()
        self._objectives = Objectives(objectives, self._constraints, tolerance)
        self._candidates: dict[str, Candidate] = {}  # insertion order = proposal order
        self._results: dict[str, dict[str, float] | None] = {}  # told; None = failed
        self._pending: set[str] = set()  # kept apart so tell() stays O(1) in long searches
        self._finish_reason: str | None = None
        self._frontier: list[Candidate] | None = None  # cache, extended on every tell
        self._order: dict[str, int] = {}  # arch_id -> proposal index
        self._front_values = np.zeros((0, len(self._objectives.names)))  # `minimised`, cached
        self._front_bounds = self._objectives.bounds(self._front_values)  # and their bounds
        self._front_order = np.zeros(0, int)  # the members' proposal indices, ascending
        self._front_changes = 0  # counts changes of the cached frontier
        # ... of those, the ones that can move its hypervolume: a newcomer that some member
        # weakly dominates adds no volume, and members it pushes off were dominated
        self._front_volume_changes = 0
        self._front_volume: tuple[tuple[int, str], float] | None = None
        # The last such change: the frontier before it (`minimised`) and the newcomer, so that
        # the volume after it is the volume before plus what the newcomer adds
        self._volume_step: tuple[NDArray, list[float]] | None = None
        self._fallbacks: list[str] = []  # handed out once each (`take_fallbacks`)

    @property
    def space(self) -> SearchSpace:
        """The space the engine proposes from."""
        return self._space

    # -- ask / tell ------------------------------------------------------------------------
    def ask(self, slots: int = 1) -> list[Candidate]:
        """New candidates to measure now, or [] when there is nothing to send yet or at all.

        `slots` is how many measurements can run at once (the agents free for this search);
        generational strategies ignore it and propose whole generations. An engine that
        finds nothing new to propose finishes as "exhausted".
        """
        if self._finish_reason is not None:
            return []
        remaining = self._max_evaluations - len(self._candidates)
        if remaining <= 0:
            if not self._pending:
                self._finish_reason = "budget"
            return []
        batch = self._propose(max(1, int(slots)), remaining)
        if batch is None:
            return []
        if not batch:
            if not self._pending:
                self._finish_reason = "exhausted"
            return []
        for candidate in batch:
            self._add(candidate)
        return batch

    def _propose(self, slots: int, remaining: int) -> list[Candidate] | None:
        """The strategy: at most `remaining` new candidates; None to wait for results,
        [] when the space has nothing new left."""
        raise NotImplementedError

    def most_asked(self, slots: int = 1) -> int:
        """At most how many candidates `ask(slots)` would propose now, without asking: a
        service asks for a large round (a generation of thousands) outside its write lock."""
        if self._finish_reason is not None:
            return 0
        remaining = self._max_evaluations - len(self._candidates)
        return max(0, min(self._round_size(max(1, int(slots))), remaining))

    def _round_size(self, slots: int) -> int:
        """`most_asked` before the budget: one per measuring slot, unless the strategy
        proposes otherwise."""
        return slots

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
        self._extend_frontier(candidate, checked)
        self._on_told(candidate, checked)
        if not self._pending and len(self._candidates) >= self._max_evaluations:
            self._finish_reason = "budget"

    def _on_told(self, candidate: Candidate, values: dict[str, float] | None) -> None:
        """Hook for strategies that keep their own state of told results."""

    def take_fallbacks(self) -> list[str]:
        """Why proposals since the last call used a simpler rule than the strategy's own
        (a model that could not be fitted), each said once; a service puts them in the
        search's events. Forgotten once taken."""
        taken, self._fallbacks = self._fallbacks, []
        return taken

    def use_normaliser(self, normaliser: Normaliser) -> None:
        """The search's hypervolume normalisation, fixed after the engine started; strategies
        that steer by hypervolume take it, the others ignore it."""

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
    def proposed(self) -> int:
        """How many candidates were proposed (failed ones included)."""
        return len(self._candidates)

    @property
    def told(self) -> int:
        """How many results (measurements and failures) were told."""
        return len(self._results)

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

    def measured(self) -> list[tuple[Candidate, dict[str, float]]]:
        """Told, successful candidates with their told values, in proposal order."""
        return [
            (c, told)
            for c in self._candidates.values()
            if (told := self._results.get(c.arch_id)) is not None
        ]

    def frontier(self) -> list[Candidate]:
        """Told, successful, feasible candidates not dominated beyond the measurement noise
        (`tolerance`; exactly non-dominated without one), in proposal order."""
        return list(self._current_frontier())

    def _current_frontier(self) -> list[Candidate]:
        """The cached frontier itself (built when missing), not a copy: for reading only."""
        if self._frontier is None:
            pool = [(c, t) for c, t in self.measured() if self._objectives.feasible(c.proxies, t)]
            mask = self._objectives.front([{**c.proxies, **t} for c, t in pool])
            self._frontier = [c for (c, _), keep in zip(pool, mask, strict=True) if keep]
            self._front_order = np.array([self._order[c.arch_id] for c in self._frontier], int)
            self._front_values = np.array(
                [
                    self._objectives.minimised(c.proxies, self._results[c.arch_id])
                    for c in self._frontier
                ],
                dtype=float,
            ).reshape(len(self._frontier), len(self.objectives))
            self._front_bounds = self._objectives.bounds(self._front_values)
            self._front_changes += 1
            self._front_volume_changes += 1
            self._volume_step = None
        return self._frontier

    def frontier_hypervolume(self, normaliser: Normaliser) -> float:
        """The hypervolume of `frontier()` under `normaliser`, computed again only when the
        frontier's volume or the normalisation can have changed (most results leave the
        frontier as it was, and most that join it within the noise add no volume)."""
        front = self._current_frontier()
        same = normaliser.objectives == self.objectives  # else a projection: any change counts
        changes = self._front_volume_changes if same else self._front_changes
        key = (changes, json.dumps(normaliser.to_dict(), sort_keys=True))
        cached = self._front_volume
        if cached is not None and cached[0] == key:
            return cached[1]
        signs = self._objectives.signs  # `minimised` undone by multiplying with them
        if same and cached is not None and cached[0] == (changes - 1, key[1]) and self._volume_step:
            before, newcomer = self._volume_step  # one newcomer since: add what it adds
            near = before[shaping(before, newcomer)]  # before scaling: the order is the same
            scaled = normaliser.scale(np.vstack([near, newcomer]) * signs)
            volume = cached[1] + added_volume(scaled[:-1], scaled[-1])
        elif same:
            volume = hypervolume(normaliser.scale(self._front_values * signs)) if front else 0.0
        else:
            points = normaliser.points([self.objective_values(c.arch_id) for c in front])
            volume = hypervolume(points) if front else 0.0
        self._front_volume = (key, volume)
        return volume

    def _extend_frontier(self, candidate: Candidate, told: dict[str, float] | None) -> None:
        """Keep the cached frontier current with one more result, at the cost of the frontier
        rather than the history: "dominated beyond the noise" is transitive with the same
        widths for all, so whatever was off stays off, and a point the newcomer does not
        beat is beaten by a frontier member if by anyone."""
        if self._frontier is None or told is None:
            return
        if not self._objectives.feasible(candidate.proxies, told):
            return
        row = self._objectives.minimised(candidate.proxies, told)
        row_bounds = self._objectives.bounds(np.array(row))
        joins, stays = self._objectives.extend_front(self._front_bounds, row_bounds)
        if joins and not weakly_dominated(row, self._front_values):
            self._front_volume_changes += 1
            self._volume_step = (self._front_values, row)
        if not joins:
            return
        # In proposal order, where the newcomer's index falls among the kept. The list is
        # changed in place (`frontier()` hands out copies): a large frontier is not copied
        # per result, and few members leave at once.
        order, values, (low, high) = self._front_order, self._front_values, self._front_bounds
        if not stays.all():
            for gone in np.flatnonzero(~stays)[::-1]:
                del self._frontier[gone]
            order, values, low, high = order[stays], values[stays], low[stays], high[stays]
        index = self._order[candidate.arch_id]
        at = int(np.searchsorted(order, index, side="right"))
        self._frontier.insert(at, candidate)
        # New arrays, not changed in place: `_volume_step` holds the values before.
        self._front_order = _inserted(order, at, index)
        self._front_values = _inserted(values, at, row)
        self._front_bounds = (
            _inserted(low, at, row_bounds[0][0]),
            _inserted(high, at, row_bounds[1][0]),
        )
        self._front_changes += 1

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

        Records must be in proposal order, with no arch_id twice and no more than the budget.
        Proxies are recomputed with the scorer. Raises InvalidHistory. A "budget" finish is
        restored; an "exhausted" one leaves no row and is found again by the next `ask`.
        """
        engine = cls(space, **engine_kwargs)
        engine.catch_up(told=(), proposed=history)
        return engine

    def catch_up(
        self,
        *,
        told: Iterable[tuple[str, Mapping[str, float] | None]],
        proposed: Iterable[HistoryRecord | tuple[ArchSpec | Mapping, int, Outcome]],
    ) -> None:
        """Bring this engine to a history that went on without it (another server process
        asked and told): first the results since told for candidates pending here, in
        proposal order, then the proposals it has not seen, in proposal order with their
        outcomes. It ends where `restore` of the whole history would, at the cost of what is
        new. Raises InvalidHistory (the engine is then unusable: restore it).
        """
        for arch_id, values in told:
            if arch_id not in self._pending:
                raise InvalidHistory(f"{arch_id}: told since, but not pending here")
            self.tell(arch_id, values)
        for index, record in enumerate(proposed, start=len(self._candidates)):
            spec, generation, values = record
            if isinstance(spec, Mapping):
                spec = parse_spec(spec)
            self._replay(index, spec, generation, values)
        self._end_replay()

    def _replay(self, index: int, spec: ArchSpec, generation: int, values: Outcome) -> None:
        """Take one persisted proposal as the live engine made it; strategies whose order
        matters check it first (`_check_order`, or override this)."""
        self._replay_record(index, spec, generation, values)

    def _end_replay(self) -> None:
        """A replay's end: a spent and told budget is a finished search, as the live one was."""
        self._finish_if_spent()

    def _finish_if_spent(self) -> None:
        """A restored engine whose budget is spent and told is finished, as the live one was."""
        if self._candidates and not self._pending and self.proposed >= self._max_evaluations:
            self._finish_reason = "budget"

    def _replay_record(self, index: int, spec: ArchSpec, generation: int, values: Outcome) -> None:
        where = f"history record {index} ({spec.arch_id}, generation {generation})"
        if spec.arch_id in self._candidates:
            raise InvalidHistory(f"{where}: arch_id proposed twice")
        if len(self._candidates) >= self._max_evaluations:
            raise InvalidHistory(
                f"{where}: more proposals than max_evaluations={self._max_evaluations}"
            )
        self._check_order(where, generation)
        candidate = Candidate(spec, generation, self._score(spec))
        self._add(candidate)
        if not isinstance(values, PendingType):
            self.tell(candidate.arch_id, values)

    def _check_order(self, where: str, generation: int) -> None:
        """Raise InvalidHistory where a strategy's live engine could not have proposed this
        record next; strategies whose order matters override it."""

    # -- helpers ---------------------------------------------------------------------------
    def _add(self, candidate: Candidate) -> None:
        self._order[candidate.arch_id] = len(self._candidates)
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
