"""A search's results as one compact table (archvocab.points_wire), read column by column.

Built for large searches: the query selects scalar columns and only the `proxies` member of
each measurement's JSON, never the whole measurement (its raw samples dominate a row's size),
and the frontier is computed on arrays.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from archvocab.points_wire import BASE_COLUMNS, SearchPoints
from archvocab.proxy_catalog import PROXY_CATALOG
from archvocab.registry import parse_spec
from archvocab.wire import SearchCreate
from proxies.registry import get_proxy
from server.db import ArchitectureRow, CandidateRow, MeasurementRow, SearchRow
from server.frontier import non_dominated
from server.store import Store, get_search

_OUTCOMES = ("measured", "failed")


def search_points(store: Store, search_id: int, after: int = 0) -> SearchPoints:
    with store.read() as session:
        search = get_search(session, search_id)
        request = SearchCreate.model_validate(search.request)
        proxy = request.proxy_objective
        extra = [] if proxy in BASE_COLUMNS else [proxy]
        table = _told(session, search, request, extra)
        frontier = _frontier(table, request, extra)
        counts = _status_counts(session, search_id)
        return SearchPoints(
            search_id=search_id,
            status=search.status,
            objectives=list(request.objectives),
            columns=[*BASE_COLUMNS, *extra, "spec"],
            rows=[r for r in table if r[1] > after],
            after=after,
            last=max((r[1] for r in table), default=0),
            frontier=frontier,
            queued=counts.get("queued", 0),
            running=counts.get("running", 0),
        )


def _told(
    session: Session, search: SearchRow, request: SearchCreate, extra: list[str]
) -> list[list[Any]]:
    """Every told result of the search as a row of BASE_COLUMNS + extra + spec."""
    c = request.constraints
    query = (
        select(
            CandidateRow.arch_id,
            CandidateRow.result_seq,
            CandidateRow.generation,
            CandidateRow.status,
            CandidateRow.reused,
            ArchitectureRow.decoder_params,
            ArchitectureRow.total_params,
            MeasurementRow.latency_ms,
            MeasurementRow.peak_memory_mb,
            CandidateRow.hypervolume,
            MeasurementRow.agent_id,
            MeasurementRow.result["proxies"],
            ArchitectureRow.spec,
        )
        .join(ArchitectureRow, ArchitectureRow.arch_id == CandidateRow.arch_id)
        .outerjoin(MeasurementRow, MeasurementRow.id == CandidateRow.measurement_id)
        .where(CandidateRow.search_id == search.id, CandidateRow.result_seq.is_not(None))
        .order_by(CandidateRow.result_seq)
    )
    table = []
    rows = session.execute(query)
    for arch, seq, gen, status, reused, dp, tp, lat, mem, hv, agent, proxies, spec in rows:
        measured = status == "measured" and lat is not None
        feasible = None
        if measured:
            feasible = (c.max_latency_ms is None or lat <= c.max_latency_ms) and (
                c.max_memory_mb is None or mem <= c.max_memory_mb
            )
        row = [arch, seq, gen, status, bool(reused), feasible, dp, tp, lat, mem, hv, agent]
        row.extend(_proxy_value(name, proxies, spec) for name in extra)
        row.append(spec)
        table.append(row)
    return table


def _proxy_value(name: str, reported: dict | None, spec: dict) -> float | None:
    """A low-cost proxy as the agent reported it; a zero-cost one computed from the spec."""
    if reported and name in reported:
        return reported[name]
    if PROXY_CATALOG[name].cost == "zero":
        return float(get_proxy(name).score(parse_spec(spec)))
    return None


def _frontier(table: list[list[Any]], request: SearchCreate, extra: list[str]) -> list[str]:
    columns = [*BASE_COLUMNS, *extra]
    index = [columns.index(o) for o in request.objectives]
    pool = [r for r in table if r[5] and all(r[i] is not None for i in index)]
    mask = non_dominated(request.objectives, [[r[i] for i in index] for r in pool])
    return [r[0] for r, keep in zip(pool, mask) if keep]


def _status_counts(session: Session, search_id: int) -> dict[str, int]:
    query = (
        select(CandidateRow.status, func.count())
        .where(CandidateRow.search_id == search_id)
        .group_by(CandidateRow.status)
    )
    return dict(session.execute(query).all())
