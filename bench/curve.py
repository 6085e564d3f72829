"""A search's hypervolume curve: the hypervolume and the device-seconds spent after every
measurement, recorded as the measurements come, and read back at a count, a device time or a
level."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from search.hypervolume import Normaliser, hypervolume


class Curve:
    """Hypervolume and device-seconds after every measurement, kept incrementally: the current
    non-dominated points inside the reference box, the volume recomputed only when it changes."""

    def __init__(self, normaliser: Normaliser) -> None:
        self._normaliser = normaliser
        self._front = np.empty((0, len(normaliser.objectives)))
        self._hv = 0.0
        self._device_s = 0.0
        self.hv: list[float] = []
        self.device_s: list[float] = []
        self.from_table = 0  # measurements the replay took exactly from its table

    @property
    def front(self) -> NDArray[np.float64]:
        """The non-dominated normalised points inside the reference box so far."""
        return self._front.copy()

    def add(self, values: Mapping[str, float], wall_s: float, from_table: bool) -> None:
        self._device_s += wall_s
        self.from_table += bool(from_table)
        point = self._normaliser(values)
        inside = bool((point < 1.0).all())
        covered = len(self._front) and bool((self._front <= point).all(axis=1).any())
        if inside and not covered:
            keep = ~(point <= self._front).all(axis=1)
            self._front = np.vstack([self._front[keep], point])
            self._hv = hypervolume(self._front)
        self.hv.append(self._hv)
        self.device_s.append(self._device_s)


# A run below is a curve as the results hold it: {"hv": [...], "device_s": [...], ...}.
def hv_at_count(run: Mapping[str, Any], count: int) -> float | None:
    """The hypervolume after `count` measurements, None if the run stopped before."""
    return run["hv"][count - 1] if len(run["hv"]) >= count else None


def hv_at_seconds(run: Mapping[str, Any], seconds: float) -> float | None:
    """The hypervolume with `seconds` device-seconds spent, None if the run stopped before."""
    device = run["device_s"]
    if not device or device[-1] < seconds:
        return None
    done = int(np.searchsorted(device, seconds, side="right"))
    return run["hv"][done - 1] if done else 0.0


def first_reaching(run: Mapping[str, Any], level: float) -> int | None:
    """The first measurement count whose hypervolume is >= level, None if never."""
    for index, value in enumerate(run["hv"]):
        if value >= level:
            return index + 1
    return None
