"""Persisting an engine's proposals: the architectures (shared by searches) and the jobs that
measure them, or, where the measurement cache has one, the measurement reused."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from archvocab.wire import JobStatus
from search.records import Candidate
from server.store.cache import find_cached
from server.store.rows import ArchitectureRow, CandidateRow, SearchRow


def enqueue(
    session: Session, search: SearchRow, batch: list[Candidate], now: datetime
) -> list[CandidateRow]:
    """Persist a batch of proposals: architectures (shared) first, then their jobs.

    A proposal the cache already has a measurement for is stored as measured (reused) instead
    of queued; returns those rows, for the engine to be told.
    """
    rows = [
        {
            "arch_id": c.arch_id,
            "spec": c.spec.to_dict(),
            # scored by the engine when it admitted the candidate
            "decoder_params": int(c.proxies["decoder_params"]),
            "total_params": int(c.proxies["total_params"]),
        }
        for c in batch
    ]
    if rows:
        # Architectures are shared by searches, which other server processes may be extending
        # at this moment: whoever inserts one first wins, the others find it there.
        insert = (pg_insert if session.bind.dialect.name == "postgresql" else sqlite_insert)(
            ArchitectureRow
        )
        session.execute(insert.values(rows).on_conflict_do_nothing(index_elements=["arch_id"]))
    session.flush()
    cached = find_cached(session, search, [c.arch_id for c in batch])
    rows = new_candidate_rows(search.id, batch, now)
    for row in rows:
        hit = cached.get(row.arch_id)
        if hit is not None:
            row.status, row.reused, row.finished_at = JobStatus.MEASURED, True, now
            row.queued_at = None  # never waited for an agent
            row.measurement = hit
    session.add_all(rows)
    session.flush()
    return [row for row in rows if row.reused]


def new_candidate_rows(search_id: int, batch: list[Candidate], now: datetime) -> list[CandidateRow]:
    return [
        CandidateRow(
            search_id=search_id,
            arch_id=c.arch_id,
            generation=c.generation,
            status=JobStatus.QUEUED,
            queued_at=now,
            prediction=c.predicted,
        )
        for c in batch
    ]
