"""Search engines and their math: pure library, values in and values out (no HTTP, no DB).

Strategies are ask/tell engines on `search.engine.Engine`: `LTSEngine` (LTS Algorithm 1),
`NSGA2Engine` (pymoo's NSGA-II) and `SteadyStateEngine` (hwnas's own: steady-state evolution
with surrogate screening). `search.pareto` holds the exact non-dominated-set computation,
`search.hypervolume` the normalised hypervolume every strategy is judged by.
"""

from search.engine import Engine
from search.errors import (
    AlreadyTold,
    InvalidHistory,
    InvalidResult,
    SearchError,
    UnknownCandidate,
)
from search.hypervolume import Normaliser, hypervolume
from search.lts import LTSEngine
from search.nsga2 import NSGA2Engine
from search.pareto import dominates, non_dominated_indices, non_dominated_mask
from search.records import PENDING, Candidate, HistoryRecord
from search.steady import SteadyStateEngine

__all__ = [
    "PENDING",
    "AlreadyTold",
    "Candidate",
    "Engine",
    "HistoryRecord",
    "InvalidHistory",
    "InvalidResult",
    "LTSEngine",
    "NSGA2Engine",
    "Normaliser",
    "SearchError",
    "SteadyStateEngine",
    "UnknownCandidate",
    "dominates",
    "hypervolume",
    "non_dominated_indices",
    "non_dominated_mask",
]
