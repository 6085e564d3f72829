"""A search's report: its frontier against the layer-scaled baseline of the same space kind,
measured on the same device class with the same settings (LTS's comparison).

LTS states, for the 16-layer baseline, the frontier model with the same decoder parameters
(so the same predicted perplexity) and how much faster and leaner it is. The matched point
here is the frontier point with the fewest decoder parameters at or above the deepest
baseline's; the fastest and the leanest such points are given too.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from archvocab.registry import parse_spec
from archvocab.search_wire import BaselineComparison, ReportPoint, SearchCreate, SearchReport
from server.db import CandidateRow, SearchRow
from server.frontier import frontier_ids
from server.store import Store, get_search


def _rows(session: Session, search_id: int) -> list[CandidateRow]:
    query = select(CandidateRow).where(CandidateRow.search_id == search_id)
    return list(session.scalars(query.order_by(CandidateRow.id)).unique())


def _point(row: CandidateRow) -> ReportPoint:
    m = row.measurement
    assert m is not None
    return ReportPoint(
        arch_id=row.arch_id,
        n_layer=parse_spec(row.architecture.spec).n_layer,
        decoder_params=float(row.architecture.decoder_params),
        latency_ms=m.latency_ms,
        memory_mb=m.peak_memory_mb,
    )


def _same_setup(a: SearchCreate, b: SearchCreate) -> bool:
    return (
        a.space.get("kind") == b.space.get("kind")
        and a.measurement.cache_key() == b.measurement.cache_key()
    )


def find_baseline(session: Session, search: SearchRow, request: SearchCreate) -> SearchRow | None:
    """The latest finished layer-scaled baseline for the same kind, device class and settings."""
    query = (
        select(SearchRow)
        .where(
            SearchRow.id != search.id,
            SearchRow.status == "finished",
            SearchRow.device_class == search.device_class,
        )
        .order_by(SearchRow.id.desc())
    )
    for row in session.scalars(query):
        other = SearchCreate.model_validate(row.request)
        if other.strategy == "layer_scaled" and _same_setup(other, request):
            return row
    return None


def compare(
    baseline_id: int, baseline: list[ReportPoint], front: list[ReportPoint]
) -> BaselineComparison:
    """The frontier against the deepest measured point of the baseline."""
    deepest = max(baseline, key=lambda p: p.n_layer)
    at_least = [p for p in front if p.decoder_params >= deepest.decoder_params]
    if not at_least:
        return BaselineComparison(
            baseline_search_id=baseline_id,
            deepest=deepest,
            matched=None,
            latency_speedup=None,
            memory_reduction=None,
            fastest=None,
            leanest=None,
            note="no frontier point has as many decoder parameters as the deepest baseline",
        )
    matched = min(at_least, key=lambda p: p.decoder_params)
    return BaselineComparison(
        baseline_search_id=baseline_id,
        deepest=deepest,
        matched=matched,
        latency_speedup=deepest.latency_ms / matched.latency_ms,
        memory_reduction=deepest.memory_mb / matched.memory_mb,
        fastest=min(at_least, key=lambda p: p.latency_ms),
        leanest=min(at_least, key=lambda p: p.memory_mb),
    )


def search_report(store: Store, search_id: int) -> SearchReport:
    with store.read() as session:
        search = get_search(session, search_id)
        request = SearchCreate.model_validate(search.request)
        rows = _rows(session, search_id)
        front_ids = frontier_ids(rows, request)
        front = [_point(r) for r in rows if r.id in front_ids]
        measured = sum(r.status == "measured" for r in rows)
        comparison, note = None, ""
        if request.strategy == "layer_scaled":
            note = "this search is a layer-scaled baseline"
        elif (baseline := find_baseline(session, search, request)) is None:
            note = (
                f"no finished layer-scaled baseline of space kind {request.space.get('kind')!r} "
                f"on device class {search.device_class!r} with these measurement settings: "
                "POST /api/v1/baselines or `hwnas baseline` measures one"
            )
        else:
            points = [_point(r) for r in _rows(session, baseline.id) if r.status == "measured"]
            if points:
                comparison = compare(baseline.id, points, front)
            else:
                note = f"baseline search {baseline.id} has no measured point"
        return SearchReport(
            search_id=search_id,
            status=search.status,
            measured=measured,
            frontier_size=len(front),
            baseline=comparison,
            note=note,
        )
