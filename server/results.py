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

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from archvocab.wire import OBJECTIVE_SENSE, SearchCreate
from search.noise import METRICS, NoiseModel, drift_factor, fit
from search.pareto import front_beyond_noise
from server.db import ArchitectureRow, CandidateRow, MeasurementRow, SearchRow
from server.frontier import feasibility, values_of


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
    busy: bool = False  # measured while the machine looked busy (after the agent's retries)
    reference: tuple[float, float] | None = None  # (latency, memory) of the nearest reference
    reference_key: tuple[str, str] | None = None  # (agent, when): one reading, many results


@dataclass(frozen=True)
class Uncertainty:
    """A measured result's hardware values as intervals meant to contain a re-measurement,
    drift-corrected values, and the frontier group it belongs to (beside its Told)."""

    intervals: dict[str, tuple[float, float]]
    corrected: dict[str, float]
    group: str | None  # arch id of the nominal frontier point it cannot be told apart from


@dataclass
class ResultTable:
    """A search's told results and, derived from them, its noise model and frontier.

    The frontier is the frontier beyond noise (`search.pareto.front_beyond_noise`): a
    result is off it only when another's interval lies wholly better; busy results never
    enter it. It is recomputed when results arrive, since each reference reading moves every
    interval.
    """

    search_id: int
    objectives: list[str]
    device: str = "cpu"
    confidence: float = 0.95
    rows: list[Told] = field(default_factory=list)
    frontier: list[Told] = field(default_factory=list)
    uncertainty: dict[str, Uncertainty] = field(default_factory=dict)  # frontier members
    noise: NoiseModel | None = None
    plain_frontier: int = 0  # size of the nominal frontier, for comparison
    stamp: Any = None  # the normalisation the hypervolumes were read under
    _readings: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)

    @property
    def epoch(self) -> str:
        """Names the normalisation the rows' hypervolumes were computed under."""
        canonical = json.dumps(self.stamp, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    @property
    def last(self) -> int:
        return self.rows[-1].seq if self.rows else 0

    def add(self, new: list[Told]) -> None:
        """Append results; refit the noise model and the frontier when any came."""
        if not new and self.noise is not None:
            return
        self.rows.extend(new)
        for t in new:
            if t.reference_key is not None and t.reference is not None:
                self._readings[t.reference_key] = t.reference
        self.noise = fit(self._groups(), self.device)
        self._frontier()

    def _groups(self) -> dict[str, list[list[float]]]:
        """Repeated measurements by metric: the reference readings are one architecture's."""
        readings = list(self._readings.values())
        return {
            "latency_ms": [[r[0] for r in readings]],
            "memory_mb": [[r[1] for r in readings]],
        }

    def reference_level(self) -> tuple[float, float] | None:
        """The median reference reading (latency, memory): what drift is corrected to."""
        if not self._readings:
            return None
        readings = np.array(list(self._readings.values()), dtype=float)
        return float(np.median(readings[:, 0])), float(np.median(readings[:, 1]))

    def reference_readings(self) -> int:
        return len(self._readings)

    def describe(
        self,
        values: dict[str, float | None],
        reference: tuple[float, float] | None,
        group: str | None = None,
    ) -> Uncertainty:
        """Intervals (at the search's confidence) and drift-corrected values of a result's
        `values`, measured next to the `reference` reading (latency, memory)."""
        assert self.noise is not None
        level = self.reference_level()
        intervals, corrected = {}, {}
        for i, metric in enumerate(METRICS):
            value = values.get(metric)
            if value is None:
                continue
            intervals[metric] = self.noise.interval(metric, value, self.confidence)
            reading = reference[i] if reference else None
            corrected[metric] = value * drift_factor(reading, level[i] if level else None)
        return Uncertainty(intervals=intervals, corrected=corrected, group=group)

    def _frontier(self) -> None:
        pool = [
            t
            for t in self.rows
            if t.feasible and not t.busy and all(t.values[o] is not None for o in self.objectives)
        ]
        signs = np.array([-1.0 if OBJECTIVE_SENSE[o] == "max" else 1.0 for o in self.objectives])
        nominal = np.array([[t.values[o] for o in self.objectives] for t in pool], dtype=float)
        nominal = nominal.reshape(len(pool), len(self.objectives))
        low, high = nominal.copy(), nominal.copy()
        assert self.noise is not None
        for j, objective in enumerate(self.objectives):
            if objective in METRICS:  # measured: known to within the noise; the rest exact
                half = self.noise.half_width(objective, self.confidence)
                low[:, j], high[:, j] = nominal[:, j] * np.exp(-half), nominal[:, j] * np.exp(half)
        # Minimised form: a maximised objective's worst case is its low end.
        lo, hi = np.minimum(low * signs, high * signs), np.maximum(low * signs, high * signs)
        mask, group = front_beyond_noise(nominal * signs, lo, hi)
        self.plain_frontier = int(sum(1 for i, g in enumerate(group) if g == i))
        members = [(t, pool[g].arch_id) for t, keep, g in zip(pool, mask, group) if keep]
        self.frontier = sorted((t for t, _ in members), key=lambda t: t.seq)
        self.uncertainty = {t.arch_id: self.describe(t.values, t.reference, g) for t, g in members}


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
                table = ResultTable(
                    search.id,
                    list(request.objectives),
                    device=request.measurement.device,
                    confidence=request.noise.confidence,
                    stamp=search.normalisation,
                )
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
    MeasurementRow.busy,
    MeasurementRow.result["reference"],
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
        reference=(reference["latency_ms"], reference["peak_memory_mb"]) if reference else None,
        reference_key=(agent, reference["measured_at"]) if reference else None,
    )
