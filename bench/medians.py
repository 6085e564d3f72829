"""Medians over seeds or runs, where some runs may never reach what is measured (None)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def median_or_none(values: Sequence[float | None]) -> float | None:
    """The median, counting a None (never reached) as worse than every number."""
    ranked = sorted(values, key=lambda v: math.inf if v is None else v)
    if not ranked:
        return None
    middle = len(ranked) // 2
    if len(ranked) % 2:
        return ranked[middle]
    low, high = ranked[middle - 1], ranked[middle]
    return None if low is None or high is None else (low + high) / 2


def median_range(values: Sequence[float | None], digits: int = 4) -> str:
    """'median (min-max)' of the numbers among `values`; '-' when there are none."""
    got = [v for v in values if v is not None]
    if not got:
        return "-"
    return f"{statistics.median(got):.{digits}f} ({min(got):.{digits}f}-{max(got):.{digits}f})"
