"""NSGA-II (Deb et al., 2002) as an ask/tell engine, run by pymoo's `NSGA2` through its own
ask/tell interface.

Mapping the space onto pymoo: architectures are not vectors, so the pymoo problem has one
object-typed variable (``n_var=1``; X is an object array holding specs) and the space's own
operators do the variation: `_Sampling` draws `space.sample`, `_Crossover` turns two
tournament-selected parents into two children with `space.crossover` (each gene swapped with
``population.crossover_prob``), `_Mutation` passes every child through `space.mutate` (each
gene resampled with ``population.mutation_prob``). `_Novelty`, pymoo's duplicate elimination,
compares arch_ids and also drops what the engine proposed before (pymoo sees only its own
populations) and what breaks the decoder-parameter bounds; pymoo's mating loop then breeds
again, at most ``max_attempts`` rounds, and random samples fill what is still short.
The population is ``population.initial`` (generation 0) and every later generation has
``population.mutations + population.crossovers`` offspring; ``population.parents`` has no
role (NSGA-II selects by binary tournament).

pymoo never evaluates anything: when the last candidate of a generation is told, the engine
hands pymoo that generation in proposal order with F = the minimised objective vectors
(`Objectives.minimised`) and one inequality constraint G: 0 when within max_latency_ms /
max_memory_mb, the squashed relative excess (in (0, 1)) when beyond, 2 when the measurement
failed. pymoo's constraint domination thus ranks any feasible candidate above any infeasible
one, and any infeasible one above a failure; failures also get the worst F seen so far.

Determinism: pymoo draws only from the `numpy.random.Generator` it seeds from the engine's
seed in `setup` (pymoo 0.6.2 touches no global random state on this path), and the space's
operators draw from `random.Random`s seeded from that generator. A generation is proposed
only once the previous one is completely told (the generation barrier), and pymoo is told it
in proposal order, so the same seed and told values give the same proposals whatever order
results arrive in. pymoo's state cannot be read back from persisted rows, so `restore`
replays the search: it asks pymoo again generation by generation, checks every proposal
against its record and tells pymoo the recorded values.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
from pymoo.algorithms.moo.nsga2 import NSGA2, binary_tournament
from pymoo.config import Config
from pymoo.core.crossover import Crossover
from pymoo.core.duplicate import DuplicateElimination
from pymoo.core.evaluator import Evaluator
from pymoo.core.mating import Mating
from pymoo.core.mutation import Mutation
from pymoo.core.population import Population as PymooPopulation
from pymoo.core.problem import Problem
from pymoo.core.sampling import Sampling
from pymoo.core.termination import NoTermination
from pymoo.operators.selection.tournament import TournamentSelection
from pymoo.problems.static import StaticProblem

from archvocab.registry import ArchSpec, SearchSpace
from search.engine import Engine
from search.errors import InvalidHistory
from search.records import Candidate, Outcome

__all__ = ["NSGA2Engine"]

# pymoo prints a hint to stdout when its compiled modules are missing (in Algorithm.__init__);
# an engine inside a server must not write to stdout.
Config.warnings["not_compiled"] = False

# G of a failed candidate: above every infeasible one's, whose G lies in (0, 1).
_FAILED_VIOLATION = 2.0


def _child_rng(random_state: np.random.Generator) -> random.Random:
    """A `random.Random` for the space's operators, drawn from pymoo's generator so that
    pymoo's seed determines everything."""
    return random.Random(int(random_state.integers(2**63)))


def _specs(X: np.ndarray) -> np.ndarray:
    """An (n, 1) object array from specs, built element by element so numpy never looks
    inside a spec."""
    out = np.empty((len(X), 1), dtype=object)
    for i, spec in enumerate(X):
        out[i, 0] = spec
    return out


class _ArchProblem(Problem):
    """One object variable (the spec), the search's objectives, one inequality constraint.

    Never evaluated: F and G come from told values through a `StaticProblem`. Kept free of
    references to the engine because `StaticProblem` deep-copies it."""

    def __init__(self, n_obj: int) -> None:
        super().__init__(n_var=1, n_obj=n_obj, n_ieq_constr=1, vtype=object)

    def _evaluate(self, x: Any, out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the NSGA-II engine tells pymoo measured values; it never evaluates")


class _Sampling(Sampling):
    def __init__(self, engine: NSGA2Engine) -> None:
        super().__init__()
        self._engine = engine

    def _do(self, problem: Problem, n_samples: int, *args: Any, random_state: Any, **kwargs: Any):
        specs = self._engine._sample_new(n_samples, _child_rng(random_state), set())
        return _specs(specs)


class _Crossover(Crossover):
    """Two parents -> two children: space.crossover(a, b) and space.crossover(b, a)."""

    def __init__(self, space: SearchSpace, p: float) -> None:
        # prob=1: every mating crosses; the space's own p says how many genes move.
        super().__init__(n_parents=2, n_offsprings=2, prob=1.0)
        self._space, self._p = space, p

    def _do(self, problem: Problem, X: np.ndarray, *args: Any, random_state: Any, **kwargs: Any):
        rng = _child_rng(random_state)
        _, n_matings, _ = X.shape
        Y = np.empty_like(X)
        for k in range(n_matings):
            a, b = X[0, k, 0], X[1, k, 0]
            if a.arch_id == b.arch_id:  # the tournament can pick one parent twice
                Y[0, k, 0], Y[1, k, 0] = a, b
                continue
            Y[0, k, 0] = self._space.crossover(a, b, rng, self._p)
            Y[1, k, 0] = self._space.crossover(b, a, rng, self._p)
        return Y


class _Mutation(Mutation):
    def __init__(self, space: SearchSpace, p: float) -> None:
        # prob=1: every child is mutated; the space's own p says how many genes change.
        super().__init__(prob=1.0)
        self._space, self._p = space, p

    def _do(self, problem: Problem, X: np.ndarray, *args: Any, random_state: Any, **kwargs: Any):
        rng = _child_rng(random_state)
        return _specs([self._space.mutate(x, rng, self._p) for x in X[:, 0]])


class _Novelty(DuplicateElimination):
    """pymoo's duplicate elimination by arch_id, which also drops candidates the engine
    proposed in an earlier generation or whose decoder parameters are out of bounds, so
    pymoo's mating loop breeds replacements for them."""

    def __init__(self, engine: NSGA2Engine) -> None:
        super().__init__()
        self._engine = engine

    def _do(self, pop: Any, other: Any, is_duplicate: np.ndarray) -> np.ndarray:
        ids = [x.arch_id for x in pop.get("X")[:, 0]]
        if other is not None:
            taken = {x.arch_id for x in other.get("X")[:, 0]}
            is_duplicate[[i for i, a in enumerate(ids) if a in taken]] = True
            return is_duplicate
        seen: set[str] = set()
        for i, (arch_id, spec) in enumerate(zip(ids, pop.get("X")[:, 0])):
            if arch_id in seen or not self._engine._is_new(spec):
                is_duplicate[i] = True
            seen.add(arch_id)
        return is_duplicate


class NSGA2Engine(Engine):
    """pymoo's NSGA-II over a search space, with the search's Population sizes."""

    strategy = "nsga2"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._generation = -1
        self._batch: list[Candidate] = []  # the latest generation, in proposal order
        self._batch_pop: PymooPopulation | None = None  # ... as pymoo holds it
        self._untold: set[str] = set()  # arch_ids of the latest generation not told yet
        self._proxies: dict[str, dict[str, float] | None] = {}  # _admit, for one ask
        self._worst: np.ndarray | None = None  # per-objective worst minimised value told
        self._replaying: list[Candidate] = []  # the rest of the generation being replayed
        population = self._population
        self._problem = _ArchProblem(len(self.objectives))
        self._algorithm = NSGA2(
            pop_size=population.initial,
            n_offsprings=population.mutations + population.crossovers,
            sampling=_Sampling(self),
            mating=Mating(
                TournamentSelection(func_comp=binary_tournament),
                _Crossover(self._space, population.crossover_prob),
                _Mutation(self._space, population.mutation_prob),
                eliminate_duplicates=_Novelty(self),
                n_max_iterations=self._max_attempts,
            ),
            eliminate_duplicates=_Novelty(self),
        )
        # NSGA2.__init__ sets its default termination (which computes progress indicators
        # every generation); setup's keywords override it. The budget is the engine's.
        self._algorithm.setup(
            self._problem, termination=NoTermination(), seed=self._pymoo_seed(), verbose=False
        )

    @property
    def generation(self) -> int:
        """The latest generation proposed; -1 before the first ask."""
        return self._generation

    def _pymoo_seed(self) -> int:
        # numpy takes only non-negative seeds; hashing also keeps this stream apart from
        # other strategies seeded with the same number.
        digest = hashlib.sha256(f"hwnas.search.strategies.nsga2:{self._seed}".encode()).digest()
        return int.from_bytes(digest[:8], "big")

    # -- proposing -------------------------------------------------------------------------
    def _round_size(self, slots: int) -> int:
        if self._pending:
            return 0
        algorithm = self._algorithm
        return algorithm.pop_size if self._generation < 0 else algorithm.n_offsprings

    def _propose(self, slots: int, remaining: int) -> list[Candidate] | None:
        if self._pending:
            return None  # the generation barrier
        self._proxies = {}
        generation = self._generation + 1
        size = self._algorithm.pop_size if generation == 0 else self._algorithm.n_offsprings
        wanted = min(size, remaining)
        pop = self._algorithm.ask()
        if pop is None:
            # pymoo bred nothing new in max_attempts rounds; it flags itself terminated then,
            # but this engine decides when the search ends.
            self._algorithm.termination.force_termination = False
            pop = PymooPopulation.empty()
        if len(pop) < wanted:
            taken = {x.arch_id for x in pop.get("X")[:, 0]} if len(pop) else set()
            extra = self._sample_new(
                wanted - len(pop), _child_rng(self._algorithm.random_state), taken
            )
            if extra:
                pop = PymooPopulation.merge(pop, PymooPopulation.new("X", _specs(extra)))
        pop = pop[:remaining]
        specs = list(pop.get("X")[:, 0]) if len(pop) else []
        if not specs:
            return []
        self._generation = generation
        self._batch = [Candidate(s, generation, self._admitted(s)) for s in specs]
        self._batch_pop = pop
        self._untold = {c.arch_id for c in self._batch}
        self._proxies = {}
        return list(self._batch)

    def _sample_new(self, n: int, rng: random.Random, taken: set[str]) -> list[ArchSpec]:
        """Up to n random new, admissible specs; like `search.breeding`, each slot gets
        max_attempts draws and a slot that finds nothing ends the sampling."""
        taken = set(taken)
        out: list[ArchSpec] = []
        for _ in range(n):
            for _ in range(self._max_attempts):
                spec = self._space.sample(rng)
                if spec.arch_id not in taken and self._is_new(spec):
                    out.append(spec)
                    taken.add(spec.arch_id)
                    break
            else:
                break
        return out

    def _is_new(self, spec: ArchSpec) -> bool:
        """Never proposed by this engine and within the decoder-parameter bounds."""
        return spec.arch_id not in self._candidates and self._admitted(spec) is not None

    def _admitted(self, spec: ArchSpec) -> dict[str, float] | None:
        if spec.arch_id not in self._proxies:
            self._proxies[spec.arch_id] = self._admit(spec)
        return self._proxies[spec.arch_id]

    # -- telling pymoo ---------------------------------------------------------------------
    def _on_told(self, candidate: Candidate, values: dict[str, float] | None) -> None:
        if values is not None:
            point = np.array(self._objectives.minimised(candidate.proxies, values))
            self._worst = point if self._worst is None else np.maximum(self._worst, point)
        self._untold.discard(candidate.arch_id)
        if not self._untold and self._batch_pop is not None:
            self._tell_algorithm()

    def _tell_algorithm(self) -> None:
        """Hand pymoo the completed generation, in proposal order."""
        measured = [(c, self._results[c.arch_id]) for c in self._batch]
        # A failure's F only breaks ties among failures (its G ranks it below the rest);
        # the worst values told so far keep it finite, as crowding distances need. The
        # barrier makes "so far" every earlier generation and this one, whatever the order.
        worst = np.zeros(len(self.objectives)) if self._worst is None else self._worst
        F = np.array(
            [worst if t is None else self._objectives.minimised(c.proxies, t) for c, t in measured],
            dtype=float,
        ).reshape(len(measured), len(self.objectives))
        G = np.array([[self._violation(c, t)] for c, t in measured], dtype=float)
        pop, self._batch_pop = self._batch_pop, None
        Evaluator().eval(StaticProblem(self._problem, F=F, G=G), pop)
        self._algorithm.tell(infills=pop)

    def _violation(self, candidate: Candidate, told: Mapping[str, float] | None) -> float:
        """0 within the hardware bounds; the summed relative excess squashed into (0, 1)
        beyond them; `_FAILED_VIOLATION` for a failure."""
        if told is None:
            return _FAILED_VIOLATION
        both = {**candidate.proxies, **told}
        excess = 0.0
        for metric, bound in self._constraints.hardware_bounds().items():
            if both[metric] > bound:
                excess += both[metric] / bound - 1.0
        return excess / (1.0 + excess)

    # -- rebuild ---------------------------------------------------------------------------
    def _replay(self, index: int, spec: ArchSpec, generation: int, values: Outcome) -> None:
        """Replay the search: each generation is asked of pymoo again and must equal its
        records, whose values are then told. Raises InvalidHistory naming the first record a
        live engine could not have proposed there."""
        where = f"history record {index} ({spec.arch_id}, generation {generation})"
        if not self._replaying:
            if self._pending:
                raise InvalidHistory(
                    f"{where}: starts a generation while {len(self._pending)} are pending"
                )
            remaining = self._max_evaluations - len(self._candidates)
            if remaining <= 0:
                raise InvalidHistory(
                    f"{where}: more proposals than max_evaluations={self._max_evaluations}"
                )
            self._replaying = self._propose(1, remaining) or []
            if not self._replaying:
                raise InvalidHistory(f"{where}: the search has nothing new to propose here")
        want = self._replaying.pop(0)
        if (spec.arch_id, generation) != (want.arch_id, want.generation):
            raise InvalidHistory(
                f"{where}: the search proposes {want.arch_id} (generation {want.generation}) here"
            )
        self._replay_record(index, spec, generation, values)

    def _end_replay(self) -> None:
        # A store writes a generation's proposals in one transaction: a history ends with one.
        if self._replaying:
            short, self._replaying = len(self._replaying), []
            raise InvalidHistory(
                f"history ends {short} proposals short of generation {self._generation}'s end"
            )
        super()._end_replay()
