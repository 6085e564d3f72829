"""Rows -> wire objects and CSV. No queries here."""

from __future__ import annotations

import csv
import io
from typing import Any

from archvocab.wire import (
    OBJECTIVE_SENSE,
    CandidateInfo,
    Failure,
    ObjectiveBest,
    Progress,
    SearchCreate,
    SearchInfo,
)
from server.db import CandidateRow, MeasurementRow, SearchRow
from server.frontier import frontier_ids, is_feasible, objective_values
from server.quality import latest_hypervolume, model_errors
from server.settings import as_utc


def measurement_dict(m: MeasurementRow) -> dict[str, Any]:
    """The agent's MeasurementResult, plus where and when it was taken."""
    return {
        **m.result,
        "measurement_id": m.id,
        "agent_id": m.agent_id,
        "measured_for_search": m.search_id,
        "measured_at": as_utc(m.created_at).isoformat(),
    }


def candidate_info(row: CandidateRow, request: SearchCreate, on_frontier: bool) -> CandidateInfo:
    failure = None
    if row.status == "failed":
        failure = Failure(kind=row.failure_kind or "error", message=row.failure_message or "")
    return CandidateInfo(
        arch_id=row.arch_id,
        generation=row.generation,
        status=row.status,
        spec=row.architecture.spec,
        objectives=objective_values(row, request),
        feasible=is_feasible(row, request),
        on_frontier=on_frontier,
        reused=bool(row.reused),
        failure=failure,
        measurement=measurement_dict(row.measurement) if row.measurement else None,
    )


def progress(request: SearchCreate, rows: list[CandidateRow], generation: int) -> Progress:

    counts = {s: 0 for s in ("queued", "running", "measured", "failed", "cancelled")}
    reused = 0
    for row in rows:
        counts[row.status] += 1
        reused += bool(row.reused)
    return Progress(
        budget=request.budget.max_evaluations,
        proposed=len(rows),
        queued=counts["queued"],
        running=counts["running"],
        measured=counts["measured"],
        failed=counts["failed"],
        reused=reused,
        generation=generation,
        hypervolume=latest_hypervolume(rows),
    )


def best_so_far(rows: list[CandidateRow], request: SearchCreate) -> list[ObjectiveBest]:
    pool = [r for r in rows if is_feasible(r, request)]
    out = []
    for objective in request.objectives:
        sense = OBJECTIVE_SENSE[objective]
        if not pool:
            continue
        pick = max if sense == "max" else min
        row = pick(pool, key=lambda r: objective_values(r, request)[objective])
        value = objective_values(row, request)[objective]
        out.append(
            ObjectiveBest(objective=objective, sense=sense, value=value, arch_id=row.arch_id)
        )
    return out


def search_info(search: SearchRow, rows: list[CandidateRow]) -> SearchInfo:

    request = SearchCreate.model_validate(search.request)
    generation = max((r.generation for r in rows), default=0)
    return SearchInfo(
        id=search.id,
        name=search.name,
        status=search.status,
        device_class=search.device_class,
        created_at=as_utc(search.created_at),
        finished_at=as_utc(search.finished_at) if search.finished_at else None,
        finish_reason=search.finish_reason,
        progress=progress(request, rows, generation),
        frontier_size=len(frontier_ids(rows, request)),
        best=best_so_far(rows, request),
        surrogate=model_errors(rows, request),
        request=request,
    )


CSV_COLUMNS = (
    "arch_id",
    "generation",
    "decoder_params",
    "total_params",
    "latency_ms",
    "latency_p90_ms",
    "latency_ci_rel",
    "latency_samples",
    "peak_memory_mb",
    "memory_kind",
    "weights_mb",
    "runtime",
    "busy",
    "reused",
    "n_layer",
    "d_model",
    "d_embed",
    "div_val",
    "d_inner",
    "n_head",
    "agent_id",
)


def frontier_csv(points: list[CandidateInfo]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for p in points:
        m, s = p.measurement or {}, p.spec
        latency, memory = m.get("latency", {}), m.get("memory", {})
        provenance = m.get("provenance", {})
        writer.writerow(
            [
                p.arch_id,
                p.generation,
                int(p.objectives["decoder_params"] or 0),
                int(p.objectives["total_params"] or 0),
                m.get("latency_ms"),
                latency.get("p90_ms"),
                latency.get("ci_rel"),
                latency.get("samples"),
                m.get("peak_memory_mb"),
                memory.get("primary"),
                memory.get("weights_mb"),
                provenance.get("runtime"),
                provenance.get("busy"),
                p.reused,
                s["n_layer"],
                s["d_model"],
                s["d_embed"],
                s["div_val"],
                " ".join(map(str, s["d_inner"])),
                " ".join(map(str, s["n_head"])),
                m.get("agent_id"),
            ]
        )
    return out.getvalue()
