"""The measured frontier of a search, computed from its rows (the store is the truth)."""

from __future__ import annotations

import numpy as np

from archvocab.wire import OBJECTIVE_SENSE, SearchCreate
from search.pareto import non_dominated_mask
from server.db import CandidateRow


def objective_values(row: CandidateRow) -> dict[str, float | None]:
    m = row.measurement
    return {
        **(m.result.get("proxies", {}) if m else {}),  # low-cost proxies the agent computed
        "decoder_params": float(row.architecture.decoder_params),
        "total_params": float(row.architecture.total_params),
        "latency_ms": m.latency_ms if m else None,
        "memory_mb": m.peak_memory_mb if m else None,
    }


def is_feasible(row: CandidateRow, request: SearchCreate) -> bool | None:
    """Within the search's latency/memory bounds; None until measured."""
    m = row.measurement
    if row.status != "measured" or m is None:
        return None
    c = request.constraints
    return (c.max_latency_ms is None or m.latency_ms <= c.max_latency_ms) and (
        c.max_memory_mb is None or m.peak_memory_mb <= c.max_memory_mb
    )


def frontier_ids(rows: list[CandidateRow], request: SearchCreate) -> set[int]:
    """Ids of the candidate rows on the exact non-dominated set of the search's objectives."""
    pool = [r for r in rows if is_feasible(r, request)]
    if not pool:
        return set()
    signs = np.array([-1.0 if OBJECTIVE_SENSE[o] == "max" else 1.0 for o in request.objectives])
    points = np.array([[objective_values(r)[o] for o in request.objectives] for r in pool]) * signs
    mask = non_dominated_mask(points)
    return {r.id for r, keep in zip(pool, mask) if keep}
