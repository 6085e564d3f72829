"""Search engines and their math: pure library, values in and values out (no HTTP, no DB).

`LTSEngine` is LTS's evolutionary Pareto search as an ask/tell engine; `search.pareto` holds
the exact non-dominated-set computation it and the server share.
"""

from search.errors import (
    AlreadyTold,
    InvalidHistory,
    InvalidResult,
    SearchError,
    UnknownCandidate,
)
from search.lts import LTSEngine
from search.pareto import dominates, non_dominated_indices, non_dominated_mask
from search.records import PENDING, Candidate, HistoryRecord

__all__ = [
    "PENDING",
    "AlreadyTold",
    "Candidate",
    "HistoryRecord",
    "InvalidHistory",
    "InvalidResult",
    "LTSEngine",
    "SearchError",
    "UnknownCandidate",
    "dominates",
    "non_dominated_indices",
    "non_dominated_mask",
]
