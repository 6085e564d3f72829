"""Rows -> wire objects and CSV. No queries here."""

from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from archvocab.wire import (
    OBJECTIVE_SENSE,
    AgentAvailability,
    CandidateInfo,
    Failure,
    JobStatus,
    ModelError,
    NoiseSummary,
    ObjectiveBest,
    Progress,
    SearchCreate,
    SearchInfo,
)
from search.noise import METRICS
from server.services.frontier import is_feasible, objective_values
from server.services.remeasure import remeasure_budget
from server.services.results import ResultTable, Told
from server.settings import as_utc
from server.store.rows import CandidateRow, MeasurementRow, SearchRow

STATUSES = tuple(JobStatus)


def measurement_dict(m: MeasurementRow) -> dict[str, Any]:
    """The agent's MeasurementResult, plus where and when it was taken."""
    return {
        **m.result,
        "measurement_id": m.id,
        "agent_id": m.agent_id,
        "measured_for_search": m.search_id,
        "measured_at": as_utc(m.created_at).isoformat(),
    }


def candidate_info(row: CandidateRow, request: SearchCreate, table: ResultTable) -> CandidateInfo:
    """A candidate with its measurement, its intervals and its place on `table`'s frontier."""
    failure = None
    if row.status == JobStatus.FAILED:
        failure = Failure(kind=row.failure_kind or "error", message=row.failure_message or "")
    values = objective_values(row, request)
    on_frontier = row.arch_id in table.uncertainty
    noise = table.uncertainty.get(row.arch_id) or table.describe(row.arch_id)
    if noise is not None:  # the best estimate: over every quiet measurement of it
        values.update(noise.values)
    m = row.measurement
    return CandidateInfo(
        arch_id=row.arch_id,
        generation=row.generation,
        status=row.status,
        spec=row.architecture.spec,
        objectives=values,
        feasible=is_feasible(row, request),
        on_frontier=on_frontier,
        reused=bool(row.reused),
        failure=failure,
        measurement=measurement_dict(m) if m else None,
        intervals={k: list(v) for k, v in noise.intervals.items()} if noise else {},
        corrected=dict(noise.corrected) if noise else {},
        frontier_group=noise.group if noise and on_frontier else None,
        frontier_certain=noise.certain if noise and on_frontier else None,
        busy=bool(m.busy) if m else False,
        measurements=noise.measurements if noise else 0,
    )


@dataclass(frozen=True)
class Census:
    """What a search's candidate rows add up to, counted by the database; re-measurement
    jobs (round > 0) apart from the candidates."""

    by_status: dict[str, int]
    reused: int
    generation: int
    remeasures: dict[str, int] = field(default_factory=dict)  # by status


def progress(request: SearchCreate, census: Census, table: ResultTable) -> Progress:
    counts = {s: census.by_status.get(s, 0) for s in STATUSES}
    return Progress(
        budget=request.budget.max_evaluations,
        proposed=sum(census.by_status.values()),
        queued=counts[JobStatus.QUEUED],
        running=counts[JobStatus.RUNNING],
        measured=counts[JobStatus.MEASURED],
        failed=counts[JobStatus.FAILED],
        reused=census.reused,
        generation=census.generation,
        hypervolume=latest_hypervolume(table.rows),
        remeasured=census.remeasures.get(JobStatus.MEASURED, 0)
        + census.remeasures.get(JobStatus.FAILED, 0),
        remeasuring=census.remeasures.get(JobStatus.QUEUED, 0)
        + census.remeasures.get(JobStatus.RUNNING, 0),
        remeasure_budget=remeasure_budget(request),
    )


def latest_hypervolume(told: list[Told]) -> float | None:
    return next((t.hypervolume for t in reversed(told) if t.hypervolume is not None), None)


def model_errors(told: list[Told]) -> list[ModelError]:
    """Per predicted objective: |predicted - measured| / measured over measured candidates."""
    errors: dict[str, list[float]] = {}
    for t in told:
        if not t.prediction or t.status != JobStatus.MEASURED:
            continue
        for name, predicted in t.prediction.items():
            actual = t.values.get(name)
            if actual:
                errors.setdefault(name, []).append(100.0 * abs(predicted - actual) / abs(actual))
    return [
        ModelError(
            objective=name,
            predictions=len(values),
            median_abs_pct=round(statistics.median(values), 3),
            p90_abs_pct=round(float(np.percentile(values, 90)), 3),
            recent_median_abs_pct=round(statistics.median(values[-50:]), 3),
        )
        for name, values in errors.items()
    ]


# The best so far is kept per block of this many rows: rows never change once in the table,
# so a read compares only the rows past the last whole block (a 100,000-result search took
# 0.19 s on every read when all were compared).
BEST_BLOCK = 1024


def best_so_far(table: ResultTable, request: SearchCreate) -> list[ObjectiveBest]:
    """Per objective, the first feasible result with the best value."""
    objectives = list(request.objectives)
    rows = table.rows  # grows in place as results come: read up to one length
    end = len(rows)
    whole = end // BEST_BLOCK
    blocks = [
        table.per_rows(
            "best so far",
            (BEST_BLOCK, b),
            lambda b=b: _best(rows[b * BEST_BLOCK : (b + 1) * BEST_BLOCK], objectives),
        )
        for b in range(whole)
    ]
    best: dict[str, Told] = {}
    for part in [*blocks, _best(rows[whole * BEST_BLOCK : end], objectives)]:  # in result order
        for objective, t in part.items():
            if objective not in best or _better(t, best[objective], objective):
                best[objective] = t
    return [
        ObjectiveBest(
            objective=objective,
            sense=OBJECTIVE_SENSE[objective],
            value=best[objective].values[objective],
            arch_id=best[objective].arch_id,
        )
        for objective in objectives
        if objective in best
    ]


def _best(told: list[Told], objectives: list[str]) -> dict[str, Told]:
    """Per objective, the first feasible one of `told` (in result order) with the best value."""
    best: dict[str, Told] = {}
    for t in told:
        if not t.feasible:
            continue
        for objective in objectives:
            if objective not in best or _better(t, best[objective], objective):
                best[objective] = t
    return best


def _better(t: Told, than: Told, objective: str) -> bool:
    """Strictly better: of equal values, the earlier result stays."""
    value, other = t.values[objective], than.values[objective]
    return value > other if OBJECTIVE_SENSE[objective] == "max" else value < other


def search_info(
    search: SearchRow,
    census: Census,
    table: ResultTable,
    agents: AgentAvailability | None = None,
    warnings: list[str] | None = None,
) -> SearchInfo:
    request = search.parsed_request
    return SearchInfo(
        id=search.id,
        name=search.name,
        status=search.status,
        device_class=search.device_class,
        created_at=as_utc(search.created_at),
        finished_at=as_utc(search.finished_at) if search.finished_at else None,
        finish_reason=search.finish_reason,
        progress=progress(request, census, table),
        frontier_size=len(table.frontier),
        best=best_so_far(table, request),
        surrogate=model_errors(table.rows),
        noise=noise_summary(table),
        request=request,
        agents=agents,
        warnings=warnings or [],
    )


def noise_summary(table: ResultTable) -> NoiseSummary | None:
    noise = table.noise
    if noise is None:
        return None
    level = table.reference_level()
    return NoiseSummary(
        confidence=table.confidence,
        sigma=dict(noise.sigma),
        dof=dict(noise.dof),
        reference_sigma=dict(noise.reference_sigma),
        reference_readings=table.reference_readings(),
        earlier_readings=table.earlier_readings(),
        reference_level=dict(zip(METRICS, level)) if level else None,
        interval_rel={m: list(noise.interval(m, 1.0, table.confidence)) for m in METRICS},
        busy_results=sum(1 for t in table.rows if t.busy),
        plain_frontier_size=table.plain_frontier,
        certain_frontier_size=sum(u.certain for u in table.uncertainty.values()),
    )


CSV_COLUMNS = (
    "arch_id",
    "generation",
    "decoder_params",
    "total_params",
    "latency_ms",
    "latency_low_ms",
    "latency_high_ms",
    "latency_corrected_ms",
    "latency_p90_ms",
    "latency_ci_rel",
    "latency_samples",
    "peak_memory_mb",
    "memory_low_mb",
    "memory_high_mb",
    "frontier_group",
    "frontier_certain",
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
                *p.intervals.get("latency_ms", (None, None)),
                p.corrected.get("latency_ms"),
                latency.get("p90_ms"),
                latency.get("ci_rel"),
                latency.get("samples"),
                m.get("peak_memory_mb"),
                *p.intervals.get("memory_mb", (None, None)),
                p.frontier_group,
                p.frontier_certain,
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
