"""Persisting an engine's proposals: the architectures (shared by searches) and the jobs that
measure them, or, where the measurement cache has one, the measurement reused."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session, lazyload

from archvocab.wire import JobStatus
from search.records import Candidate
from server.store.cache import find_cached
from server.store.rows import ArchitectureRow, CandidateRow, SearchRow
from server.store.store import insert_rows


def enqueue(
    session: Session,
    search: SearchRow,
    batch: list[Candidate],
    now: datetime,
    most_reused: int | None = None,
) -> tuple[int, list[CandidateRow]]:
    """Persist proposals: architectures (shared) first, then their jobs, in the batch's order.

    A proposal the cache already has a measurement for is stored as measured (reused) instead
    of queued. With `most_reused`, only the batch's first proposals are written, up to the
    one that makes that many reused: telling a reused one costs ten times what writing a
    proposal does, and a caller that writes a round in parts keeps each part short
    (server.services.searches.advance). Returns how many of the batch were written, and the
    reused rows among them, for the engine to be told.

    Each table is written by one statement of many rows (`insert_rows`): a first generation
    of 10,000 is written in small parts so that others' requests get in between
    (server.services.searches.ROUND_CHUNK), and the unit of work's flush, or a statement run
    once per row, cost more than the inserts themselves.
    """
    if not batch:
        return 0, []
    if most_reused is None:
        cached = find_cached(session, search, [c.arch_id for c in batch])
    else:
        cached = _cached_up_to(session, search, batch, most_reused)
        batch = _up_to_reused(batch, cached, most_reused)
    insert_rows(
        session,
        ArchitectureRow.__table__,
        [
            {
                "arch_id": c.arch_id,
                "spec": c.spec.to_dict(),
                # scored by the engine when it admitted the candidate
                "decoder_params": int(c.proxies["decoder_params"]),
                "total_params": int(c.proxies["total_params"]),
            }
            for c in batch
        ],
        # Architectures are shared by searches, which other server processes may be
        # extending at this moment: whoever inserts one first wins, the others find it there.
        skip_existing="arch_id",
    )
    rows = [_candidate_columns(search.id, c, now, cached.get(c.arch_id)) for c in batch]
    insert_rows(session, CandidateRow.__table__, rows)
    reused = [row["arch_id"] for row in rows if row["reused"]]
    if not reused:
        return len(batch), []
    return len(batch), list(
        session.scalars(_REUSED_ROWS, {"search": search.id, "arch_ids": reused})
    )


# The rows just written as reused, to be told (built once, as the part that writes them runs
# under the write lock). Telling one needs its measurement, not its architecture's spec.
_REUSED_ROWS = (
    select(CandidateRow)
    .where(
        CandidateRow.search_id == bindparam("search"),
        CandidateRow.round == 0,
        CandidateRow.arch_id.in_(bindparam("arch_ids", expanding=True)),
    )
    .options(lazyload(CandidateRow.architecture))
    .order_by(CandidateRow.id)
)


def _cached_up_to(
    session: Session, search: SearchRow, batch: list[Candidate], most: int
) -> dict[str, int]:
    """`find_cached` for as much of the batch as `_up_to_reused` writes: its first `most`,
    and the rest only where those are not all cached. A replay's part of 50 proposals, all
    cached, looked up all 50 to write 4: 1.2 ms of the part's 6-7 under the write lock, 0.8
    for the 4."""
    first = find_cached(session, search, [c.arch_id for c in batch[:most]])
    if len(first) == most or len(batch) <= most:
        return first
    return first | find_cached(session, search, [c.arch_id for c in batch[most:]])


def _up_to_reused(batch: list[Candidate], cached: dict[str, int], most: int) -> list[Candidate]:
    """The batch's first proposals, up to the one that is the `most`-th the cache holds."""
    hits = 0
    for index, candidate in enumerate(batch):
        hits += candidate.arch_id in cached
        if hits >= most:
            return batch[: index + 1]
    return batch


def _candidate_columns(
    search_id: int, c: Candidate, now: datetime, hit: int | None
) -> dict[str, Any]:
    """A proposal's job row: queued, or measured already by the cache's `hit` (its id)."""
    return {
        "search_id": search_id,
        "arch_id": c.arch_id,
        "round": 0,
        "generation": c.generation,
        "status": JobStatus.QUEUED if hit is None else JobStatus.MEASURED,
        "queued_at": now if hit is None else None,  # a reused one never waited for an agent
        "attempts": 0,
        "reused": hit is not None,
        "finished_at": None if hit is None else now,
        "measurement_id": hit,
        "prediction": c.predicted,
    }
