"""Live search engines, one per running search, rebuilt from the store when missing.

The engine is a cache of what the rows say: after a restart `restore` replays the candidate
rows (in proposal order) and the engine proposes exactly what the live one would have.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from archvocab.registry import parse_space, parse_spec
from archvocab.wire import JobStatus, SearchCreate
from proxies.registry import zero_cost_scores
from search.engine import Engine
from search.hypervolume import Normaliser
from search.noise import steering_widths
from search.records import PENDING
from search.strategies import ENGINES
from server.services.quality import normaliser
from server.store.rows import ArchitectureRow, CandidateRow, MeasurementRow, SearchRow


def measured_values(row: CandidateRow) -> dict[str, float] | None:
    """Objective values the engine is told for a finished candidate (None: it failed)."""
    if row.status != JobStatus.MEASURED or row.measurement is None:
        return None
    m = row.measurement
    # Low-cost proxies come with the measurement: the agent computed them (agent.proxy_values).
    return {
        **m.result.get("proxies", {}),
        "latency_ms": m.latency_ms,
        "memory_mb": m.peak_memory_mb,
    }


def _engine_kwargs(request: SearchCreate, normaliser: Normaliser | None) -> dict:
    kwargs: dict = {
        "objectives": list(request.objectives),
        "scorer": zero_cost_scores,
        "seed": request.seed,
        "max_evaluations": request.budget.max_evaluations,
        "population": request.population,
        "constraints": request.constraints,
    }
    if request.strategy == "layer_scaled":
        kwargs["layers"] = request.layers
    if request.strategy == "hwnas":
        # It steers by the hypervolume the search reports, once that is fixed.
        kwargs["normaliser"] = normaliser
        # Its parents come from the frontier beyond the device's noise: a point that a
        # re-measurement could put on the frontier stays a parent. (lts keeps LTS's exact
        # frontier: diluting its uniform parent draw cost it 2% hypervolume in
        # bench/search_efficiency.py, where hwnas's was level or better.)
        kwargs["tolerance"] = steering_widths(request.measurement.device, request.noise.confidence)
    return kwargs


class EngineCache:
    """search id -> (live engine, the search revision it reflects). Callers hold the
    store's write lock and, where several processes share the store, the search's row lock.
    It observes the store's write transactions (`Store.observe`): a rolled-back one drops the
    engines it held.

    Another server process may have proposed or told since this one last did: the search row's
    `revision` then differs from the cached one, and the engine is rebuilt from the rows.
    """

    def __init__(self) -> None:
        self._engines: dict[int, tuple[Engine, int]] = {}
        self._handed_out: set[int] = set()  # searches whose engine this transaction holds
        self.restores = 0  # engines rebuilt from rows (after a restart, or another process)

    def new(
        self, search: SearchRow, request: SearchCreate, normaliser: Normaliser | None
    ) -> Engine:
        engine = ENGINES[request.strategy](
            parse_space(request.space), **_engine_kwargs(request, normaliser)
        )
        self._engines[search.id] = (engine, search.revision)
        self._handed_out.add(search.id)
        return engine

    def get(self, session: Session, search: SearchRow) -> Engine:
        self._handed_out.add(search.id)
        cached = self._engines.get(search.id)
        if cached is not None and cached[1] == search.revision:
            return cached[0]
        engine = self._restore(session, search)
        self.restores += 1
        self._engines[search.id] = (engine, search.revision)
        return engine

    def changed(self, search: SearchRow) -> None:
        """The engine was told or asked something the rows now record: a new revision."""
        search.revision += 1
        cached = self._engines.get(search.id)
        if cached is not None:
            self._engines[search.id] = (cached[0], search.revision)

    def rolled_back(self) -> None:
        """The transaction failed: an engine it held may have been told something the rows do
        not record. Those are rebuilt from the rows when next needed; the others stay."""
        for search_id in self._handed_out:
            self._engines.pop(search_id, None)
        self._handed_out.clear()

    def committed(self) -> None:
        self._handed_out.clear()

    def drop(self, search_id: int) -> None:
        self._engines.pop(search_id, None)

    @staticmethod
    def _restore(session: Session, search: SearchRow) -> Engine:
        request = search.parsed_request
        # Columns, not rows: a measurement's raw samples are most of its size and the replay
        # needs none of them (restores happen on every result a process did not see).
        rows = session.execute(
            select(
                ArchitectureRow.spec,
                CandidateRow.generation,
                CandidateRow.status,
                MeasurementRow.latency_ms,
                MeasurementRow.peak_memory_mb,
                MeasurementRow.result["proxies"],
            )
            .join(ArchitectureRow, ArchitectureRow.arch_id == CandidateRow.arch_id)
            .outerjoin(MeasurementRow, MeasurementRow.id == CandidateRow.measurement_id)
            .where(CandidateRow.search_id == search.id, CandidateRow.round == 0)
            .order_by(CandidateRow.id)
        )
        history = []
        for spec, generation, status, latency, memory, proxies in rows:
            if status not in (JobStatus.MEASURED, JobStatus.FAILED):
                values = PENDING
            elif status == JobStatus.FAILED or latency is None:
                values = None
            else:
                values = {**(proxies or {}), "latency_ms": latency, "memory_mb": memory}
            history.append((parse_spec(spec), generation, values))
        return ENGINES[request.strategy].restore(
            parse_space(request.space),
            history=history,
            **_engine_kwargs(request, normaliser(search)),
        )
