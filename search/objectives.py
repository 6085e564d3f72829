"""A search's objectives: names, senses, the latency/memory bounds, and told-value checks."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Real

from archvocab.errors import InvalidSpec
from archvocab.wire import OBJECTIVE_SENSE, Constraints
from search.errors import InvalidResult

# Measured metric each hardware bound applies to (Constraints field -> value name).
_BOUNDED = {"max_latency_ms": "latency_ms", "max_memory_mb": "memory_mb"}


class Objectives:
    """Objective names in order, their senses, and the feasibility bounds of `constraints`.

    A candidate's values merge its zero-cost proxies with what its measurement told; told
    values win where both name the same metric.
    """

    def __init__(self, names: Sequence[str], constraints: Constraints) -> None:
        if isinstance(names, str) or not names:
            raise InvalidSpec("objectives", "must be a non-empty list of objective names")
        for name in names:
            if name not in OBJECTIVE_SENSE:
                allowed = ", ".join(OBJECTIVE_SENSE)
                raise InvalidSpec("objectives", f"unknown objective {name!r}; allowed: {allowed}")
        if len(set(names)) != len(names):
            raise InvalidSpec("objectives", f"must not repeat, got {list(names)}")
        self.names: tuple[str, ...] = tuple(names)
        self.senses: dict[str, str] = {name: OBJECTIVE_SENSE[name] for name in names}
        self._bounds: dict[str, float] = {
            metric: float(getattr(constraints, field))
            for field, metric in _BOUNDED.items()
            if getattr(constraints, field) is not None
        }

    def check(
        self, arch_id: str, proxies: Mapping[str, float], told: Mapping[str, object]
    ) -> dict[str, float]:
        """Validated copy of told values: every needed metric present, all finite numbers."""
        if not isinstance(told, Mapping):
            raise InvalidResult(f"{arch_id}: values must be a mapping of metric -> number or None")
        for name in (*self.names, *self._bounds):
            if name not in told and name not in proxies:
                raise InvalidResult(
                    f"{arch_id}: values lack {name!r}, which this search needs; "
                    f"tell None for a failed candidate"
                )
        out: dict[str, float] = {}
        for name, value in told.items():
            if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
                raise InvalidResult(f"{arch_id}: {name} must be a finite number, got {value!r}")
            out[str(name)] = float(value)
        return out

    def merge(self, proxies: Mapping[str, float], told: Mapping[str, float]) -> dict[str, float]:
        """This candidate's objective values, in objective order."""
        both = {**proxies, **told}
        return {name: both[name] for name in self.names}

    def minimised(self, proxies: Mapping[str, float], told: Mapping[str, float]) -> list[float]:
        """The objective vector with maximised objectives negated, for `search.pareto`."""
        both = {**proxies, **told}
        return [-both[n] if self.senses[n] == "max" else both[n] for n in self.names]

    def feasible(self, proxies: Mapping[str, float], told: Mapping[str, float]) -> bool:
        """Within max_latency_ms / max_memory_mb (a bound is met when not exceeded)."""
        both = {**proxies, **told}
        return all(both[metric] <= bound for metric, bound in self._bounds.items())
