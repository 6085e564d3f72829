"""Telling frontier points apart: the re-measurements a search queues before it finishes.

When the engine has spent the budget, some frontier points may still be within the noise of
each other (one `frontier_group` holding several points). Each such point is measured again
as a job of its own (a candidate row of round k > 0: claimed, leased and reported exactly
once like any job, in a new process, by another agent of the class while one is online:
`server.services.jobs`), and its values become the geometric mean of its quiet measurements, whose
interval narrows with each one (`search.noise`). This goes on, a batch of free slots at a
time, until every group has one member, every grouped point has `max_measurements`, or
`remeasure_share` of the budget is spent; then the search finishes. The engine never hears
of re-measurements: the proposals are what they would have been.
"""

from __future__ import annotations

import heapq
from datetime import datetime
from itertools import islice

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from archvocab.wire import JobStatus, SearchCreate, SearchStatus
from server.services.context import Services
from server.services.events import log_event
from server.services.quality import last_result
from server.services.result_tables import ResultTables
from server.services.results import ResultTable
from server.store.rows import CandidateRow, SearchRow
from server.store.store import get_search, insert_rows


def remeasure_budget(request: SearchCreate) -> int:
    """How many re-measurements a search may spend: its share of the budget."""
    return int(request.noise.remeasure_share * request.budget.max_evaluations)


# Within this share of its budget from the end, a search that re-measures keeps its result
# table built in each process (`keep_tables_ready`, on the sweep's schedule), so that the
# re-measurements its last results queue inside their write transactions find it made:
# built there, it held the write lock for 1.5-2.2 s at 20,000 results.
READY_SHARE = 0.1


def keep_tables_ready(services: Services) -> list[int]:
    """Build, or bring up to date, the result tables of the running searches that re-measure
    and are within READY_SHARE of their budget; their ids. Reads only."""
    ready = []
    with services.store.read() as session:
        running = select(SearchRow).where(SearchRow.status == SearchStatus.RUNNING)
        for search in session.scalars(running).all():
            request = search.parsed_request
            if remeasure_budget(request) <= 0:
                continue
            told = last_result(session, search.id)
            if told >= (1 - READY_SHARE) * request.budget.max_evaluations:
                services.results.get(session, search)
                ready.append(search.id)
    return ready


def chooses(session: Session, search: SearchRow) -> bool:
    """Whether `queue` would choose re-measurements now, from the search's result table
    brought up to date in its transaction: none is queued or running, and the budget has some
    left. Bringing it up to date may refit the noise model and rebuild the frontier (250-270
    ms at 20,000 results), so a caller holding the write lock first does it in a read
    (`ready_table`)."""
    measuring, spent = _spent(session, search)
    return not measuring and remeasure_budget(search.parsed_request) > spent


# A table at most this many results behind is brought up to date in a write transaction: a
# few results read in, against every row read when the table is built.
AT_HAND = 50


def table_at_hand(services: Services, session: Session, search: SearchRow) -> bool:
    """Whether this process keeps the search's result table at most `AT_HAND` results behind,
    so that `queue` may bring it up to date holding the write lock. Built there, the table of
    a search the measurement cache replayed whole held it 154-168 ms at 1,000 results and
    534 ms at 5,000 (docs/benchmarks.md, "A replayed search's table off the write lock")."""
    last = services.engines.last_numbered(search)
    if last is None:
        last = last_result(session, search.id)
    behind = services.results.behind(search, last)
    return behind is not None and behind <= AT_HAND


def ready_table(services: Services, search_id: int) -> None:
    """Bring the search's result table up to date in a read, off the write lock: the
    transaction that then queues its re-measurements (`queue`) finds it so."""
    with services.store.read() as session:
        services.results.get(session, get_search(session, search_id))


_JOBS = CandidateRow.__table__
# The statements `queue` runs in a write transaction, built once: building them there, and
# the keys that find them compiled, took a quarter of its time under cProfile (issue 20).
_AGAIN_BY_STATUS = (
    select(_JOBS.c.status, func.count())
    .where(_JOBS.c.search_id == bindparam("search"), _JOBS.c.round > 0)
    .group_by(_JOBS.c.status)
)
_PICKED = (
    _JOBS.c.search_id == bindparam("search"),
    _JOBS.c.arch_id.in_(bindparam("picks", expanding=True)),
)
_LAST_ROUNDS = (
    select(_JOBS.c.arch_id, func.max(_JOBS.c.round)).where(*_PICKED).group_by(_JOBS.c.arch_id)
)
_GENERATIONS = select(_JOBS.c.arch_id, _JOBS.c.generation).where(*_PICKED, _JOBS.c.round == 0)


def _spent(session: Session, search: SearchRow) -> tuple[bool, int]:
    """Whether a re-measurement of the search is queued or running, and how many of the
    budget are spent."""
    rows = session.execute(_AGAIN_BY_STATUS, {"search": search.id}).all()
    by_status = dict(rows)
    measuring = by_status.get(JobStatus.QUEUED, 0) + by_status.get(JobStatus.RUNNING, 0) > 0
    return measuring, sum(n for status, n in rows if status != JobStatus.CANCELLED)


def queue(
    results: ResultTables, session: Session, search: SearchRow, slots: int, now: datetime
) -> tuple[bool, int]:
    """Queue up to `slots` re-measurements of frontier points the noise cannot tell apart.
    Returns whether the search has any queued or running (it must not finish yet), and how
    many this call queued."""
    request = search.parsed_request
    measuring, spent = _spent(session, search)
    if measuring:
        return True, 0
    left = remeasure_budget(request) - spent
    if left <= 0:
        return False, 0
    picks = choose(results.get(session, search), request.noise.max_measurements, min(left, slots))
    if not picks:
        return False, 0
    picked = {"search": search.id, "picks": picks}
    rounds = dict(session.execute(_LAST_ROUNDS, picked).all())
    first = dict(session.execute(_GENERATIONS, picked).all())
    insert_rows(
        session,
        _JOBS,
        [
            {
                "search_id": search.id,
                "arch_id": arch,
                "round": rounds[arch] + 1,
                "generation": first[arch],
                "status": JobStatus.QUEUED,
                "queued_at": now,
                "attempts": 0,
                "reused": False,
            }
            for arch in picks
        ],
    )
    log_event("search.remeasure", search_id=search.id, queued=len(picks), spent=spent)
    return True, len(picks)


def choose(table: ResultTable, max_measurements: int, most: int | None = None) -> list[str]:
    """Frontier points in a group of several, fewest measurements first (then the order they
    were told), each below `max_measurements`; the first `most` of them."""
    crowded = table.crowded()  # in the order told
    uncertainty = table.uncertainty  # (a member another reader's update just left: skipped)
    remeasured = table.remeasured
    again = {t.arch_id: t.seq for t in crowded if t.arch_id in remeasured}
    more = sorted(
        (u.measurements, seq, arch)
        for arch, seq in again.items()
        if (u := uncertainty.get(arch)) and u.measurements < max_measurements
    )
    # A member never measured again was measured once, quietly (else it would not rank).
    once = (
        ((1, t.seq, t.arch_id) for t in crowded if t.arch_id not in again)
        if max_measurements > 1
        else iter(())
    )
    return [arch for _, _, arch in islice(heapq.merge(more, once), most)]
