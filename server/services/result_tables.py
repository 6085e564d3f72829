"""The result tables of one server process (server.services.results), read from the rows once
and then only what is new.

Results are numbered (`CandidateRow.result_seq`) and never change once told, except for the
hypervolumes backfilled once when the normalisation is fixed; so a table is refreshed by
reading the rows numbered after its last one, and rebuilt only when the search's
normalisation changed. Each read selects scalar columns and single members of the
measurement's JSON, never the whole measurement (its raw samples dominate a row's size).
The database stays the truth: a table is a cache that any process can rebuild.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from archvocab.wire import JobStatus, SearchCreate
from server.services.frontier import feasibility, values_of
from server.services.heap import SETTLE_AT, settle_after
from server.services.results import Again, ResultTable, Told
from server.store.rows import AgentRow, ArchitectureRow, CandidateRow, MeasurementRow, SearchRow


class ResultTables:
    """The result tables of one server process, by search id; the `keep` most recently read
    stay in memory (a 20,000-result table holds a few tens of MB). A table is built and
    brought up to date under a lock of its own search: building one (seconds at 20,000
    results) keeps no other search's reads or writes waiting."""

    def __init__(self, keep: int = 32, settle_at: int = SETTLE_AT) -> None:
        self._tables: OrderedDict[int, ResultTable] = OrderedDict()
        self._keep = keep
        self.settle_at = settle_at  # results read in at once that settle the heap (`heap`)
        self._guard = threading.Lock()  # the dicts, held for dict operations only
        self._locks: dict[int, threading.Lock] = {}

    def __len__(self) -> int:
        return len(self._tables)

    def get(self, session: Session, search: SearchRow) -> ResultTable:
        with self._guard:
            lock = self._locks.setdefault(search.id, threading.Lock())
        with lock:
            with self._guard:
                table = self._tables.get(search.id)
            if table is None or table.stamp != search.normalisation:
                request = search.parsed_request
                table = ResultTable(search.id, request, stamp=search.normalisation)
                table.add_earlier(_earlier_readings(session, search, request))
            with self._guard:
                self._tables[search.id] = table
                self._tables.move_to_end(search.id)
                while len(self._tables) > self._keep:
                    gone, _ = self._tables.popitem(last=False)
                    self._locks.pop(gone, None)
            new = _read(session, search, table.last)
            table.add(new, _read_again(session, search, table))
        settle_after(len(new), self.settle_at)
        return table

    def behind(self, search: SearchRow, last: int) -> int | None:
        """How many results, up to number `last`, this process's table of the search has still
        to read; None when it keeps none at the search's normalisation (`get` would build it
        from every row)."""
        with self._guard:
            table = self._tables.get(search.id)
        if table is None or table.stamp != search.normalisation:
            return None
        return max(0, last - table.last)

    def read_up_to(self, search_id: int) -> int | None:
        """The last result number this process's table of the search has read (None: it
        keeps no table of it)."""
        with self._guard:
            table = self._tables.get(search_id)
        return None if table is None else table.last


# The columns a Told is made of, in this order (see _told).
_COLUMNS = (
    CandidateRow.arch_id,
    CandidateRow.result_seq,
    CandidateRow.generation,
    CandidateRow.status,
    CandidateRow.reused,
    CandidateRow.hypervolume,
    CandidateRow.finished_at,
    CandidateRow.prediction,
    ArchitectureRow.spec,
    ArchitectureRow.decoder_params,
    ArchitectureRow.total_params,
    MeasurementRow.latency_ms,
    MeasurementRow.peak_memory_mb,
    MeasurementRow.agent_id,
    MeasurementRow.result["proxies"],
    MeasurementRow.result["total_s"],
    MeasurementRow.busy,
    MeasurementRow.result["reference"],
)


# The reads of `ResultTables.get`, built once: `remeasure.queue` runs them in a write
# transaction.
_NEWER = (
    select(*_COLUMNS)
    .join(ArchitectureRow, ArchitectureRow.arch_id == CandidateRow.arch_id)
    .outerjoin(MeasurementRow, MeasurementRow.id == CandidateRow.measurement_id)
    .where(
        CandidateRow.search_id == bindparam("search"), CandidateRow.result_seq > bindparam("after")
    )
    .order_by(CandidateRow.result_seq)
)
_FINISHED_AGAIN = (
    CandidateRow.search_id == bindparam("search"),
    CandidateRow.round > 0,
    CandidateRow.status.in_((JobStatus.MEASURED, JobStatus.FAILED)),
)
_FINISHED_AGAIN_IDS = select(CandidateRow.id).where(*_FINISHED_AGAIN)
_AGAIN = select(
    CandidateRow.id,
    CandidateRow.arch_id,
    CandidateRow.status,
    MeasurementRow.latency_ms,
    MeasurementRow.peak_memory_mb,
    MeasurementRow.busy,
    MeasurementRow.agent_id,
    MeasurementRow.result["reference"],
).outerjoin(MeasurementRow, MeasurementRow.id == CandidateRow.measurement_id)
# By id while they are few (as each result brings one); all of them when many are new (a
# table built afresh), rather than a long list of bound ids.
_AGAIN_BY_ID = _AGAIN.where(CandidateRow.id.in_(bindparam("ids", expanding=True))).order_by(
    CandidateRow.id
)
_AGAIN_ALL = _AGAIN.where(*_FINISHED_AGAIN).order_by(CandidateRow.id)


def _read(session: Session, search: SearchRow, after: int) -> list[Told]:
    """The search's results numbered above `after`, in order."""
    request = search.parsed_request
    rows = session.execute(_NEWER, {"search": search.id, "after": after})
    return [_told(row, request) for row in rows]


def _told(row: Any, request: SearchCreate) -> Told:
    arch_id, seq, generation, status, reused, hv, finished_at, prediction = row[:8]
    spec, dp, tp, latency, memory, agent, reported, total_s, busy, reference = row[8:]
    values = values_of(request, spec, dp, tp, latency, memory, reported)
    values.setdefault(request.proxy_objective, None)
    return Told(
        arch_id=arch_id,
        seq=seq,
        generation=generation,
        status=status,
        reused=bool(reused),
        feasible=feasibility(request, status, latency, memory),
        values=values,
        hypervolume=hv,
        agent_id=agent,
        spec=spec,
        device_s=0.0 if reused or not total_s else float(total_s),
        finished_at=finished_at,
        prediction=prediction,
        busy=bool(busy),
        reference=_reading(reference),
        reference_key=(agent, reference["measured_at"]) if reference else None,
    )


READ_BY_ID = 200  # new re-measurements read by their ids, at most


def _read_again(session: Session, search: SearchRow, table: ResultTable) -> list[Again]:
    """The search's finished re-measurements the table has not read (they finish in any
    order, so by id, not by a high-water mark: their ids first, then only the new ones)."""
    ids = session.scalars(_FINISHED_AGAIN_IDS, {"search": search.id}).all()
    if len(ids) == len(table.seen_again):  # it has read them all (each once)
        return []
    new = sorted(set(ids) - table.seen_again)
    if len(new) <= READ_BY_ID:
        rows = session.execute(_AGAIN_BY_ID, {"ids": new})
    else:
        rows = session.execute(_AGAIN_ALL, {"search": search.id})
    out = []
    for job_id, arch_id, status, latency, memory, busy, agent, reference in rows:
        if job_id in table.seen_again:
            continue
        measured = status == JobStatus.MEASURED and latency is not None
        out.append(
            Again(
                id=job_id,
                arch_id=arch_id,
                latency=latency if measured else None,
                memory=memory if measured else None,
                busy=bool(busy),
                reference=_reading(reference),
                reference_key=(agent, reference["measured_at"]) if reference else None,
            )
        )
    return out


def _reading(reference: dict | None) -> tuple[float, float] | None:
    """(latency, memory) of a quiet reference reading; None for none or a busy one."""
    if not reference or reference.get("busy"):
        return None
    return reference["latency_ms"], reference["peak_memory_mb"]


EARLIER_READINGS = 2000  # the newest measurements of earlier searches to look for readings in


def _earlier_readings(
    session: Session, search: SearchRow, request: SearchCreate
) -> dict[tuple[str, str], tuple[str, tuple[float, float]]]:
    """Distinct reference readings that came with other searches' results measured on this
    search's device class (its agents' fingerprints) with the same settings, by reference."""
    devices = select(AgentRow.fingerprint_key).where(AgentRow.device_class == search.device_class)
    query = (
        select(MeasurementRow.agent_id, MeasurementRow.result["reference"])
        .where(
            MeasurementRow.settings_key == request.measurement.cache_key(),
            MeasurementRow.fingerprint_key.in_(devices),
            MeasurementRow.search_id != search.id,
        )
        .order_by(MeasurementRow.id.desc())
        .limit(EARLIER_READINGS)
    )
    out = {}
    for agent, reference in session.execute(query):
        reading = _reading(reference)
        if reading is not None:
            out[(agent, reference["measured_at"])] = (reference["arch_id"], reading)
    return out
