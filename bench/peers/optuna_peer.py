"""Peer baselines: Optuna's samplers on LTS's GPT-2 decoder space.

The search-efficiency benchmark compares hwnas's strategies with off-the-shelf optimisers at
equal measurement budgets. This module drives Optuna's multi-objective samplers through its
ask/tell interface on the same three objectives that hwnas's strategies optimise (maximise
the analytic `decoder_params`, minimise the device's `latency_ms` and `memory_mb`), written
the way an Optuna user would write it: `NSGAIISampler`, `TPESampler` (Optuna's default)
and `GPSampler` (a Gaussian process with log expected hypervolume improvement), each with
its default settings and the run's seed (`SAMPLERS`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import optuna

from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec
from bench.in_flight import InFlight

__all__ = ["SAMPLERS", "PeerRun", "propose", "run_optuna"]

DIRECTIONS = ["maximize", "minimize", "minimize"]
OBJECTIVES = ("decoder_params", "latency_ms", "memory_mb")
# A budget counts distinct architectures; once NSGA-II has converged it may propose little
# else than repeats, so the ask/tell loop gives up after this many trials per unit of budget.
MAX_TRIALS_PER_BUDGET = 50

Measure = Callable[[GPT2Spec], Mapping[str, float]]


@dataclass(frozen=True)
class PeerRun:
    """What a peer measured, in order, and how many trials it asked for: the trials that
    repaired to an architecture measured already are `repeats`, told from the cache."""

    measured: list[tuple[GPT2Spec, dict[str, float]]]
    trials: int

    @property
    def repeats(self) -> int:
        return self.trials - len(self.measured)


Score = Callable[[GPT2Spec], Mapping[str, float]]


def _nsga2(seed: int, population_size: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.NSGAIISampler(population_size=population_size, seed=seed)


def _tpe(seed: int, population_size: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.TPESampler(seed=seed)


def _gp(seed: int, population_size: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.GPSampler(seed=seed)


# Sampler name -> its constructor (seed, population size: NSGA-II's only).
SAMPLERS: dict[str, Callable[[int, int], optuna.samplers.BaseSampler]] = {
    "nsga2": _nsga2,
    "tpe": _tpe,
    "gp": _gp,
}


def run_optuna(
    space: GPT2Space,
    measure: Measure,
    score: Score,
    *,
    budget: int,
    seed: int,
    sampler: str = "nsga2",
    population_size: int = 100,
    in_flight: InFlight | None = None,
) -> PeerRun:
    """Run one of Optuna's samplers (`SAMPLERS`) for `budget` distinct measured architectures.

    space: archvocab.spaces.gpt2.space.GPT2Space; measure(spec) -> dict with 'latency_ms',
    'memory_mb' (and maybe more keys, kept); score(spec) -> dict with 'decoder_params' among others.
    Returns the run: [(spec, values)] in measurement order, one entry per DISTINCT
    architecture measured, values = {**score(spec), **measure(spec)}, and the trials asked.

    The search space is define-by-run: n_layer, d_model, d_embed and div_val, then d_inner_i
    and n_head_i for each of the n_layer layers only. Optuna needs a parameter's distribution
    to be the same in every trial, so the per-layer genes range over the whole grid and are
    repaired once d_model is known: d_inner_i is raised to the least grid value
    >= d_inner_min_factor x d_model, n_head_i becomes the nearest head count dividing d_model
    (and d_model the nearest usable one, for spaces where some are not). Optuna's NSGA-II
    evolves only the parameters every trial has (its intersection search space), so genes of
    layers deeper than the shallowest depth seen are drawn at random, as for any Optuna user;
    TPE and the GP sampler do the same (they warn about it; the warnings are kept quiet).

    A proposal that repairs to an architecture already measured is told its cached values,
    not measured again and not counted against the budget. With `in_flight`, its agents
    measure at once on the replayed clock (the values' `wall_s` each): a proposal of an
    architecture under way waits for that measurement's values. The loop stops early, returning
    what it has, after MAX_TRIALS_PER_BUDGET x budget trials.
    """
    if budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
    results: list[tuple[GPT2Spec, dict[str, float]]] = []
    twins: dict[str, list[optuna.Trial]] = {}  # trials of an architecture under way
    trials = 0
    cache: dict[str, dict[str, float]] = {}
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(logging.ERROR)  # not the samplers' fallback warnings
    try:
        with warnings.catch_warnings():
            # Optuna flags experimental features and upcoming changes with warnings; the
            # test suite turns warnings into errors, and none of them changes this run.
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            warnings.simplefilter("ignore", FutureWarning)
            study = optuna.create_study(  # no storage: Optuna keeps the study in memory
                directions=DIRECTIONS, sampler=SAMPLERS[sampler](seed, population_size)
            )
            if in_flight is None:
                in_flight = InFlight(space, 1)
            most = MAX_TRIALS_PER_BUDGET * budget
            while True:
                # Each free agent asks for a trial (Optuna's `optimize(n_jobs=K)` does the
                # same from K threads): those under way are Optuna's running trials.
                while in_flight.free and len(results) + len(in_flight) < budget and trials < most:
                    trial = study.ask()
                    trials += 1
                    spec = propose(trial, space)
                    values = cache.get(spec.arch_id)
                    if values is not None:
                        study.tell(trial, [float(values[name]) for name in OBJECTIVES])
                        continue
                    if in_flight.under_way(spec.arch_id):
                        in_flight.same += 1  # told with that measurement's values, below
                        twins.setdefault(spec.arch_id, []).append(trial)
                        continue
                    values = {**score(spec), **measure(spec)}
                    in_flight.start(spec, values.get("wall_s", 0.0), (trial, spec, values))
                if not len(in_flight):
                    break
                trial, spec, values = in_flight.finish()
                cache[spec.arch_id] = values
                results.append((spec, values))
                for told in [trial, *twins.pop(spec.arch_id, [])]:
                    study.tell(told, [float(values[name]) for name in OBJECTIVES])
    finally:
        optuna.logging.set_verbosity(verbosity)
    return PeerRun(results, trials)


def propose(trial: optuna.Trial, space: GPT2Space) -> GPT2Spec:
    """Suggest one architecture's genes on `trial` and repair them into a member of `space`."""
    n_layer = trial.suggest_int(
        "n_layer", space.n_layer.min, space.n_layer.max, step=space.n_layer.step
    )
    d_model = _nearest(
        trial.suggest_int("d_model", space.d_model.min, space.d_model.max, step=space.d_model.step),
        space._d_models,  # the d_model values that admit a head count and a d_inner
    )
    d_embed = trial.suggest_categorical("d_embed", list(space.d_embed))
    div_val = trial.suggest_categorical("div_val", list(space.div_val))
    grid = space.d_inner
    # The space's own rules for which per-layer values a d_model admits, so a repaired spec
    # is a member by the same test check_member applies.
    lowest_inner = space._inners_for(d_model)[0]
    heads = space._heads_for(d_model)
    d_inner, n_head = [], []
    for i in range(n_layer):
        inner = trial.suggest_int(f"d_inner_{i}", grid.min, grid.max, step=grid.step)
        d_inner.append(max(inner, lowest_inner))
        n_head.append(_nearest(trial.suggest_categorical(f"n_head_{i}", list(space.n_head)), heads))
    return space._make(
        n_layer=n_layer,
        d_model=d_model,
        d_inner=d_inner,
        n_head=n_head,
        d_embed=d_embed,
        div_val=div_val,
    )


def _nearest(value: int, allowed: list[int] | tuple[int, ...]) -> int:
    """The allowed value closest to `value`; ties go to the smaller one, deterministically."""
    return min(allowed, key=lambda a: (abs(a - value), a))
