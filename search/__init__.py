"""Search engines and their math: pure library, values in and values out (no HTTP, no DB).

Strategies are ask/tell engines on `search.engine.Engine`, one module each in
`search.strategies`, registered there by name: `lts` (LTS Algorithm 1), `nsga2` (pymoo's
NSGA-II), `hwnas` (hwnas's own: steady-state evolution with surrogate screening) and
`layer_scaled` (the layer-scaling baseline). `search.pareto` holds the exact
non-dominated-set computation, `search.hypervolume` the normalised hypervolume every
strategy is judged by, `search.objectives` what a frontier is made of (senses, bounds, the
frontier beyond noise), `search.noise` the measurement-noise model.
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
from search.pareto import dominates, non_dominated_indices, non_dominated_mask
from search.records import PENDING, Candidate, HistoryRecord
from search.strategies.hwnas import SteadyStateEngine
from search.strategies.lts import LTSEngine
from search.strategies.nsga2 import NSGA2Engine

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
