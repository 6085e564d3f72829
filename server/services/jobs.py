"""The jobs agents do: claims as leases, heartbeats, results (registration: server.services.agents).

A claim is a compare-and-set: one conditional UPDATE that only succeeds while the job is still
queued; its rowcount says who won. On PostgreSQL the queued row is first picked with
`FOR UPDATE SKIP LOCKED`, so concurrent claims (from any number of server processes) each take
a different job instead of racing for the same one. Expired leases go back to the queue before
new work goes out, and on a schedule besides (server.services.leases). Every lease issued is
logged (`LeaseRow`), which is what lets a result be accepted exactly once: a repeated
submission is a duplicate, and a measurement that arrives after its lease expired still counts
if the job has no result yet.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, bindparam, insert, or_, select, update
from sqlalchemy.orm import Session

from archvocab.errors import HwnasError
from archvocab.registry import parse_space
from archvocab.wire import (
    Failure,
    JobLease,
    JobResult,
    JobStatus,
    LeaseRef,
    LeaseStatus,
    ProxyRequest,
    ReferenceJob,
    ResultReceipt,
    SearchStatus,
)
from search.noise import reference_architecture
from server.errors import Conflict, NotFound
from server.services.agents import (
    capabilities,
    capabilities_of,
    mark_seen,
    read_agent,
    recently_seen,
    seen,
)
from server.services.arrivals import (
    arrive,
    propose_round,
    rounds_outside,
    settle,
    settle_in,
    tell_now,
    waiting_for,
)
from server.services.auth import TRUSTED, Caller, check_agent
from server.services.context import Services
from server.services.events import log_event
from server.services.leases import any_expired, requeue_expired
from server.services.searches import advance, ask_again, measuring_slots
from server.settings import as_utc
from server.store.cache import measurement_columns
from server.store.job_results import (
    finish,
    finished_row,
    locked_search_of,
    read_job,
    read_job_and_search,
    renew,
)
from server.store.rows import AgentRow, ArchitectureRow, CandidateRow, LeaseRow, SearchRow
from server.store.store import SEARCH_LOCK, SKIP_LOCKED, Store, write_deferred

_CLAIM_RACES = 5  # a lost compare-and-set is retried with the next queued job


def claim(
    services: Services, agent_id: str, caller: Caller = TRUSTED, looked: bool = False
) -> JobLease | None:
    """The next job this agent can measure, leased to it; None when there is none even after
    the searches it could serve were asked for more. An agent whose last claim here found
    nothing is first checked by a read (`_nothing_to_take`): an idle poll writes nothing,
    and an agent with work pays for no extra read. `looked`: the caller's write transaction,
    committed just now, found nothing queued for the agent (a result that claims the next
    job).

    A claim that found nothing queued asks the searches for more under the write lock
    (`_top_up`) only when a read does not show that they would give nothing: most claims
    after a result find the generation still being measured, and on PostgreSQL more claims
    waited for the lock to top up than results waited to be recorded (docs/benchmarks.md,
    "PostgreSQL's write lock: claims read first")."""
    idle = services.idle_agents
    read_first = not looked and agent_id in idle
    if read_first and _nothing_to_take(services, agent_id, caller):
        return None
    lease = None if looked else _take_queued(services, agent_id, caller)
    device_class = None
    if lease is None and not read_first:
        device_class = _nothing_to_take(services, agent_id, caller)
    if lease is None and device_class is None:
        # Results may wait to be told, or a proposal round may be under way in another
        # thread (`busy`): either leaves work queued once done.
        queued, busy, around, device_class = _top_up(services, agent_id)
        engines = services.engines
        for search_id in around:  # outside the write lock; a round under way counts as busy
            if not settle(services, search_id, most=1):
                propose_round(services, search_id)
            written = engines.rounds_written(search_id)  # before the look: `wait_round`
            if engines.lock(search_id).locked():
                busy.append((search_id, written))
            queued = True
        # Rounds the cache answered, or that a result left to be asked outside its
        # transaction, go on; one another thread is writing counts as busy.
        again = ask_again(services)
        queued = queued or bool(again.asked)
        busy.extend(again.held)
        if queued:
            lease = _take_queued(services, agent_id)
        if lease is None and busy:
            search_id, written = busy[0]
            engines.wait_round(search_id, written, _ROUND_WAIT_S)
            lease = _take_queued(services, agent_id)
    if lease is None:  # (a job taken makes it busy again: `_take`)
        if len(idle) >= _IDLE_KEPT:
            idle.clear()
        idle[agent_id] = device_class
    return lease


def claim_together(services: Services, asks: list[tuple[str, Caller]]) -> list[JobLease | None]:
    """Claims woken together by queued jobs (server.app.agent_path), each of an agent whose
    last claim found nothing: a job queued for each is leased to it, all in one write
    transaction, in the order asked. None where none is queued for the agent, or it may not
    claim: its own `claim` then asks the searches for more, or says why. One at a time, a
    hundred claims woken by a generation's jobs took a read and a write transaction each,
    and the results sent meanwhile queued behind them (docs/benchmarks.md, "Claims woken
    together lease together")."""
    store = services.store
    leases: list[JobLease | None] = []
    with store.write_rows() as session:
        now = store.now()
        for agent_id, caller in asks:
            try:  # (raised before the agent's row is written)
                agent = seen(session, agent_id, now, store.settings.lease_seconds, caller)
            except HwnasError:
                leases.append(None)
                continue
            leases.append(_take(services, session, agent))
    return leases


_IDLE_KEPT = 100_000  # agents remembered as idle; forgetting one costs it one write
# How long a claim that found nothing waits for a proposal round under way in another thread
# (server.services.arrivals.settle) to be written before it answers "no work": one round of
# the costliest strategy is well inside it, and an agent told "no work" waits its poll
# interval instead. (The waiting claim holds a worker thread meanwhile.)
_ROUND_WAIT_S = 1.0


_SEARCHES, _JOBS = SearchRow.__table__, CandidateRow.__table__
_ARCHS, _LEASES = ArchitectureRow.__table__, LeaseRow.__table__
# A claim's statements are built once and bound per claim: building a statement costs about
# as much as running it. The running searches an agent can measure for:
_SERVABLE = and_(
    _SEARCHES.c.status == SearchStatus.RUNNING,
    _SEARCHES.c.device_class == bindparam("device_class"),
    _SEARCHES.c.runtime.in_(bindparam("runtimes", expanding=True)),
    _SEARCHES.c.device.in_(bindparam("devices", expanding=True)),
)


def _servable(session: Session, agent: Row[Any]) -> dict[str, Any]:
    """`_SERVABLE`'s parameters for this agent (`agent`: its `agents.seen` columns)."""
    runtimes, devices = capabilities(session, agent.id)
    return {"device_class": agent.device_class, "runtimes": runtimes, "devices": devices}


# The pick brings everything the lease says: the job, its spec, and which search (whose terms
# are the same for every lease: `_terms`).
_PICK = (
    select(
        _JOBS.c.id,
        _JOBS.c.round,
        _JOBS.c.search_id,
        _JOBS.c.arch_id,
        _JOBS.c.queued_at,
        _ARCHS.c.spec,
        _SEARCHES.c.created_at,
    )
    .join(_SEARCHES, _SEARCHES.c.id == _JOBS.c.search_id)
    .join(_ARCHS, _ARCHS.c.arch_id == _JOBS.c.arch_id)
    .where(_JOBS.c.status == JobStatus.QUEUED, _SERVABLE)
    .order_by(_JOBS.c.id)
    .limit(1)
)
_PICK_LOCKED = _PICK.with_for_update(of=_JOBS, skip_locked=True)
# Compare-and-set: only a job still queued is taken.
_TAKE = (
    update(_JOBS)
    .where(
        _JOBS.c.id == bindparam("job"),
        _JOBS.c.status == JobStatus.QUEUED,
    )
    .values(
        status=JobStatus.RUNNING,
        lease_id=bindparam("lease"),
        lease_expires_at=bindparam("expires"),
        agent_id=bindparam("agent"),
        attempts=_JOBS.c.attempts + 1,
    )
)
_ISSUE = insert(_LEASES).values(
    id=bindparam("lease"),
    job_id=bindparam("job"),
    agent_id=bindparam("agent"),
    issued_at=bindparam("issued"),
)
# PostgreSQL: the compare-and-set and the lease's log in one statement (the lease it returns
# says who won), one round trip instead of two.
_TAKEN = _TAKE.returning(_JOBS.c.id).cte("taken")
_TAKE_AND_ISSUE = (
    insert(_LEASES)
    .from_select(
        ["id", "job_id", "agent_id", "issued_at"],
        select(
            bindparam("lease", type_=_LEASES.c.id.type),
            _TAKEN.c.id,
            bindparam("agent", type_=_LEASES.c.agent_id.type),
            bindparam("issued", type_=_LEASES.c.issued_at.type),
        ),
    )
    .add_cte(_TAKEN)
    .returning(_LEASES.c.id)
)
# Whether a job the agent could take is queued; whether a result waits to be told to one of
# its searches; its searches and their revisions.
_ANY_QUEUED = (
    select(_JOBS.c.id)
    .join(_SEARCHES, _SEARCHES.c.id == _JOBS.c.search_id)
    .where(_JOBS.c.status == JobStatus.QUEUED, _SERVABLE)
    .limit(1)
)
_ANY_WAITING = select(waiting_for(_SERVABLE))
_SERVED = select(_SEARCHES.c.id, _SEARCHES.c.revision).where(_SERVABLE)


def _nothing_to_take(services: Services, agent_id: str, caller: Caller) -> str | None:
    """The agent's device class when a read alone shows the claim would find nothing and
    change nothing, else None: the agent was seen lately, no lease has run out, nothing it
    could measure is queued, and every search it serves asked its engine at its present
    revision with as many measuring slots and got nothing (`EngineCache.known_idle`). Then an
    idle agent's poll is a few indexed reads, and the write lock is left to the agents with
    work."""
    store = services.store
    with store.read() as session:
        now = store.now()
        agent = read_agent(session, agent_id)
        check_agent(session, caller, agent_id, agent)
        if agent is None:
            raise NotFound("agent", agent_id)
        if not recently_seen(agent.last_seen_at, now, store.settings.lease_seconds):
            return None
        if services.expiry.due(now) and any_expired(session, now):
            return None
        params = _servable(session, agent)
        if session.scalar(_ANY_QUEUED, params) is not None:
            return None
        if session.scalar(_ANY_WAITING, params):
            return None  # a result its searches have not been told of yet
        slots = measuring_slots(services, session, agent.device_class)
        # Read to the end, as `all` may stop early: a SQLite cursor left with rows keeps its
        # read open until the connection's checkin closes it (server.store.database).
        searches = session.execute(_SERVED, params).all()
        known = (services.engines.known_idle(i, revision, slots) for i, revision in searches)
        return agent.device_class if all(known) else None


def _take_queued(services: Services, agent_id: str, caller: Caller = TRUSTED) -> JobLease | None:
    store = services.store
    with store.write_rows() as session:
        agent = seen(session, agent_id, store.now(), store.settings.lease_seconds, caller)
        return _take(services, session, agent)


def _take(services: Services, session: Session, agent: Row[Any]) -> JobLease | None:
    """A queued job leased to `agent` (its `agents.seen` columns) in the caller's write
    transaction; None when none it can measure is queued."""
    store = services.store
    now = store.now()
    if services.expiry.due(now):
        if requeue_expired(session, now, store.row_locks):
            services.work.queued()  # of any class: every waiting claim looks
        services.expiry.checked(session, now, store.settings.lease_seconds)
    expires = now + timedelta(seconds=store.settings.lease_seconds)
    params = _servable(session, agent)
    query = _PICK_LOCKED if store.row_locks else _PICK
    others: set[tuple[str, str]] | None = None  # read only when a re-measurement comes up
    for _ in range(_CLAIM_RACES + 1):
        picked = session.execute(query, params).first()
        if picked is not None and picked.round > 0 and others is None:
            # A re-measurement may be left to another agent (`_measured_by`): the rule
            # only removes re-measurements, so a first measurement picked without it
            # is what it would pick too.
            others = _others_online(store, session, agent, now)
            if others:
                query = query.where(~_measured_by(agent.id, others))
                picked = session.execute(query, params).first()
        if picked is None:
            return None
        job_id = picked.id
        lease_id = uuid.uuid4().hex
        lease = {"job": job_id, "lease": lease_id, "agent": agent.id, "expires": expires}
        if store.row_locks:
            issued = session.execute(_TAKE_AND_ISSUE, {**lease, "issued": now}).first()
            won = 0 if issued is None else 1
        else:
            won = session.execute(_TAKE, lease).rowcount
            if won == 1:
                session.execute(_ISSUE, {**lease, "issued": now})
        if won == 1:
            terms = _terms(services, session, picked.search_id, picked.created_at)
            log_event("job.claimed", job_id=job_id, search_id=picked.search_id, agent_id=agent.id)
            services.idle_agents.pop(agent.id, None)
            return JobLease(
                **terms,
                job_id=job_id,
                lease_id=lease_id,
                lease_expires_at=as_utc(expires),
                lease_seconds=store.settings.lease_seconds,
                queued_at=as_utc(picked.queued_at) if picked.queued_at else None,
                search_id=picked.search_id,
                arch_id=picked.arch_id,
                spec=picked.spec,
            )
    return None


# Fingerprints read to learn what the other online agents can run: a device class is one kind
# of hardware, so its agents' capabilities agree after a few; one left unseen only means an
# agent may re-measure its own candidate, as it would alone.
_OTHERS_READ = 64


def _others_online(
    store: Store, session: Session, agent: Row[Any], now: datetime
) -> set[tuple[str, str]]:
    """The (runtime, device) pairs that another agent of this one's device class, seen within a
    lease period, can measure."""
    since = now - timedelta(seconds=store.settings.lease_seconds)
    others = select(AgentRow.id, AgentRow.fingerprint).where(
        AgentRow.device_class == agent.device_class,
        AgentRow.id != agent.id,
        AgentRow.last_seen_at >= since,
    )
    pairs: set[tuple[str, str]] = set()
    for other_id, fingerprint in session.execute(others.limit(_OTHERS_READ)):
        runtimes, devices = capabilities_of(other_id, fingerprint)
        pairs.update((r, d) for r in runtimes for d in devices)
    return pairs


def _measured_by(agent_id: str, others: set[tuple[str, str]]) -> ColumnElement[bool]:
    """A re-measurement of an architecture this agent measured for the search already, which
    another online agent of the class can run (`others`: its runtime and device): left to
    that one, so that a re-measurement also varies the device (docs/reproducibility.md)."""
    earlier = _JOBS.alias("earlier")
    mine = (
        select(earlier.c.id)
        .where(
            earlier.c.search_id == _JOBS.c.search_id,
            earlier.c.arch_id == _JOBS.c.arch_id,
            earlier.c.agent_id == agent_id,
            earlier.c.status == JobStatus.MEASURED,
        )
        .exists()
    )
    runnable = or_(*(and_(_SEARCHES.c.runtime == r, _SEARCHES.c.device == d) for r, d in others))
    return and_(_JOBS.c.round > 0, mine, runnable)


def _top_up(
    services: Services, agent_id: str
) -> tuple[bool, list[tuple[int, int]], list[int], str]:
    """Let every running search this agent could serve hear the results waiting for it
    (`server.services.arrivals`) and propose for the free slots (strategies without a
    generation barrier propose per free agent: this may be the one they have not proposed
    for yet). A search another process or thread is busy with is skipped, not waited for.
    Returns whether a job this agent can take is queued now, the searches whose engines this
    process's other threads hold (each with `EngineCache.rounds_written` before the look),
    and those whose proposal rounds run outside the write lock (`arrivals.rounds_outside`),
    left for the caller to settle and ask after this; and the agent's device class."""
    busy: list[tuple[int, int]] = []
    around: list[int] = []
    with services.store.write() as session:
        store = services.store
        agent = seen(session, agent_id, store.now(), store.settings.lease_seconds)
        query = select(SearchRow).where(_SERVABLE)
        if services.store.row_locks:
            query = query.with_for_update(**SEARCH_LOCK, **SKIP_LOCKED)
        params = _servable(session, agent)
        for search in session.scalars(query, params).all():
            if rounds_outside(search):
                around.append(search.id)
                continue
            written = services.engines.rounds_written(search.id)  # before the look
            lock = services.engines.lock(search.id)
            if not lock.acquire(blocking=False):
                busy.append((search.id, written))
                continue
            try:
                settle_in(services, session, search)
                advance(services, session, search)
            finally:
                lock.release()
        queued = session.scalar(_ANY_QUEUED, params) is not None
        return queued, busy, around, agent.device_class


def _terms(
    services: Services, session: Session, search_id: int, created_at: datetime
) -> dict[str, Any]:
    """What every lease of a search says besides the job itself, worked out once per search
    and process: a search's request never changes (keyed with its creation time too, should
    a deleted search's id be used again)."""
    key = (search_id, created_at)
    terms = services.lease_terms.get(key)
    if terms is None:
        search = session.get(SearchRow, search_id)
        request = search.parsed_request
        names = request.agent_proxies
        reference = reference_architecture(parse_space(request.space))
        terms = {
            "reference": ReferenceJob(
                arch_id=reference.arch_id,
                spec=reference.to_dict(),
                every_jobs=request.noise.reference_every_jobs,
                every_s=request.noise.reference_every_s,
            ),
            "busy_retries": request.noise.busy_retries,
            "proxies": ProxyRequest(names=names, inputs=request.proxy_inputs) if names else None,
            "settings": request.measurement,
        }
        if len(services.lease_terms) >= _TERMS_KEPT:
            services.lease_terms.clear()
        services.lease_terms[key] = terms
    return terms


_TERMS_KEPT = 10_000


def _job_and_search(
    session: Session, job_id: int, lease_id: str, lock: bool, tell: bool
) -> tuple[Row[Any], SearchRow]:
    """A job that a result under `lease_id` arrives for (`job_results.read_job`), and its
    search. With `lock` (PostgreSQL) the job's row is locked; where the search may be told in
    this transaction too (`tell`), the search's row before it, in one statement: writes that
    tell one search take turns. (A search whose rounds run outside the write lock is not
    told here, and its row is locked all the same: each statement of a result held the
    process's write lock about half a millisecond under load.)"""
    if not (lock and tell):
        return read_job_and_search(session, job_id, lease_id, lock)
    search = locked_search_of(session, job_id)
    return read_job(session, job_id, lease_id, lock=True), search


def heartbeat(store: Store, job_id: int, ref: LeaseRef, caller: Caller = TRUSTED) -> LeaseStatus:
    """Renew the lease. One that ran out is renewed too while nobody else took the job: the
    agent was only slow to say it is alive (a flaky network), and its work is not wasted."""
    with store.write_rows() as session:
        now = store.now()
        seen(session, ref.agent_id, now, store.settings.lease_seconds, caller)
        job = read_job(session, job_id, ref.lease_id, store.row_locks)
        if (
            job.status != JobStatus.RUNNING
            or job.lease_id != ref.lease_id
            or job.agent_id != ref.agent_id
        ):
            raise Conflict(
                f"job {job_id}: lease {ref.lease_id!r} is not held by agent {ref.agent_id!r} "
                f"(job is {job.status}); the lease expired and the job went back to the queue "
                "or to another agent"
            )
        expires = now + timedelta(seconds=store.settings.lease_seconds)
        renew(session, job_id, expires)
        return LeaseStatus(job_id=job_id, lease_expires_at=as_utc(expires))


def _missing_proxies(search: SearchRow, result: JobResult) -> str | None:
    """Why a measurement lacks the proxy values its search needs, or None."""
    if result.measurement is None:
        return None
    request = search.parsed_request
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


def _issued(job: Row[Any], ref: LeaseRef) -> bool:
    """Whether `ref` names a lease this server gave `ref.agent_id` for this job (`job`: as
    `job_results.read_job` reads it, with the lease `ref` names)."""
    if job.lease_job is not None:
        return job.lease_job == job.id and job.lease_agent == ref.agent_id
    # A lease issued before the lease log existed (a database from hwnas 0.1): only the
    # current one can be recognised.
    return job.lease_id == ref.lease_id and job.agent_id == ref.agent_id


def _admit(row: Row[Any], result: JobResult) -> bool:
    """Whether to record `result` for the job (`row`: as `job_results.read_job` reads it);
    False: it is a duplicate of the one recorded. Raises Conflict for a result that must be
    dropped, saying why."""
    job = row.id
    if not _issued(row, result):
        raise Conflict(
            f"job {job}: lease {result.lease_id!r} was never given to agent {result.agent_id!r} "
            "for this job"
        )
    if row.status in (JobStatus.MEASURED, JobStatus.FAILED):
        if row.result_lease_id == result.lease_id:
            return False
        raise Conflict(
            f"job {job} already has a result (it was measured under another lease after this "
            "one expired); this one is dropped so that the job counts once"
        )
    if row.status == JobStatus.CANCELLED:
        raise Conflict(f"job {job} was cancelled with its search; the result is dropped")
    current = row.status == JobStatus.RUNNING and row.lease_id == result.lease_id
    if not current and result.measurement is None:
        raise Conflict(
            f"job {job}: a failure reported after the lease expired is dropped; the job was "
            "given out again and will be tried again"
        )
    if not current:  # a late measurement: the job has none yet, so it counts
        log_event(
            "job.late_result",
            job_id=job,
            agent_id=result.agent_id,
            was=row.status,
            other_agent=row.agent_id if row.status == JobStatus.RUNNING else None,
        )
    return True


def report(
    services: Services,
    job_id: int,
    result: JobResult,
    caller: Caller = TRUSTED,
    claim_next: bool = False,
) -> tuple[ResultReceipt, int | None]:
    """`submit_result`, and with `claim_next` the agent's next job claimed after it and
    answered as the receipt's `next`: one request per job (a refused result raises first).
    A job already queued is taken in the result's own transaction; only when none is does
    the claim run, from asking the searches for more (`claim`, `looked`)."""
    receipt, search_id = submit_result(services, job_id, result, caller, take_next=claim_next)
    # Not first checked by a read, as an idle agent's poll is: under load, the claim's wait for
    # the write lock often outlasts a generation's last results, and finds the next one
    # (docs/benchmarks.md, "One transaction for a result and the next job").
    if claim_next and receipt.next is None:
        receipt.next = claim(services, result.agent_id, caller, looked=not receipt.duplicate)
    return receipt, search_id


def submit_result(
    services: Services,
    job_id: int,
    result: JobResult,
    caller: Caller = TRUSTED,
    take_next: bool = False,
) -> tuple[ResultReceipt, int | None]:
    """Record a job's measurement or failure, exactly once (see `_admit`), and let its search
    hear of it (`server.services.arrivals`): at once, in this transaction, where the
    strategy's proposal rounds are cheap and the store is SQLite; else afterwards. Returns the
    receipt and the search still to `settle`, or to ask again (`searches.ask_again`): None
    when it was told, or for a duplicate.

    On a PostgreSQL store that other server processes write to as well (`EngineCache.shared`)
    a result only arrives: its transaction locks the agent's row and then the job's, as a
    claim does, and runs beside other writes. Told at once, each result would hold its
    search's row for the telling (the row first, then the job), and the results of one search
    from all processes would take turns; told afterwards, one settle tells all that arrived
    meanwhile. A process alone is spared the second transaction.

    With `take_next`, a job queued for the agent after this result is leased to it in the
    same transaction and answered as the receipt's `next` (None: none was queued)."""
    store = services.store
    arrive_only = store.row_locks and services.engines.shared
    with store.write_rows() if arrive_only else store.write() as session:
        now = store.now()
        lease_seconds = store.settings.lease_seconds
        # Marked seen as its result is recorded (`finish`), in the same statement.
        agent = seen(session, result.agent_id, now, lease_seconds, caller, mark=False)
        job, search = _job_and_search(
            session, job_id, result.lease_id, store.row_locks, tell=not arrive_only
        )
        search_id = search.id  # still to settle, unless told here
        at_once = not arrive_only and not rounds_outside(search)
        if not _admit(job, result):
            mark_seen(session, agent, now, lease_seconds)
            return ResultReceipt(job_id=job_id, accepted=True, duplicate=True), None
        missing = _missing_proxies(search, result)
        if missing:  # an agent that cannot compute the search's proxy objective
            result = JobResult(
                agent_id=result.agent_id,
                lease_id=result.lease_id,
                failure=Failure(kind="error", message=missing),
            )
        measurement = None
        if result.measurement is not None:
            measured = result.measurement.model_dump(mode="json")
            measurement = measurement_columns(search, job.arch_id, agent, measured, now)
        changes = finish(session, job, result, measurement, now, write_job=not at_once)
        if at_once:  # the job's row written as its search is told: with its number
            row = finished_row(session, job, changes, measurement)
            if tell_now(services, session, search, row):
                search_id = None
            write_deferred(session)  # before any statement reads it (`_take`)
        else:
            arrive(session, search.id, job_id)
        taken = _take(services, session, agent) if take_next else None
    if search_id is None and services.engines.to_ask_later(job.search_id):
        # The cache answered the round this result asked for: the rounds after it are asked
        # once the answer has gone, with the settle (`searches.ask_again`).
        search_id = job.search_id
    log_event(
        "job.result",
        job_id=job_id,
        search_id=job.search_id,
        agent_id=result.agent_id,
        status=changes["status"],
        failure_kind=changes.get("failure_kind", job.failure_kind),
    )
    return ResultReceipt(job_id=job_id, accepted=True, next=taken), search_id
