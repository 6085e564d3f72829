"""A search's objectives: names, senses, the latency/memory bounds, and told-value checks."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Real

import numpy as np
from numpy.typing import NDArray

from archvocab.errors import InvalidSpec
from archvocab.wire import OBJECTIVE_SENSE, Constraints
from search.errors import InvalidResult
from search.pareto import dominated_by, front_beyond_noise


def within_bounds(constraints: Constraints, values: Mapping[str, float | None]) -> bool:
    """Whether `values` meet max_latency_ms / max_memory_mb (a bound is met when not
    exceeded; a bounded value that is missing does not meet it)."""
    return all(
        values.get(metric) is not None and values[metric] <= bound
        for metric, bound in constraints.hardware_bounds().items()
    )


def minimised(objectives: Sequence[str], rows: Sequence[Mapping[str, float]]) -> NDArray:
    """(n, k) objective values with maximised objectives negated, as `search.pareto` wants."""
    signs = np.array([-1.0 if OBJECTIVE_SENSE[o] == "max" else 1.0 for o in objectives])
    values = np.array([[row[o] for o in objectives] for row in rows], dtype=float)
    return values.reshape(len(rows), len(objectives)) * signs


def interval_bounds(nominal: NDArray, half_widths: NDArray) -> tuple[NDArray, NDArray]:
    """(low, high) of minimised values known to within log half-widths (negated values
    flip which end is which), as `search.pareto` wants them."""
    low, high = nominal * np.exp(-half_widths), nominal * np.exp(half_widths)
    return np.minimum(low, high), np.maximum(low, high)


class Objectives:
    """Objective names in order, their senses, the feasibility bounds of `constraints`, and
    the measurement noise the frontier allows for (`tolerance`, objective -> log half-width).

    A candidate's values merge its zero-cost proxies with what its measurement told; told
    values win where both name the same metric.
    """

    def __init__(
        self,
        names: Sequence[str],
        constraints: Constraints,
        tolerance: Mapping[str, float] | None = None,
    ) -> None:
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
        # -1 where `minimised` negates (a maximised objective), in objective order
        self.signs = np.array([-1.0 if OBJECTIVE_SENSE[o] == "max" else 1.0 for o in names])
        self._constraints = constraints
        self._tolerance = _checked_tolerance(tolerance or {}, self.names)
        self._bounds: dict[str, float] = constraints.hardware_bounds()

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
        """One candidate's objective vector as the module's `minimised` gives it."""
        return minimised(self.names, [{**proxies, **told}])[0].tolist()

    def feasible(self, proxies: Mapping[str, float], told: Mapping[str, float]) -> bool:
        """Within max_latency_ms / max_memory_mb (a bound is met when not exceeded)."""
        return within_bounds(self._constraints, {**proxies, **told})

    def front(self, rows: Sequence[Mapping[str, float]]) -> NDArray[np.bool_]:
        """Which of `rows` (objective values) are not dominated beyond the tolerance."""
        nominal = minimised(self.names, rows)
        low, high = interval_bounds(nominal, np.broadcast_to(self._widths(), nominal.shape))
        mask, _ = front_beyond_noise(nominal, low, high)
        return mask

    def bounds(self, values: NDArray) -> tuple[NDArray, NDArray]:
        """(low, high) of rows of `minimised` values, by the tolerance's widths."""
        values = np.reshape(values, (-1, len(self.names)))
        return interval_bounds(values, np.broadcast_to(self._widths(), values.shape))

    def extend_front(
        self, front: tuple[NDArray, NDArray], row: tuple[NDArray, NDArray]
    ) -> tuple[bool, NDArray[np.bool_]]:
        """One more row beside a frontier (each as `bounds` of the `minimised` values `front`
        gives): (whether the row joins it, which members stay). Dominated beyond the
        tolerance is transitive with one width per objective, so this is `front` of the
        frontier and the row, at the cost of one comparison per member."""
        (front_low, front_high), (row_low, row_high) = front, row
        joins = not dominated_by(row_low, front_high)[0]
        stays = ~dominated_by(front_low, row_high) if joins else np.ones(len(front_low), bool)
        return joins, stays

    def _widths(self) -> NDArray:
        return np.array([self._tolerance.get(name, 0.0) for name in self.names])


def _checked_tolerance(tolerance: Mapping[str, float], names: Sequence[str]) -> dict[str, float]:
    out = {}
    for name, width in tolerance.items():
        if name not in names:
            continue  # a width for an objective this search does not have says nothing
        if isinstance(width, bool) or not isinstance(width, Real) or not 0 <= width < math.inf:
            raise InvalidSpec("tolerance", f"{name}: must be a finite number >= 0, got {width!r}")
        out[name] = float(width)
    return out
