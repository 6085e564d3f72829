"""Grid building blocks shared by search spaces: integer ranges and value checks."""

from __future__ import annotations

import math
from dataclasses import dataclass

from archvocab.errors import InvalidSpec

__all__ = ["IntRange", "positive_int", "shrinks_to_nothing"]


def positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def shrinks_to_nothing(width: int, factor: int, times: int) -> bool:
    """Whether ``width // factor**times < 1`` (positive integers), without computing the
    power: a spec with a 300-digit div_val and 20,000 cutoffs took seconds to refuse."""
    if factor == 1:
        return width < 1
    for _ in range(times):  # at most width.bit_length() + 1 rounds: factor >= 2
        if width < 1:
            break
        width //= factor
    return width < 1


@dataclass(frozen=True)
class IntRange:
    """min..max inclusive in steps of step."""

    min: int
    max: int
    step: int = 1

    def values(self, lower: int | None = None) -> list[int]:
        return list(range(self._start(lower), self.max + 1, self.step))

    def reaches(self, lower: int) -> bool:
        """Whether some value is >= lower; `bool(values(lower))` without listing them."""
        return self._start(lower) <= self.max

    def _start(self, lower: int | None) -> int:
        if lower is None or lower <= self.min:
            return self.min
        return self.min + math.ceil((lower - self.min) / self.step) * self.step

    def check(self, name: str) -> None:
        for part in ("min", "max", "step"):
            value = getattr(self, part)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidSpec(f"{name}.{part}", f"must be a positive integer, got {value!r}")
        if self.min > self.max:
            raise InvalidSpec(f"{name}.min", f"must be <= max ({self.max}), got {self.min}")
