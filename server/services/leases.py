"""Expired leases: the jobs of agents that went silent go back to the queue.

One function does it (`requeue_expired`), from two places: every claim runs it before new
work goes out (server.services.jobs), and the app runs `requeue_stale` on a schedule
(server.app.sweeper), so that a search whose last agent died moves again although no agent
claims. Both are conditional UPDATEs inside a write transaction (on PostgreSQL over rows
locked with SKIP LOCKED), so any number of server processes may run them at once: a job is
requeued by one of them, and a result arriving later is judged by the lease log as before
(server.services.jobs.submit_result: exactly once).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import Select, func, select, update
from sqlalchemy.orm import Session

from archvocab.wire import JobStatus, SearchStatus
from server.services.events import log_event
from server.services.work import WorkSignal
from server.settings import Settings
from server.store.rows import CandidateRow, SearchRow
from server.store.store import Store

# The schedule's period when the settings name none: a sixth of a lease, at most this long;
# and never shorter than this, whatever they say.
_MAX_SWEEP_S, _MIN_SWEEP_S = 10.0, 0.01


def requeue_expired(
    session: Session,
    now: datetime,
    row_locks: bool = False,
    by: Literal["claim", "schedule"] = "claim",
) -> int:
    """Jobs whose lease ran out before `now` go back to the queue (or are cancelled with their
    search); how many did. A job requeued counts as queued from when its lease ran out."""
    expired = _expired(now)
    if row_locks:  # rows another claim or sweep is requeueing are its business
        expired = expired.with_for_update(skip_locked=True)
    ids = list(session.scalars(expired))
    if not ids:
        return 0
    running = select(SearchRow.id).where(SearchRow.status == SearchStatus.RUNNING)
    cleared = {"lease_id": None, "agent_id": None, "lease_expires_at": None}
    mine = CandidateRow.id.in_(ids)
    requeued = session.execute(
        update(CandidateRow)
        .where(mine, CandidateRow.search_id.in_(running))
        .values(status=JobStatus.QUEUED, queued_at=CandidateRow.lease_expires_at, **cleared)
    ).rowcount
    cancelled = session.execute(
        update(CandidateRow)
        .where(mine, CandidateRow.status == JobStatus.RUNNING)
        .values(status=JobStatus.CANCELLED, **cleared)
    ).rowcount
    log_event("lease.expired", requeued=requeued, cancelled=cancelled, by=by)
    return requeued + cancelled


class ExpiryWatch:
    """The moment before which no lease can have run out, as far as this process knows: a
    claim looks for expired leases only once it has passed, so most claims skip that read.

    It holds for every process sharing the store: a lease only ever runs out later than it
    was set to (a heartbeat renews it), and one given out after the check runs out a whole
    lease period later (every process leases for the same period). A check in a transaction
    that then rolls back may leave expired jobs to the schedule's next pass
    (`requeue_stale`)."""

    def __init__(self) -> None:
        self._until: datetime | None = None

    def due(self, now: datetime) -> bool:
        return self._until is None or now >= self._until

    def checked(self, session: Session, now: datetime, lease_seconds: float) -> None:
        """Note when the first lease running now runs out (after expired ones were requeued
        in `session`)."""
        earliest = session.scalar(
            select(func.min(CandidateRow.lease_expires_at)).where(
                CandidateRow.status == JobStatus.RUNNING
            )
        )
        horizon = now + timedelta(seconds=lease_seconds)
        self._until = horizon if earliest is None else min(earliest, horizon)


def any_expired(session: Session, before: datetime) -> bool:
    """Whether a job's lease ran out before `before` (one indexed read)."""
    return session.scalar(_expired(before).limit(1)) is not None


def _expired(before: datetime) -> Select[tuple[int]]:
    return select(CandidateRow.id).where(
        CandidateRow.status == JobStatus.RUNNING, CandidateRow.lease_expires_at < before
    )


def sweep_interval(settings: Settings) -> float:
    """Seconds between the schedule's passes: `Settings.requeue_every_s`, else a sixth of the
    lease (at most 10 s)."""
    if settings.requeue_every_s is not None:
        return max(_MIN_SWEEP_S, settings.requeue_every_s)
    return max(_MIN_SWEEP_S, min(_MAX_SWEEP_S, settings.lease_seconds / 6))


def sweep_grace(settings: Settings) -> float:
    """How long after its lease ran out the schedule leaves a job to its agent: one more
    heartbeat period of the agent's (it beats every `heartbeat_interval_s`, or every half
    lease if that is shorter)."""
    return min(settings.heartbeat_interval_s, settings.lease_seconds / 2)


def requeue_stale(store: Store, work: WorkSignal | None = None) -> int:
    """The schedule's pass: requeue the jobs whose lease ran out more than `sweep_grace` ago;
    how many were. The grace keeps what a lease that just ran out allows: its agent, only slow
    to say it is alive (a flaky network), may still renew it while nobody else took the job (a
    claim does not wait: it takes such a job at once). So a dead agent's job is queued again
    within a lease, a grace and a sweep interval of its last heartbeat (80 s at most with the
    defaults). Only a pass that finds something opens a write transaction, so an idle schedule
    costs the writers nothing. `work` hears of the jobs requeued (the waiting claims)."""
    before = store.now() - timedelta(seconds=sweep_grace(store.settings))
    with store.read() as session:
        if not any_expired(session, before):
            return 0
    with store.write_rows() as session:
        requeued = requeue_expired(session, before, store.row_locks, by="schedule")
        if requeued and work is not None:
            work.queued()  # of any class: every waiting claim looks, in every process
        return requeued
