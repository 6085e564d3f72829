"""A search's told results, read once and then only what is new: what every read of a search
(its summary, frontier, convergence, the dashboard's table) is computed from.

Results are numbered (`CandidateRow.result_seq`) and never change once told, except for the
hypervolumes backfilled once when the normalisation is fixed; so a table is refreshed by
reading the rows numbered after its last one, and rebuilt only when the search's
normalisation changed. Each read selects scalar columns and single members of the
measurement's JSON, never the whole measurement (its raw samples dominate a row's size).
The database stays the truth: a table is a cache that any process can rebuild.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from archvocab.wire import SearchCreate
from server.db import ArchitectureRow, CandidateRow, MeasurementRow, SearchRow
from server.frontier import feasibility, non_dominated, values_of


@dataclass
class Told:
    """One told result: a measurement or a failure."""

    arch_id: str
    seq: int
    generation: int
    status: str  # measured | failed
    reused: bool
    feasible: bool | None  # None unless measured
    values: dict[str, float | None]  # every objective the search may read, by name
    hypervolume: float | None
    agent_id: str | None
    spec: dict[str, Any]
    device_s: float  # the agent's time for it (0 when reused)
    finished_at: datetime | None
    prediction: dict[str, float] | None


@dataclass
class ResultTable:
    search_id: int
    objectives: list[str]
    rows: list[Told] = field(default_factory=list)
    frontier: list[Told] = field(default_factory=list)
    stamp: Any = None  # the normalisation the hypervolumes were read under

    @property
    def epoch(self) -> str:
        """Names the normalisation the rows' hypervolumes were computed under."""
        canonical = json.dumps(self.stamp, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    @property
    def last(self) -> int:
        return self.rows[-1].seq if self.rows else 0

    def add(self, new: list[Told]) -> None:
        """Append results; the frontier of all rows is the frontier of (frontier + new)."""
        self.rows.extend(new)
        pool = self.frontier + [
            t for t in new if t.feasible and all(t.values[o] is not None for o in self.objectives)
        ]
        mask = non_dominated(
            self.objectives, [[t.values[o] for o in self.objectives] for t in pool]
        )
        self.frontier = sorted((t for t, keep in zip(pool, mask) if keep), key=lambda t: t.seq)


class ResultTables:
    """The result tables of one server process, by search id; the `keep` most recently read
    stay in memory (a 20,000-result table holds a few tens of MB)."""

    def __init__(self, keep: int = 32) -> None:
        self._tables: OrderedDict[int, ResultTable] = OrderedDict()
        self._keep = keep
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._tables)

    def get(self, session: Session, search: SearchRow) -> ResultTable:
        with self._lock:
            table = self._tables.get(search.id)
            if table is None or table.stamp != search.normalisation:
                request = SearchCreate.model_validate(search.request)
                table = ResultTable(search.id, list(request.objectives), stamp=search.normalisation)
                self._tables[search.id] = table
            self._tables.move_to_end(search.id)
            while len(self._tables) > self._keep:
                self._tables.popitem(last=False)
            table.add(_read(session, search, table.last))
            return table


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
)


def _read(session: Session, search: SearchRow, after: int) -> list[Told]:
    """The search's results numbered above `after`, in order."""
    request = SearchCreate.model_validate(search.request)
    query = (
        select(*_COLUMNS)
        .join(ArchitectureRow, ArchitectureRow.arch_id == CandidateRow.arch_id)
        .outerjoin(MeasurementRow, MeasurementRow.id == CandidateRow.measurement_id)
        .where(CandidateRow.search_id == search.id, CandidateRow.result_seq > after)
        .order_by(CandidateRow.result_seq)
    )
    return [_told(row, request) for row in session.execute(query)]


def _told(row: Any, request: SearchCreate) -> Told:
    arch_id, seq, generation, status, reused, hv, finished_at, prediction = row[:8]
    spec, dp, tp, latency, memory, agent, reported, total_s = row[8:]
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
    )
