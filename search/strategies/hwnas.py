"""hwnas's own strategy: steady-state evolution that screens offspring with online cost models.

In LTS the proxy is free and every device measurement costs real time, yet most measured
candidates end up dominated. This engine spends measurements only where they are predicted
to move the frontier:

- **No generation barrier.** `ask(slots)` proposes as many candidates as there are free
  measurement slots (agents), the moment they are free; a slow or failed agent stalls nothing.
  For a large fleet (40 slots and more) a round waits for a few slots (`round_size`) and
  screens their candidates from one pool, so that proposals keep up with hundreds of agents.
- **Surrogate screening.** After a small initial design (`initial_design`: by default the
  analytic front of a seeded sample, picked by added volume, `search.initial_design`, which
  fills with random samples and says so, `take_fallbacks`, when no objective is known at
  proposal; or random samples), each proposal breeds a pool of offspring (mutants and crossovers of
  frontier parents, plus a few random samples: 1,024 for up to 4 agents, down to 256 for 16
  and more, `screening_pool`),
  predicts every objective the measurement will give with a `CostModel` per objective fitted
  on all results so far, corrected by a Gaussian process of its residuals
  (`search.residual.ResidualModel`, surrogate "residual_gp"), and sends only the offspring
  whose optimistic prediction (`optimism` posterior deviations of that candidate better than
  the mean) adds the most hypervolume to the measured frontier (or the most per device-second
  its measurement is predicted to take, with `value_per` "device_second"; a `CostModel` of
  the seconds measurements told). Surrogate "cost_model" is
  the plain cost model, optimistic by its one typical residual everywhere; "residual_gp"
  falls back on it, and says why (`take_fallbacks`), when the residuals cannot be fitted.
  Candidates still being measured count at the optimistic predictions they were sent for,
  so that the gap each was sent to fill counts as filled and parallel slots do not all chase
  it (at their predicted means, 4 agents needed a median 72 measurements to 99% of LTS's
  3,000 on the replay over 12 seeds, 60.5 this way, and 1 agent 58, with pools of 256;
  docs/benchmarks.md).
  Each proposal carries its predictions so the service can report the models' error.
- **Parents by hypervolume contribution.** Frontier members that hold more of the dominated
  volume are bred more often; every member keeps a small chance.

Normalisation for these choices adapts to the results so far (ideal = best told value,
reference = worst plus a margin): it steers the search and is not the service's fixed
hypervolume reference. The engine's choices depend only on the set of proposals and told
results (each proposal draws from a `random.Random` seeded by the seed and its index, and
pending candidates are re-predicted with the current models), so `restore` needs no event
order: replaying the rows gives the live engine's state.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Union

import numpy as np
from numpy.typing import NDArray

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec
from archvocab.wire import HWNAS_INITIAL_DESIGN
from search.engine import Engine
from search.hypervolume import Normaliser, best_improvement, contributions, epsilon_gaps
from search.initial_design import INITIAL_DESIGNS, analytic_front_design, sample_pool
from search.records import DEVICE_SECONDS, Candidate
from search.surrogate import CostModel, analytic_features

if TYPE_CHECKING:
    from search.residual import ResidualModel

_MARGIN = 0.1  # the adaptive reference lies this share of each objective's range past the worst
# What screens the offspring (`surrogate`): the plain cost models, or those corrected by a
# Gaussian process of their residuals. The plain ones stay the default: the corrected ones
# were level with them on the replay benchmark, not ahead (docs/benchmarks.md, issue 22).
SURROGATES = ("cost_model", "residual_gp")
# What a proposal's predicted added volume is weighed against (`value_per`): nothing (every
# measurement alike), or the device-seconds its measurement is predicted to take, by a
# `CostModel` of the told `DEVICE_SECONDS`; larger models take longer to time. Per
# measurement stays the default: on real CPU the weighing did not make hwnas's measurements
# cheaper (docs/benchmarks.md, "Value per device-second").
VALUES_PER = ("measurement", "device_second")
Model = Union[CostModel, "ResidualModel"]


class SteadyStateEngine(Engine):
    """Asynchronous steady-state evolution with surrogate screening (strategy "hwnas").

    `population.initial` candidates of its `initial_design` start it ("analytic_front": from
    the analytic front of a seeded sample of `pool_size`, by added volume; "random");
    afterwards each proposal screens up to `pool_size` offspring (fewer for a large fleet:
    `screening_pool`; `random_share` of them fresh samples) with the `surrogate` models,
    optimistic by `optimism` deviations of their residual. Parents are drawn by hypervolume
    contribution, with `parent_floor` of the weight spread evenly over the frontier (1:
    uniform). Mutation and crossover use the population's probabilities. `value_per`
    "device_second" weighs each offspring's added volume against its predicted device-seconds
    once enough results told theirs (`DEVICE_SECONDS`); "measurement" weighs every
    measurement alike.
    """

    strategy = "hwnas"
    slow_rounds = True  # each proposal screens hundreds of offspring with fitted models

    def __init__(
        self,
        *args: Any,
        pool_size: int = 1024,
        optimism: float = 1.0,
        random_share: float = 0.1,
        parent_floor: float = 0.05,
        normaliser: Normaliser | None = None,
        surrogate: str = "cost_model",
        value_per: str = "measurement",
        initial_design: str = HWNAS_INITIAL_DESIGN,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if initial_design not in INITIAL_DESIGNS:
            raise InvalidSpec("initial_design", f"must be one of {', '.join(INITIAL_DESIGNS)}")
        self._initial_design = initial_design
        self._design: list[tuple[ArchSpec, dict[str, float]]] | None = None
        if surrogate not in SURROGATES:
            raise InvalidSpec("surrogate", f"must be one of {', '.join(SURROGATES)}")
        if value_per not in VALUES_PER:
            raise InvalidSpec("value_per", f"must be one of {', '.join(VALUES_PER)}")
        self._value_per = value_per
        self._surrogate = surrogate
        self._fallback: str | None = None  # the last round's, so that a lasting one is said once
        self._fixed_normaliser = normaliser
        self._pool_size = pool_size
        self._optimism = optimism
        self._random_share = random_share
        self._parent_floor = parent_floor
        self._senses = self._objectives.senses
        # Objectives a measurement tells (not known at proposal), and bounded metrics.
        self._bounds = {
            metric: bound
            for metric, bound in (
                ("latency_ms", self._constraints.max_latency_ms),
                ("memory_mb", self._constraints.max_memory_mb),
            )
            if bound is not None
        }

    def use_normaliser(self, normaliser: Normaliser) -> None:
        self._fixed_normaliser = normaliser

    # -- proposing -------------------------------------------------------------------------
    def _propose(self, slots: int, remaining: int) -> list[Candidate] | None:
        free = min(slots - len(self._pending), remaining)
        size = round_size(slots)
        if free <= 0 or free < min(size, remaining):
            return None  # a round for a large fleet waits until it can propose `size`
        batch: list[Candidate] = []
        pool_size = screening_pool(self._pool_size, slots)
        taken = set(self._candidates)
        models = self._fit_models()
        shared: _SharedPool | None = None
        for _ in range(free):
            index = len(self._candidates) + len(batch)
            rng = random.Random(f"hwnas.search.strategies.hwnas:{self._seed}:{index}")
            if index < self._population.initial or models is None:
                initial_out = self._pending or self.told < self._population.initial
                if models is None and index >= self._population.initial and initial_out:
                    break  # too few results to model yet: wait for the initial design
                candidate = self._designed_candidate(index, taken) or self._random_candidate(
                    rng, taken
                )
            elif size > 1:  # one pool for the round's screened candidates
                if shared is None:
                    shared = self._shared_pool(rng, taken, models, batch, pool_size)
                candidate = shared.pick(taken) if shared else self._random_candidate(rng, taken)
            else:
                candidate = self._screened_candidate(rng, taken, models, batch, pool_size)
            if candidate is None:
                break
            batch.append(candidate)
            taken.add(candidate.arch_id)
        if not batch and self._pending:
            return None
        return batch

    def _designed_candidate(self, index: int, taken: set[str]) -> Candidate | None:
        """The initial design's `index`th candidate (`initial_design` "analytic_front"), or
        None where the design is random, shorter, or has it measured already."""
        if self._initial_design == "random" or index >= self._population.initial:
            return None
        if self._design is None:  # a function of the seed and space alone: restores agree
            rng = random.Random(f"hwnas.search.initial_design:{self._seed}")
            pool = sample_pool(self._space, self._admit, rng, self._pool_size)
            design = analytic_front_design(pool, self._senses, self._population.initial)
            self._design = design or []
            if len(self._design) < self._population.initial:
                self._fallbacks.append(self._design_shortfall(design is None and bool(pool)))
        if index >= len(self._design) or self._design[index][0].arch_id in taken:
            return None
        spec, proxies = self._design[index]
        return Candidate(spec, self.told, proxies)

    def _design_shortfall(self, no_objective_known: bool) -> str:
        why = (
            f"none of the objectives ({', '.join(self._senses)}) is known at proposal"
            if no_objective_known
            else f"the space gave only {len(self._design)} admissible samples"
        )
        return (
            f"analytic_front initial design not used in full: {why}; "
            f"{self._population.initial - len(self._design)} of its "
            f"{self._population.initial} candidates are random samples"
        )

    def _random_candidate(self, rng: random.Random, taken: set[str]) -> Candidate | None:
        for _ in range(self._max_attempts):
            spec = self._space.sample(rng)
            if spec.arch_id in taken:
                continue
            proxies = self._admit(spec)
            if proxies is not None:
                return Candidate(spec, self.told, proxies)
        return None

    def _screened_candidate(
        self,
        rng: random.Random,
        taken: set[str],
        models: dict[str, Model],
        batch: list[Candidate],
        pool_size: int,
    ) -> Candidate | None:
        shared = self._shared_pool(rng, taken, models, batch, pool_size)
        return shared.pick(taken) if shared else self._random_candidate(rng, taken)

    def _shared_pool(
        self,
        rng: random.Random,
        taken: set[str],
        models: dict[str, Model],
        batch: list[Candidate],
        pool_size: int,
    ) -> _SharedPool | None:
        """`pool_size` offspring bred and predicted once, for one candidate or a round's
        several; None when breeding found nothing new."""
        normaliser = self._normaliser()
        pool = self._offspring(rng, taken, normaliser, pool_size)
        if not pool:
            return None
        believed = self._believed_points(models, normaliser, batch)
        means = self._predict(models, pool)
        hopeful = self._predict(models, pool, optimistic=True)
        feasible = np.array([self._predicted_feasible(h) for h in hopeful])
        points = normaliser.points(hopeful)
        return _SharedPool(self, pool, means, points, feasible, believed, self._costs(pool))

    def _offspring(
        self, rng: random.Random, taken: set[str], normaliser: Normaliser, size: int
    ) -> list[tuple[ArchSpec, dict[str, float]]]:
        """New, admissible children of frontier parents chosen by hypervolume contribution."""
        front = self.frontier()
        if not front:
            parents, weights = [], []
        else:
            points = normaliser.points([self._values(c) for c in front])
            share = contributions(points)
            total = share.sum()
            share = share / total if total > 0 else np.zeros(len(front))
            floor = self._parent_floor
            weights = list((1 - floor) * share + floor / len(front))
            parents = [c.spec for c in front]
        p = self._population
        pool: dict[str, tuple[ArchSpec, dict[str, float]]] = {}
        for _ in range(size):
            if not parents or rng.random() < self._random_share:
                spec = self._space.sample(rng)
            elif len(parents) < 2 or rng.random() < 0.5:
                spec = self._space.mutate(rng.choices(parents, weights)[0], rng, p.mutation_prob)
            else:
                # Two different parents: a crossover of a parent with itself is the parent.
                i = rng.choices(range(len(parents)), weights)[0]
                others = [j for j in range(len(parents)) if j != i]
                j = rng.choices(others, [weights[k] for k in others])[0]
                spec = self._space.crossover(parents[i], parents[j], rng, p.crossover_prob)
            if spec.arch_id in taken or spec.arch_id in pool:
                continue
            proxies = self._admit(spec)
            if proxies is not None:
                pool[spec.arch_id] = (spec, proxies)
        return list(pool.values())

    # -- models ----------------------------------------------------------------------------
    def _modelled(self) -> list[str]:
        """What a measurement tells that the proposal does not know: the non-proxy
        objectives and the bounded metrics."""
        known = set(next(iter(self._candidates.values())).proxies) if self._candidates else set()
        names = [o for o in self.objectives if o not in known]
        return names + [m for m in self._bounds if m not in names]

    def _fit_models(self) -> dict[str, Model] | None:
        """One model per modelled objective, or None while there are too few results."""
        measured = self.measured()
        if not measured:
            return None
        rows = [analytic_features(c.spec, c.proxies) for c, _ in measured]
        if len(measured) < len(rows[0]) + 3:
            return None
        targets = {name: [told[name] for _, told in measured] for name in self._modelled()}
        plain = {name: CostModel(rows, values) for name, values in targets.items()}
        if self._surrogate == "cost_model":
            return dict(plain)
        # Imported here: scikit-learn takes about a second to import, which only the
        # searches that ask for this surrogate should pay (every server start would).
        from search.residual import ResidualModel

        try:
            corrected = {
                name: ResidualModel(plain[name], rows, values) for name, values in targets.items()
            }
        except (ValueError, ArithmeticError) as exc:  # LinAlgError is a ValueError
            self._fall_back(f"{type(exc).__name__}: {exc}")
            return dict(plain)
        self._fallback = None
        return dict(corrected)

    def _costs(self, pool: list[tuple[ArchSpec, dict[str, float]]]) -> NDArray[np.float64] | None:
        """Each offspring's predicted device-seconds, when proposals weigh them (`value_per`)
        and enough measurements told theirs; else None (every measurement alike)."""
        if self._value_per == "measurement":
            return None
        timed = [
            (c, told[DEVICE_SECONDS])
            for c, told in self.measured()
            if told.get(DEVICE_SECONDS, 0.0) > 0  # results that told no seconds teach nothing
        ]
        rows = [analytic_features(c.spec, c.proxies) for c, _ in timed]
        if not rows or len(rows) < len(rows[0]) + 3:
            return None
        model = CostModel(rows, [seconds for _, seconds in timed])
        return model.predict([analytic_features(spec, proxies) for spec, proxies in pool])

    def _fall_back(self, error: str) -> None:
        reason = f"residual model not fitted ({error}); screening with the plain cost models"
        if reason != self._fallback:
            self._fallbacks.append(reason)
        self._fallback = reason

    def _predict(
        self,
        models: dict[str, Model],
        pool: list[tuple[ArchSpec, dict[str, float]]],
        *,
        optimistic: bool = False,
    ) -> list[dict[str, float]]:
        features = [analytic_features(spec, proxies) for spec, proxies in pool]
        columns: dict[str, NDArray[np.float64]] = {}
        for name, model in models.items():
            better = 1.0 if self._senses.get(name, "min") == "max" else -1.0
            sigmas = better * self._optimism if optimistic else 0.0
            columns[name] = model.predict_shifted(features, sigmas)
        return [
            {**proxies, **{name: float(col[i]) for name, col in columns.items()}}
            for i, (_, proxies) in enumerate(pool)
        ]

    def _predicted_feasible(self, values: dict[str, float]) -> bool:
        return all(values[m] <= bound for m, bound in self._bounds.items())

    # -- normalised frontier ---------------------------------------------------------------
    def _values(self, candidate: Candidate) -> dict[str, float]:
        told = self._results[candidate.arch_id] or {}
        return {**candidate.proxies, **told}

    def _normaliser(self) -> Normaliser:
        """The search's fixed one if given, else adaptive: ideal at the best told value,
        reference past the worst."""
        if self._fixed_normaliser is not None:
            return self._fixed_normaliser
        rows = [{**c.proxies, **t} for c, t in self.measured()]
        ideal, reference = {}, {}
        for name in self.objectives:
            values = np.array([r[name] for r in rows])
            lo, hi = float(values.min()), float(values.max())
            pad = _MARGIN * (hi - lo) if hi > lo else max(abs(hi), 1.0) * _MARGIN
            if self._senses[name] == "max":
                ideal[name], reference[name] = hi, lo - pad
            else:
                ideal[name], reference[name] = lo, hi + pad
        return Normaliser(self.objectives, ideal, reference)

    def _believed_points(
        self, models: dict[str, Model], normaliser: Normaliser, batch: list[Candidate]
    ) -> NDArray[np.float64]:
        """The measured frontier plus pending candidates at their optimistic predictions."""
        front = [self._values(c) for c in self.frontier()]
        waiting = [self._candidates[a] for a in sorted(self._pending)] + batch
        pairs = [(c.spec, c.proxies) for c in waiting]
        guesses = self._predict(models, pairs, optimistic=True)
        rows = front + [g for g in guesses if self._predicted_feasible(g)]
        if not rows:
            return np.empty((0, len(self.objectives)))
        return normaliser.points(rows)


# A round for a large fleet proposes at least this share of the search's measuring slots,
# all screened from one pool of offspring: breeding and predicting the pool is most of a
# proposal's cost, and one result at a time a fleet of hundreds asked for more rounds a
# second than a server process could compute (docs/benchmarks.md). The server queues 5% of
# its agents ahead (server.services.searches.QUEUE_AHEAD), so agents find the round's jobs
# before they run dry. Below 2 / ROUND_SHARE slots, each candidate has a pool of its own.
ROUND_SHARE = 0.05


# Breeding and predicting the pool is most of a proposal's CPU, which the server spends once
# per result. More offspring find better gaps: on the replay of the space, 1,024
# instead of 256 took hwnas to 99% of LTS's 3,000 in a median 52 measurements instead of 58
# (1 agent; 4 agents: 55.5 instead of 60.5; 12 seeds, docs/benchmarks.md), at about 4x the
# CPU a proposal. A small fleet, where each device-second counts most and results arrive
# slowly, gets the whole pool; from SMALL_FLEET slots on it shrinks in proportion, to no less
# than SMALL_POOL, so that the server's CPU per result for a fleet of 16 and more stays what
# it was with 256.
SMALL_FLEET = 4
SMALL_POOL = 256


def screening_pool(pool_size: int, slots: int) -> int:
    """How many offspring a proposal for `slots` measuring slots breeds and screens."""
    shrunk = pool_size * SMALL_FLEET // max(slots, SMALL_FLEET)
    return max(min(pool_size, SMALL_POOL), shrunk)


def round_size(slots: int) -> int:
    """How many candidates a proposal round for `slots` measuring slots waits to propose."""
    return max(1, int(slots * ROUND_SHARE))


class _SharedPool:
    """A bred and predicted pool that candidates are picked from one at a time: each pick the
    one whose optimistic prediction adds the most hypervolume to the believed frontier (per
    predicted device-second, with `costs`), which
    then holds the pick at that prediction (so that a round does not pile onto one gap);
    when none is predicted to add any, the feasible one closest to the frontier."""

    def __init__(
        self,
        engine: SteadyStateEngine,
        pool: list[tuple[ArchSpec, dict[str, float]]],
        means: list[dict[str, float]],
        points: NDArray[np.float64],
        feasible: NDArray[np.bool_],
        believed: NDArray[np.float64],
        costs: NDArray[np.float64] | None = None,
    ) -> None:
        self._engine, self._pool, self._means = engine, pool, means
        self._points, self._feasible, self._believed = points, feasible, believed
        self._costs = costs
        self._open = np.ones(len(pool), dtype=bool)
        self._upper: NDArray[np.float64] | None = None

    def __bool__(self) -> bool:
        return bool(self._open.any())

    def pick(self, taken: set[str]) -> Candidate | None:
        open_ = self._open & np.array([spec.arch_id not in taken for spec, _ in self._pool])
        if not open_.any():
            return None
        eligible = open_ & self._feasible
        pick, gain, self._upper = best_improvement(
            self._believed, self._points, eligible, self._upper, self._costs
        )
        if gain <= 0:  # nothing predicted to add volume: the one closest to the frontier
            gaps = epsilon_gaps(self._believed, self._points)
            gaps[~self._feasible] += 1e6
            gaps[~open_] = np.inf
            pick = int(np.argmin(gaps))
        self._open[pick] = False
        spec, proxies = self._pool[pick]
        if self._feasible[pick]:
            self._believed = np.vstack([self._believed, self._points[pick]])
        predicted = {k: float(v) for k, v in self._means[pick].items() if k not in proxies}
        return Candidate(spec, self._engine.told, proxies, predicted=predicted)
