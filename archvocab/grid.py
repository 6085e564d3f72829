"""Grid building blocks shared by search spaces: integer ranges and value checks."""

from __future__ import annotations

import math
from dataclasses import dataclass

from archvocab.errors import InvalidSpec

__all__ = ["IntRange", "positive_int"]


def positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True)
class IntRange:
    """min..max inclusive in steps of step."""

    min: int
    max: int
    step: int = 1

    def values(self, lower: int | None = None) -> list[int]:
        start = self.min
        if lower is not None and lower > start:
            start = self.min + math.ceil((lower - self.min) / self.step) * self.step
        return list(range(start, self.max + 1, self.step))

    def check(self, name: str) -> None:
        for part in ("min", "max", "step"):
            value = getattr(self, part)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidSpec(f"{name}.{part}", f"must be a positive integer, got {value!r}")
        if self.min > self.max:
            raise InvalidSpec(f"{name}.min", f"must be <= max ({self.max}), got {self.min}")
