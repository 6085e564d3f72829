"""Objective values, feasibility and non-domination: what a frontier is made of."""

from __future__ import annotations

from archvocab.proxy_catalog import PROXY_CATALOG
from archvocab.registry import parse_spec
from archvocab.wire import JobStatus, SearchCreate
from proxies.registry import get_proxy
from search.objectives import within_bounds
from server.store.rows import CandidateRow


def objective_values(row: CandidateRow, request: SearchCreate) -> dict[str, float | None]:
    """Parameter counts, the search's proxy objective and the measured costs of a row."""
    m = row.measurement
    return values_of(
        request,
        row.architecture.spec,
        row.architecture.decoder_params,
        row.architecture.total_params,
        m.latency_ms if m else None,
        m.peak_memory_mb if m else None,
        m.result.get("proxies") if m else None,
    )


def values_of(
    request: SearchCreate,
    spec: dict,
    decoder_params: int,
    total_params: int,
    latency_ms: float | None,
    memory_mb: float | None,
    reported: dict[str, float] | None,
) -> dict[str, float | None]:
    """The objective values of one architecture, from its stored columns."""
    values: dict[str, float | None] = {
        **(reported or {}),  # low-cost proxies the agent computed
        "decoder_params": float(decoder_params),
        "total_params": float(total_params),
        "latency_ms": latency_ms,
        "memory_mb": memory_mb,
    }
    proxy = request.proxy_objective
    if proxy not in values and PROXY_CATALOG[proxy].cost == "zero":  # analytic, e.g. flops
        values[proxy] = get_proxy(proxy).score(parse_spec(spec))
    return values


def is_feasible(row: CandidateRow, request: SearchCreate) -> bool | None:
    """Within the search's latency/memory bounds; None until measured."""
    m = row.measurement
    return feasibility(
        request, row.status, m.latency_ms if m else None, m.peak_memory_mb if m else None
    )


def feasibility(
    request: SearchCreate, status: str, latency_ms: float | None, memory_mb: float | None
) -> bool | None:
    """Whether a result is within the search's latency/memory bounds; None unless measured."""
    if status != JobStatus.MEASURED or latency_ms is None:
        return None
    return within_bounds(request.constraints, {"latency_ms": latency_ms, "memory_mb": memory_mb})
