"""Results on their way to their search: recorded by the result request, told afterwards.

A result request only checks and stores the measurement and leaves an `ArrivalRow`; telling
the search's engine and letting it propose (`settle`) costs far more (the strategy's
screening, the frontier, the hypervolume) and runs after the answer has gone (the route's
background task), or in the next claim that finds nothing queued (a server that stopped in
between leaves the arrivals for that claim).

The engine hears of results in the order they arrived (the arrival ids), each followed by a
proposal round, as when the request did both: the same results in the same order give the
same search, however the settling was timed. Until then the result is pending to the engine
(`server.services.engines` reads a finished row without a result number as pending).
"""

from __future__ import annotations

import logging

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from archvocab.wire import SearchStatus
from server.services.context import Services
from server.services.searches import advance, tell
from server.store.rows import ArrivalRow, CandidateRow, SearchRow
from server.store.store import get_search

log = logging.getLogger("hwnas.arrivals")


def arrive(session: Session, search: SearchRow, row: CandidateRow) -> None:
    """Leave a recorded result for its search to be told (`settle`)."""
    session.add(ArrivalRow(search_id=search.id, job_id=row.id))


def settle(services: Services, search_id: int) -> int:
    """Tell the search the results that arrived for it, in order; returns how many."""
    with services.store.read() as session:  # under load, an earlier settle took them all
        if not session.scalar(select(waiting_for(SearchRow.id == search_id))):
            return 0
    with services.store.write() as session:
        return settle_in(services, session, get_search(session, search_id, lock=True))


def settle_after_answer(services: Services, search_id: int) -> None:
    """`settle`, run once a result's answer has gone: a failure is logged, not raised (the
    agent has its receipt), and the results stay for the next claim or the schedule."""
    try:
        settle(services, search_id)
    except Exception:
        log.exception("search %s: telling it of new results failed; a claim will", search_id)


def settle_waiting(services: Services) -> int:
    """Settle every search with results waiting (the app's schedule: results a stopped server
    or a failed settle left, for searches no claim reaches); returns how many results."""
    with services.store.read() as session:
        searches = session.scalars(select(ArrivalRow.search_id).distinct()).all()
    return sum(settle(services, search_id) for search_id in searches)


def settle_in(services: Services, session: Session, search: SearchRow) -> int:
    """`settle` inside the caller's write transaction, the search's row locked."""
    waiting = session.scalars(
        select(ArrivalRow).where(ArrivalRow.search_id == search.id).order_by(ArrivalRow.id)
    ).all()
    for arrival in waiting:
        row = session.get(CandidateRow, arrival.job_id)
        session.delete(arrival)
        running = search.status == SearchStatus.RUNNING
        engine = services.engines.get(session, search) if running else None
        tell(services, session, search, row, engine)
        if engine is not None:
            advance(services, session, search)
    if waiting:
        session.flush()
    return len(waiting)


def waiting_for(searches: ColumnElement[bool]) -> ColumnElement[bool]:
    """Whether a result waits for any of the searches `searches` selects."""
    return (
        select(ArrivalRow.id)
        .join(SearchRow, SearchRow.id == ArrivalRow.search_id)
        .where(searches)
        .exists()
    )
