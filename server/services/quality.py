"""How good a search's frontier is: its hypervolume after every result, computed here as
results are told and stored on the rows (the cost models' error, read from the results:
server.services.views).

The hypervolume's normalisation (`archvocab.wire.HypervolumeSettings`) is fixed once:
what the request gives, else a zero-cost proxy's range over a seeded sample of the space,
else a hardware objective's constraint bound (ideal 0); whatever is still open is fixed from
the first ten successful measurements, and then every earlier result gets its value too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from archvocab.proxy_catalog import PROXY_CATALOG
from archvocab.registry import parse_space
from archvocab.wire import (
    HARDWARE_OBJECTIVES,
    OBJECTIVE_SENSE,
    HypervolumePoint,
    HypervolumeTrace,
    JobStatus,
    SearchCreate,
)
from proxies.registry import zero_cost_scores
from search.engine import Engine
from search.hypervolume import Normaliser, hypervolume
from server.services.frontier import is_feasible, objective_values
from server.services.results import Told
from server.settings import as_utc
from server.store.rows import CandidateRow, SearchRow
from server.store.store import write_columns, write_columns_of

SPACE_SAMPLE = 500  # specs sampled to bound a zero-cost proxy when the search starts
FIRST_RESULTS = 10  # successful measurements that fix a reference nothing else gave


def initial_normalisation(request: SearchCreate) -> dict:
    """What can be fixed when the search starts: {"ideal", "reference", "source"}."""
    ideal = dict(request.hypervolume.ideal)
    reference = dict(request.hypervolume.reference)
    source = {name: "request" for name in reference}
    zero_cost = [
        o
        for o in request.objectives
        if o in PROXY_CATALOG and PROXY_CATALOG[o].cost == "zero" and o not in reference
    ]
    if zero_cost:
        space = parse_space(request.space)
        rng = random.Random(f"hwnas.quality:{request.seed}")
        sampled = [zero_cost_scores(space.sample(rng)) for _ in range(SPACE_SAMPLE)]
        for name in zero_cost:
            values = [s[name] for s in sampled if name in s]
            ideal.setdefault(name, max(values))
            reference[name] = min(values)
            source[name] = f"space sample ({SPACE_SAMPLE} specs)"
    bounds = request.constraints.hardware_bounds()
    for name in request.objectives:
        if name not in HARDWARE_OBJECTIVES:
            continue
        ideal.setdefault(name, 0.0)
        if name not in reference and name in bounds:
            reference[name], source[name] = bounds[name], "constraint"
    return {"ideal": ideal, "reference": reference, "source": source}


def normaliser(search: SearchRow) -> Normaliser | None:
    """The search's fixed normalisation, or None while a reference is still open."""
    norm = search.normalisation or {}
    objectives = search.parsed_request.objectives
    reference = norm.get("reference", {})
    if not all(o in reference and o in norm.get("ideal", {}) for o in objectives):
        return None
    return Normaliser(objectives, norm["ideal"], reference)


# The search's last result number (built once: every result told runs it).
_JOBS = CandidateRow.__table__
_LAST_SEQ = select(func.max(_JOBS.c.result_seq)).where(_JOBS.c.search_id == bindparam("search"))


def last_result(session: Session, search_id: int) -> int:
    """The search's last result number (0: none told yet), as the database has it."""
    return session.scalar(_LAST_SEQ, {"search": search_id}) or 0


def record_result(
    session: Session,
    search: SearchRow,
    row: CandidateRow,
    engine: Engine | None,
    last: int | None = None,
) -> int:
    """Number a told result and store the frontier's hypervolume with it; returns its number.
    `last`: the search's last result number, where the caller knows it; else it is read."""
    last = _known_last(session, search, last)
    values: dict[str, Any] = {"result_seq": last + 1}
    norm = normaliser(search)
    if norm is None:
        write_columns(session, row, **values)
        if _fix_from_results(session, search):
            _backfill(session, search)
            if engine is not None:
                engine.use_normaliser(normaliser(search))
        return last + 1
    if engine is not None:
        values["hypervolume"] = engine.frontier_hypervolume(norm)
    write_columns(session, row, **values)
    return last + 1


def record_results(
    session: Session,
    search: SearchRow,
    rows: list[CandidateRow],
    engine: Engine,
    tell: Callable[[CandidateRow], None],
    last: int | None = None,
) -> int | None:
    """`record_result` for several results at once (the measurement cache's hits of a round's
    part): `tell` tells `engine` each row in turn, and each is numbered with the frontier's
    hypervolume after it, all written by one statement; returns the last number. While the
    normalisation is still open, nothing is told and None returned: fixing it reads the rows
    numbered so far, so the caller tells them one at a time."""
    norm = normaliser(search)
    if norm is None:
        return None
    last = _known_last(session, search, last)
    values = []
    for seq, row in enumerate(rows, start=last + 1):
        tell(row)
        values.append({"result_seq": seq, "hypervolume": engine.frontier_hypervolume(norm)})
    write_columns_of(session, rows, values)
    return last + len(rows)


def _known_last(session: Session, search: SearchRow, last: int | None) -> int:
    """`last`, the search's last result number where the caller knows it; else read."""
    if last is not None:
        return last
    # The numbers are written as they are given (`write_columns`): the read need not flush
    # what the transaction changed so far (one UPDATE of the row instead of two).
    with session.no_autoflush:
        return last_result(session, search.id)


def _told_rows(session: Session, search: SearchRow) -> list[CandidateRow]:
    query = (
        select(CandidateRow)
        .where(CandidateRow.search_id == search.id, CandidateRow.result_seq.is_not(None))
        .order_by(CandidateRow.result_seq)
    )
    return list(session.scalars(query).unique())


def _fix_from_results(session: Session, search: SearchRow) -> bool:
    """Fix the open references from the first measurements, once there are enough."""
    request = search.parsed_request
    rows = [r for r in _told_rows(session, search) if r.status == JobStatus.MEASURED]
    if len(rows) < min(FIRST_RESULTS, request.budget.max_evaluations):
        return False
    first = [objective_values(r, request) for r in rows[:FIRST_RESULTS]]
    search.normalisation = fixed_from_first(search.normalisation or {}, request, first)
    return True


def fixed_from_first(
    normalisation: dict, request: SearchCreate, first: list[dict[str, float | None]]
) -> dict:
    """`initial_normalisation` with every reference it left open fixed from the objective
    values of the first measurements: a hardware objective's at twice the largest; another's
    one range past the worst (and its ideal, if open, one range past the best)."""
    norm = {k: dict(v) for k, v in normalisation.items()}
    for name in request.objectives:
        if name in norm["reference"]:
            continue
        values = [v[name] for v in first if v[name] is not None]
        lo, hi = min(values), max(values)
        span = (hi - lo) or max(abs(hi), 1.0)
        if name in HARDWARE_OBJECTIVES:
            norm["reference"][name] = 2.0 * hi
        elif OBJECTIVE_SENSE[name] == "max":
            norm["ideal"].setdefault(name, hi + span)
            norm["reference"][name] = lo - span
        else:
            norm["ideal"].setdefault(name, lo - span)
            norm["reference"][name] = hi + span
        norm["source"][name] = f"first {FIRST_RESULTS} measurements"
    return norm


def _backfill(session: Session, search: SearchRow) -> None:
    """Hypervolume after each result so far, replayed in result order."""
    request = search.parsed_request
    norm = normaliser(search)
    points: list[np.ndarray] = []
    for row in _told_rows(session, search):
        if is_feasible(row, request):
            points.append(norm(objective_values(row, request)))
        row.hypervolume = hypervolume(np.array(points)) if points else 0.0


def trace(search: SearchRow, told: list[Told]) -> HypervolumeTrace:
    """The hypervolume after every result (told: the search's results in order)."""
    request = search.parsed_request
    norm = search.normalisation or {}
    fixed = normaliser(search) is not None
    points, device_s, measured = [], 0.0, 0
    for t in told:
        if t.status == JobStatus.MEASURED:
            measured += 1
            device_s += t.device_s
        if t.hypervolume is None or t.finished_at is None:
            continue
        points.append(
            HypervolumePoint(
                results=t.seq,
                measured=measured,
                device_s=round(device_s, 3),
                at=as_utc(t.finished_at),
                hypervolume=t.hypervolume,
            )
        )
    return HypervolumeTrace(
        search_id=search.id,
        objectives=list(request.objectives),
        ideal=norm.get("ideal") if fixed else None,
        reference=norm.get("reference") if fixed else None,
        source=norm.get("source", {}),
        points=points,
    )
