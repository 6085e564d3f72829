"""One LTS generation: new, admissible children of frontier parents, with bounded retries.

LTS as released retried a child until it was unseen, with no limit, and so could spin
forever once the space (or the part of it the constraints allow) ran dry. Here every slot
gets `max_attempts` tries of its operator, then as many fresh random samples, and a slot
that still finds nothing ends the generation early.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence, Set

from archvocab.registry import ArchSpec, SearchSpace
from archvocab.wire import Population

# A spec's proxies when it passes the cheap constraints, else None.
Admit = Callable[[ArchSpec], dict[str, float] | None]
Operator = Callable[[random.Random], ArchSpec]
Child = tuple[ArchSpec, dict[str, float]]


def breed(
    space: SearchSpace,
    population: Population,
    frontier: Sequence[ArchSpec] | None,
    *,
    size: int,
    rng: random.Random,
    seen: Set[str],
    admit: Admit,
    max_attempts: int,
) -> list[Child]:
    """Up to `size` children in slot order, none of whose arch_ids is in `seen` or repeated.

    ``frontier=None`` means generation 0: `population.initial` random samples. Otherwise
    `population.parents` parents are drawn from `frontier` and the slots are
    `population.mutations` mutants then `population.crossovers` crossovers; with an empty
    frontier (everything failed or was infeasible) every slot is a random sample.
    """
    taken = set(seen)
    children: list[Child] = []
    for operator in _plan(space, population, frontier, rng)[:size]:
        child = None
        if operator is not None:
            child = _first_new(operator, rng, taken, admit, max_attempts)
        if child is None:
            child = _first_new(space.sample, rng, taken, admit, max_attempts)
        if child is None:
            # Even random sampling found nothing new and admissible in max_attempts tries:
            # the remaining slots would burn the same tries in vain.
            break
        children.append(child)
        taken.add(child[0].arch_id)
    return children


def _plan(
    space: SearchSpace,
    population: Population,
    frontier: Sequence[ArchSpec] | None,
    rng: random.Random,
) -> list[Operator | None]:
    """One operator per slot; None stands for a plain random sample."""
    if frontier is None:
        return [None] * population.initial
    n_children = population.mutations + population.crossovers
    if not frontier:
        return [None] * n_children
    parents = rng.sample(list(frontier), min(population.parents, len(frontier)))

    def mutant(r: random.Random) -> ArchSpec:
        return space.mutate(r.choice(parents), r, population.mutation_prob)

    def crossover(r: random.Random) -> ArchSpec:
        a, b = r.sample(parents, 2)
        return space.crossover(a, b, r, population.crossover_prob)

    # A crossover of a parent with itself only gives the parent back, which is never new.
    cross: Operator | None = crossover if len(parents) >= 2 else None
    return [mutant] * population.mutations + [cross] * population.crossovers


def _first_new(
    make: Operator, rng: random.Random, taken: Set[str], admit: Admit, max_attempts: int
) -> Child | None:
    """The first spec `make` gives that is unseen and admitted, within max_attempts tries."""
    for _ in range(max_attempts):
        spec = make(rng)
        if spec.arch_id in taken:
            continue
        proxies = admit(spec)
        if proxies is not None:
            return spec, proxies
    return None
