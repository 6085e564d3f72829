"""The agent-facing service: registration, claims as leases, heartbeats, results.

A claim is a compare-and-set: one conditional UPDATE that only succeeds while the job is still
queued; its rowcount says who won. Expired leases go back to the queue before new work goes out.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from archvocab.wire import (
    AgentInfo,
    AgentRegistration,
    AgentView,
    DeviceFingerprint,
    Failure,
    JobLease,
    JobResult,
    LeaseRef,
    LeaseStatus,
    ProxyRequest,
    SearchCreate,
)
from server import quality
from server.cache import fingerprint_key, new_measurement
from server.db import AgentRow, CandidateRow, SearchRow
from server.engines import measured_values
from server.errors import Conflict, NotFound
from server.logs import log_event
from server.searches import advance
from server.settings import as_utc
from server.store import Store

_CLAIM_RACES = 5  # a lost compare-and-set is retried with the next queued job


def register_agent(store: Store, registration: AgentRegistration) -> AgentInfo:
    with store.write() as session:
        now = store.now()
        agent = AgentRow(
            id=uuid.uuid4().hex,
            name=registration.name,
            device_class=registration.device_class,
            fingerprint=registration.fingerprint.model_dump(mode="json"),
            fingerprint_key=fingerprint_key(registration.fingerprint),
            registered_at=now,
            last_seen_at=now,
            jobs_done=0,
            failures=0,
        )
        session.add(agent)
    log_event(
        "agent.registered",
        agent_id=agent.id,
        device_class=agent.device_class,
        agent_name=agent.name,
    )
    return AgentInfo(
        agent_id=agent.id,
        device_class=agent.device_class,
        name=agent.name,
        heartbeat_interval_s=store.settings.heartbeat_interval_s,
        lease_seconds=store.settings.lease_seconds,
    )


def list_agents(store: Store) -> list[AgentView]:
    # Online: seen within a lease period, as /metrics counts hwnas_agents_online.
    since = store.now() - timedelta(seconds=store.settings.lease_seconds)
    with store.read() as session:
        return [
            AgentView(
                agent_id=a.id,
                name=a.name,
                device_class=a.device_class,
                fingerprint=a.fingerprint,
                registered_at=as_utc(a.registered_at),
                last_seen_at=as_utc(a.last_seen_at),
                jobs_done=a.jobs_done,
                failures=a.failures,
                online=a.last_seen_at >= since,
            )
            for a in session.scalars(select(AgentRow).order_by(AgentRow.registered_at))
        ]


def _agent(session: Session, agent_id: str, now: datetime) -> AgentRow:
    agent = session.get(AgentRow, agent_id)
    if agent is None:
        raise NotFound("agent", agent_id)
    agent.last_seen_at = now
    return agent


def requeue_expired(session: Session, now: datetime) -> None:
    """Jobs whose lease ran out go back to the queue (or are cancelled with their search)."""
    expired = (CandidateRow.status == "running") & (CandidateRow.lease_expires_at < now)
    running = select(SearchRow.id).where(SearchRow.status == "running")
    cleared = {"lease_id": None, "agent_id": None, "lease_expires_at": None}
    requeued = session.execute(
        update(CandidateRow)
        .where(expired, CandidateRow.search_id.in_(running))
        .values(status="queued", **cleared)
    ).rowcount
    cancelled = session.execute(
        update(CandidateRow).where(expired).values(status="cancelled", **cleared)
    ).rowcount
    if requeued or cancelled:
        log_event("lease.expired", requeued=requeued, cancelled=cancelled)


def claim(store: Store, agent_id: str) -> JobLease | None:
    with store.write() as session:
        now = store.now()
        agent = _agent(session, agent_id, now)
        requeue_expired(session, now)
        expires = now + timedelta(seconds=store.settings.lease_seconds)
        runtimes, devices = _capabilities(agent)
        topped_up = False
        for _ in range(_CLAIM_RACES + 1):
            job_id = session.scalar(
                select(CandidateRow.id)
                .join(SearchRow, SearchRow.id == CandidateRow.search_id)
                .where(
                    CandidateRow.status == "queued",
                    SearchRow.status == "running",
                    SearchRow.device_class == agent.device_class,
                    SearchRow.runtime.in_(runtimes),
                    SearchRow.device.in_(devices),
                )
                .order_by(CandidateRow.id)
                .limit(1)
            )
            if job_id is None and not topped_up:
                # Strategies without a generation barrier propose per free agent: this one
                # may be the agent they have not proposed for yet.
                topped_up = True
                _top_up(store, session, agent, runtimes, devices)
                continue
            if job_id is None:
                return None
            lease_id = uuid.uuid4().hex
            won = session.execute(
                update(CandidateRow)
                .where(CandidateRow.id == job_id, CandidateRow.status == "queued")
                .values(
                    status="running",
                    lease_id=lease_id,
                    lease_expires_at=expires,
                    agent_id=agent_id,
                    attempts=CandidateRow.attempts + 1,
                )
            ).rowcount
            if won == 1:
                lease = _lease(session, job_id, lease_id, expires, store.settings.lease_seconds)
                log_event(
                    "job.claimed", job_id=job_id, search_id=lease.search_id, agent_id=agent_id
                )
                return lease
        return None


def _top_up(
    store: Store, session: Session, agent: AgentRow, runtimes: list[str], devices: list[str]
) -> None:
    """Let every running search this agent could serve propose for the free slots."""
    searches = session.scalars(
        select(SearchRow).where(
            SearchRow.status == "running",
            SearchRow.device_class == agent.device_class,
            SearchRow.runtime.in_(runtimes),
            SearchRow.device.in_(devices),
        )
    ).all()
    for search in searches:
        advance(store, session, search)
    session.flush()


def _capabilities(agent: AgentRow) -> tuple[list[str], list[str]]:
    """(runtimes, devices) the agent can measure with: only jobs it can do are offered."""
    fingerprint = DeviceFingerprint.model_validate(agent.fingerprint)
    devices = ["cpu", "cuda"] if fingerprint.accelerator else ["cpu"]
    return list(fingerprint.runtimes), devices


def _lease(
    session: Session, job_id: int, lease_id: str, expires: datetime, seconds: float
) -> JobLease:
    row = session.get(CandidateRow, job_id, populate_existing=True)
    search = session.get(SearchRow, row.search_id)
    request = SearchCreate.model_validate(search.request)
    names = request.agent_proxies
    return JobLease(
        proxies=ProxyRequest(names=names, inputs=request.proxy_inputs) if names else None,
        job_id=job_id,
        lease_id=lease_id,
        lease_expires_at=as_utc(expires),
        lease_seconds=seconds,
        search_id=row.search_id,
        arch_id=row.arch_id,
        spec=row.architecture.spec,
        settings=search.request["measurement"],
    )


def _held_job(session: Session, job_id: int, ref: LeaseRef, now: datetime) -> CandidateRow:
    """The job if `ref` holds its live lease; otherwise Conflict saying why."""
    row = session.get(CandidateRow, job_id)
    if row is None:
        raise NotFound("job", job_id)
    if row.status != "running" or row.lease_id != ref.lease_id or row.agent_id != ref.agent_id:
        raise Conflict(
            f"job {job_id}: lease {ref.lease_id!r} is not held by agent {ref.agent_id!r} "
            f"(job is {row.status}); the job may have expired and been given to another agent"
        )
    if row.lease_expires_at is None or row.lease_expires_at < now:
        raise Conflict(f"job {job_id}: lease {ref.lease_id!r} expired at {row.lease_expires_at}")
    return row


def heartbeat(store: Store, job_id: int, ref: LeaseRef) -> LeaseStatus:
    with store.write() as session:
        now = store.now()
        _agent(session, ref.agent_id, now)
        row = _held_job(session, job_id, ref, now)
        row.lease_expires_at = now + timedelta(seconds=store.settings.lease_seconds)
        return LeaseStatus(job_id=job_id, lease_expires_at=as_utc(row.lease_expires_at))


def _missing_proxies(search: SearchRow, result: JobResult) -> str | None:
    """Why a measurement lacks the proxy values its search needs, or None."""
    if result.measurement is None:
        return None
    request = SearchCreate.model_validate(search.request)
    names = request.agent_proxies
    measured = result.measurement
    lacking = [n for n in names if n not in measured.proxies]
    if lacking:
        lacks = ", ".join(lacking)
        return f"the agent reported no value for proxy {lacks}, which this search needs"
    if names and measured.proxy_inputs != request.proxy_inputs.key():
        return (
            f"proxy values computed on {measured.proxy_inputs!r}, "
            f"not the search's {request.proxy_inputs.key()!r}"
        )
    return None


def submit_result(store: Store, job_id: int, result: JobResult) -> None:
    with store.write() as session:
        now = store.now()
        agent = _agent(session, result.agent_id, now)
        row = _held_job(session, job_id, result, now)
        search = session.get(SearchRow, row.search_id)
        # Load (or rebuild) the engine before this row changes, so it replays the job as pending.
        engine = store.engines.get(session, search) if search.status == "running" else None
        row.lease_id, row.lease_expires_at, row.finished_at = None, None, now
        missing = _missing_proxies(search, result)
        if missing:  # an agent that cannot compute the search's proxy objective
            result = JobResult(
                agent_id=result.agent_id,
                lease_id=result.lease_id,
                failure=Failure(kind="error", message=missing),
            )
        if result.measurement is not None:
            row.status = "measured"
            row.measurement = new_measurement(
                search, row.arch_id, agent, result.measurement.model_dump(mode="json"), now
            )
            agent.jobs_done += 1
        else:
            row.status = "failed"
            row.failure_kind, row.failure_message = result.failure.kind, result.failure.message
            agent.failures += 1
        session.flush()
        if engine is not None:
            engine.tell(row.arch_id, measured_values(row))
        quality.record_result(session, search, row, engine)
        if engine is not None:
            advance(store, session, search)
    log_event(
        "job.result",
        job_id=job_id,
        search_id=row.search_id,
        agent_id=result.agent_id,
        status=row.status,
        failure_kind=row.failure_kind,
    )
