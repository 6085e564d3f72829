"""Several agents measuring at once, replayed: the measurements in flight, the clock, and how
far apart the proposals of a batch are.

With K agents a search proposes while K - 1 measurements are still under way. A proposer that
does not account for them piles its batch onto one region, or proposes an architecture that is
being measured right now (issue 22: "no batch collapses onto one region"). `InFlight` keeps
the measurements under way in the order they finish on the replayed device's clock (each
takes its replayed wall time), and records for each new one how close it lies to those under
way: the distance to the nearest, in the space's genes scaled to [0, 1] (depth, width, the
mean feed-forward size, embedding size), and whether it is the same architecture.
"""

from __future__ import annotations

import heapq
import itertools
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec


@dataclass(order=True)
class _Measuring:
    done_at: float
    order: int
    arch_id: str = field(compare=False)
    genes: tuple[float, ...] = field(compare=False)
    payload: Any = field(compare=False)


class InFlight:
    """The measurements under way on `agents` replayed agents."""

    def __init__(self, space: GPT2Space, agents: int) -> None:
        if agents < 1:
            raise ValueError(f"agents must be >= 1, got {agents}")
        self.agents = agents
        self._space = space
        self._heap: list[_Measuring] = []
        self._order = itertools.count()
        self.clock = 0.0  # the replayed wall clock: when the last finished measurement ended
        self.nearest: list[float] = []  # per proposal made while others were under way
        self.same: int = 0  # proposals of an architecture under way at the time

    @property
    def free(self) -> int:
        return self.agents - len(self._heap)

    def start(self, spec: GPT2Spec, wall_s: float, payload: Any = None) -> None:
        """An agent starts measuring `spec` now, for `wall_s` replayed seconds."""
        genes = self._genes(spec)
        if self._heap:
            self.nearest.append(min(math.dist(genes, m.genes) for m in self._heap))
            self.same += self.under_way(spec.arch_id)
        measuring = _Measuring(self.clock + wall_s, next(self._order), spec.arch_id, genes, payload)
        heapq.heappush(self._heap, measuring)

    def under_way(self, arch_id: str) -> bool:
        return any(m.arch_id == arch_id for m in self._heap)

    def finish(self) -> Any:
        """The next measurement to finish (the clock moves to its end): its payload."""
        measuring = heapq.heappop(self._heap)
        self.clock = measuring.done_at
        return measuring.payload

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        # Without it an empty InFlight is falsy, and `in_flight or InFlight(space, 1)` quietly
        # replaced K agents by one, twice (the 4-agent replay, then the Archai peer).
        return True

    def summary(self) -> dict[str, Any]:
        """The batch's spread: the median and the 10th percentile of the distance from a
        proposal to the nearest measurement under way, and the repeats of one under way."""
        near = sorted(self.nearest)
        return {
            "agents": self.agents,
            "nearest_median": round(statistics.median(near), 4) if near else None,
            "nearest_p10": round(near[len(near) // 10], 4) if near else None,
            "same_as_under_way": self.same,
            "wall_clock_s": round(self.clock, 1),
        }

    def _genes(self, spec: GPT2Spec) -> tuple[float, ...]:
        space = self._space

        def scaled(value: float, low: float, high: float) -> float:
            return (value - low) / (high - low) if high > low else 0.0

        d_embeds = [e for e in space.d_embed if e is not None] or [0]
        return (
            scaled(spec.n_layer, space.n_layer.min, space.n_layer.max),
            scaled(spec.d_model, space.d_model.min, space.d_model.max),
            scaled(statistics.fmean(spec.d_inner), space.d_inner.min, space.d_inner.max),
            scaled(spec.d_embed or 0, min(d_embeds), max(d_embeds)),
        )
