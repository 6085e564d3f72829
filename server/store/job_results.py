"""A job's result in rows, as a few statements built once and bound per result: building a
statement, loading rows into the session and the unit of work's flush cost more than running
the statements (issue 20). The job is read with the lease its result names (`read_job`), the
measurement inserted and the job finished (`finish`), the agent's counter moved; the job
finished is handed to the search's telling as a session row without a read (`finished_row`),
its finish written with the number telling gives it, in one statement.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Row, bindparam, insert, select, update
from sqlalchemy.orm import Session, make_transient_to_detached
from sqlalchemy.orm.attributes import set_committed_value

from archvocab.wire import JobResult, JobStatus
from server.errors import NotFound
from server.store.rows import AgentRow, CandidateRow, LeaseRow, MeasurementRow, SearchRow
from server.store.store import SEARCH_LOCK, defer_columns

T = TypeVar("T")

_JOBS = CandidateRow.__table__
_LEASES = LeaseRow.__table__
_AGENTS = AgentRow.__table__
_SEARCHES = SearchRow.__table__

# The job's columns and, beside them, the lease a result names, whichever job it was given
# for (None: no such lease); `lease_job` is never None for a lease that exists.
_JOB_COLUMNS = (
    _JOBS,
    _LEASES.c.job_id.label("lease_job"),
    _LEASES.c.agent_id.label("lease_agent"),
)
_WITH_LEASE = _JOBS.outerjoin(_LEASES, _LEASES.c.id == bindparam("lease"))
_THE_JOB = _JOBS.c.id == bindparam("job")
_JOB = select(*_JOB_COLUMNS).select_from(_WITH_LEASE).where(_THE_JOB)
_JOB_LOCKED = _JOB.with_for_update(of=_JOBS)
# The same with its search's columns (as `search__<column>`), where its row is not locked.
_SEARCH_COLUMNS = [c.label(f"search__{c.key}") for c in _SEARCHES.columns]
_JOB_AND_SEARCH = (
    select(*_JOB_COLUMNS, *_SEARCH_COLUMNS)
    .select_from(_WITH_LEASE.join(_SEARCHES, _SEARCHES.c.id == _JOBS.c.search_id))
    .where(_THE_JOB)
)
_JOB_AND_SEARCH_LOCKED = _JOB_AND_SEARCH.with_for_update(of=_JOBS)
_SEARCH_OF = select(_JOBS.c.search_id).where(_JOBS.c.id == bindparam("job"))
# The job's search as a row of the session, its row locked as `store.get_search` locks it.
_SEARCH_OF_JOB_LOCKED = (
    select(SearchRow)
    .where(SearchRow.id == _SEARCH_OF.scalar_subquery())
    .with_for_update(**SEARCH_LOCK)
    .execution_options(populate_existing=True)
)

_MEASUREMENT = insert(MeasurementRow.__table__)
_ENDED = {
    "lease_id": None,
    "lease_expires_at": None,
    "finished_at": bindparam("now"),
    "agent_id": bindparam("agent"),
    "result_lease_id": bindparam("lease"),
}
_MEASURED = (
    update(_JOBS)
    .where(_JOBS.c.id == bindparam("job"))
    .values(**_ENDED, status=JobStatus.MEASURED, measurement_id=bindparam("measurement"))
)
_FAILED = (
    update(_JOBS)
    .where(_JOBS.c.id == bindparam("job"))
    .values(
        **_ENDED,
        status=JobStatus.FAILED,
        failure_kind=bindparam("kind"),
        failure_message=bindparam("message"),
    )
)
# The agent's count moved, and the agent marked seen with it: a result's request does not
# mark it on its own (server.services.agents.seen, `mark`), which took a statement of its own
# in most results (an agent's results come further apart than the marks' resolution).
_COUNT_MEASURED = (
    update(_AGENTS)
    .where(_AGENTS.c.id == bindparam("agent"))
    .values(jobs_done=_AGENTS.c.jobs_done + 1, last_seen_at=bindparam("now"))
)
_COUNT_FAILED = (
    update(_AGENTS)
    .where(_AGENTS.c.id == bindparam("agent"))
    .values(failures=_AGENTS.c.failures + 1, last_seen_at=bindparam("now"))
)
# PostgreSQL: the agent's count moved by the measurement's insert, one round trip instead of
# two (each held the process's write lock about half a millisecond under load). The insert's
# parameters are named apart (`m_<column>`): a parameter named as a column of the agents (its
# fingerprint_key) would be set by the count's UPDATE too.
_MEASURED_COLUMNS = [c for c in MeasurementRow.__table__.columns if not c.primary_key]
_MEASUREMENT_COUNTED = (
    insert(MeasurementRow.__table__)
    .values({c.key: bindparam(f"m_{c.key}", type_=c.type) for c in _MEASURED_COLUMNS})
    .add_cte(_COUNT_MEASURED.returning(_AGENTS.c.id).cte("counted"))
    .returning(MeasurementRow.__table__.c.id)
)
_RENEW = (
    update(_JOBS)
    .where(_JOBS.c.id == bindparam("job"))
    .values(lease_expires_at=bindparam("expires"))
)


def read_job(session: Session, job_id: int, lease_id: str | None, lock: bool) -> Row[Any]:
    """The job's columns, with `lease_job` and `lease_agent` of the lease `lease_id` (None
    when no such lease was issued); with `lock` (PostgreSQL) the job's row is locked."""
    job = session.execute(_JOB_LOCKED if lock else _JOB, {"job": job_id, "lease": lease_id}).first()
    if job is None:
        raise NotFound("job", job_id)
    return job


def read_job_and_search(
    session: Session, job_id: int, lease_id: str | None, lock: bool
) -> tuple[Row[Any], SearchRow]:
    """`read_job`, and the job's search as a row of `session` (`as_loaded`), in one
    statement; with `lock` only the job's row is locked."""
    query = _JOB_AND_SEARCH_LOCKED if lock else _JOB_AND_SEARCH
    job = session.execute(query, {"job": job_id, "lease": lease_id}).first()
    if job is None:
        raise NotFound("job", job_id)
    columns = job._mapping
    search = {c.key: columns[f"search__{c.key}"] for c in _SEARCHES.columns}
    return job, as_loaded(session, SearchRow, search)


def locked_search_of(session: Session, job_id: int) -> SearchRow:
    """The search the job belongs to, its row locked until the transaction ends (PostgreSQL),
    in one statement."""
    search = session.scalars(_SEARCH_OF_JOB_LOCKED, {"job": job_id}).first()
    if search is None:
        raise NotFound("job", job_id)
    return search


def renew(session: Session, job_id: int, expires: datetime) -> None:
    session.execute(_RENEW, {"job": job_id, "expires": expires})


def finish(
    session: Session,
    job: Row[Any],
    result: JobResult,
    measurement: dict[str, Any] | None,
    now: datetime,
    write_job: bool = True,
) -> dict[str, Any]:
    """Record the result admitted for `job`: `measurement` (its row's columns, the id left to
    the database; None for a failure) inserted, the job finished, the agent's count moved
    and the agent marked seen `now`.
    Returns the job's columns that changed, the measurement's id among them. Without
    `write_job` they are left to the caller (`finished_row`)."""
    ended = {"job": job.id, "now": now, "agent": result.agent_id, "lease": result.lease_id}
    changes: dict[str, Any] = {
        "lease_id": None,
        "lease_expires_at": None,
        "finished_at": now,
        "agent_id": result.agent_id,
        "result_lease_id": result.lease_id,
    }
    if measurement is not None:
        if session.get_bind().dialect.name == "postgresql":
            counted = {f"m_{c.key}": measurement[c.key] for c in _MEASURED_COLUMNS}
            counted.update(agent=result.agent_id, now=now)
            measurement["id"] = session.execute(_MEASUREMENT_COUNTED, counted).scalar_one()
        else:
            inserted = session.execute(_MEASUREMENT, measurement).inserted_primary_key
            measurement["id"] = inserted[0]
            session.execute(_COUNT_MEASURED, {"agent": result.agent_id, "now": now})
        if write_job:
            session.execute(_MEASURED, {**ended, "measurement": measurement["id"]})
        changes.update(status=JobStatus.MEASURED, measurement_id=measurement["id"])
    else:
        failure = result.failure
        assert failure is not None
        failed = {"kind": failure.kind, "message": failure.message}
        if write_job:
            session.execute(_FAILED, {**ended, **failed})
        session.execute(_COUNT_FAILED, {"agent": result.agent_id, "now": now})
        changes.update(status=JobStatus.FAILED, failure_kind=failure.kind)
        changes["failure_message"] = failure.message
    return changes


_COLUMNS = [c.key for c in _JOBS.columns]


def finished_row(
    session: Session,
    job: Row[Any],
    changes: dict[str, Any],
    measurement: dict[str, Any] | None,
) -> CandidateRow:
    """The finished job as a row of `session`, as if read after `finish` (`job`'s columns
    with `changes`, its measurement with it): what telling its search reads, and where it
    writes the result's number and hypervolume. `changes`, which `finish` left unwritten,
    are written with those, in one statement (`defer_columns`). Its architecture, which
    telling has no use for, loads only if asked for."""
    columns = job._mapping
    measured = None if measurement is None else as_loaded(session, MeasurementRow, measurement)
    row = _added(session, CandidateRow(**{key: columns[key] for key in _COLUMNS}))
    set_committed_value(row, "measurement", measured)
    defer_columns(session, row, **changes)
    return row


def as_loaded(session: Session, cls: type[T], columns: dict[str, Any]) -> T:
    """A row of `session` built from all its columns, as if the session had read it: the
    unit of work writes what changes on it afterwards, as on any row, without the read."""
    return _added(session, cls(**columns))


def _added(session: Session, row: T) -> T:
    """`row` (transient, every column set) added to `session` as a row read from it."""
    make_transient_to_detached(row)
    session.add(row)  # raises if the session holds another row of this key
    return row
