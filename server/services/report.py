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
from archvocab.wire import (
    BaselineComparison,
    JobStatus,
    ReportPoint,
    SearchCreate,
    SearchReport,
    SearchStatus,
)
from server.services.context import Services
from server.services.results import Told
from server.store.rows import SearchRow
from server.store.store import get_search


def _point(told: Told) -> ReportPoint:
    return ReportPoint(
        arch_id=told.arch_id,
        n_layer=parse_spec(told.spec).n_layer,
        decoder_params=told.values["decoder_params"],
        latency_ms=told.values["latency_ms"],
        memory_mb=told.values["memory_mb"],
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
            SearchRow.status == SearchStatus.FINISHED,
            SearchRow.device_class == search.device_class,
        )
        .order_by(SearchRow.id.desc())
    )
    for row in session.scalars(query):
        other = row.parsed_request
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


def search_report(services: Services, search_id: int) -> SearchReport:
    with services.store.read() as session:
        search = get_search(session, search_id)
        request = search.parsed_request
        table = services.results.get(session, search)
        measured = sum(t.status == JobStatus.MEASURED for t in table.rows)
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
            told = services.results.get(session, baseline).rows
            points = [_point(t) for t in told if t.status == JobStatus.MEASURED]
            if points:  # the frontier's points only here: a large one costs seconds to make
                comparison = compare(baseline.id, points, [_point(t) for t in table.frontier])
            else:
                note = f"baseline search {baseline.id} has no measured point"
        return SearchReport(
            search_id=search_id,
            status=search.status,
            measured=measured,
            frontier_size=len(table.frontier),
            baseline=comparison,
            note=note,
        )
