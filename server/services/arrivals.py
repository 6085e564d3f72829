"""Results on their way to their search, and the search's proposals after each.

A result request records the measurement and leaves an `ArrivalRow`. Where the strategy's
proposal rounds are cheap, the request then tells the search in the same transaction
(`settle_in`). Otherwise telling waits until the answer has gone (the route's background
task: `settle`):
- where rounds are slow (`Engine.slow_rounds`: strategy hwnas screens a pool of offspring
  with fitted models, tens of milliseconds a round), each runs outside the store's write
  lock, so that claims and results go on meanwhile;
- on PostgreSQL, once another server process writes the store too (`EngineCache.shared`), a
  result does not wait for its search's row, and one settle tells all the results that
  arrived meanwhile, in one transaction. A settle that finds the search held by another
  process looks again shortly (`take_search`), without holding its own process's writes up.
A claim that finds nothing queued, and the app's schedule, tell what is left (a server that
stopped in between).

The engine hears of results in the order they arrived (the arrival ids), each told and then
followed by a proposal round, the same steps in the same order wherever the telling runs
(`_hear`, then `_record`): the same results in the same order give the same search, however
the telling was timed. Until then a result is pending to the engine
(`server.services.engines` reads a finished row without a result number as pending).
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import ColumnElement, bindparam, delete, insert, select
from sqlalchemy.orm import Session, lazyload

from archvocab.wire import SearchStatus
from search.engine import Engine
from search.records import Candidate
from search.strategies import ENGINES
from server.services import remeasure
from server.services.context import Services
from server.services.engines import measured_values
from server.services.searches import advance, ask_again, measuring_slots, recorded, write_round
from server.store.rows import ArrivalRow, CandidateRow, SearchRow
from server.store.store import get_search, take_search, write_deferred

log = logging.getLogger("hwnas.arrivals")


_ARRIVE = insert(ArrivalRow.__table__).values(
    search_id=bindparam("search"), job_id=bindparam("job")
)


def arrive(session: Session, search_id: int, job_id: int) -> None:
    """Leave a recorded result for its search to be told (`settle`)."""
    session.execute(_ARRIVE, {"search": search_id, "job": job_id})


def settle(services: Services, search_id: int, most: int | None = None, look: bool = True) -> int:
    """Tell the search the results that arrived for it, in order; returns how many.

    Where the strategy's proposal rounds are slow (`Engine.slow_rounds`: strategy hwnas
    screens a pool with fitted models, tens of milliseconds), each round runs outside the
    store's write lock, so that claims and results go on meanwhile (`_settle_around`);
    otherwise the results are told in one transaction. The search's engine lock keeps this
    process's other threads off the engine; a settle that finds it held leaves at once (it
    must not hold a worker thread waiting), since the holder looks again after letting go.
    One that finds the search's row held by another process (PostgreSQL) looks again after a
    pause, for that process may have read the arrivals before this one's committed.
    With `most` (a claim, which must answer soon), it tells at most that many (results keep
    arriving under load); the rest are left to their own settles and the schedule. Without
    `look` (the caller has just left an arrival) it skips the first read for waiting results.
    """
    told = 0
    turn = _Turn()
    while most is None or told < most:
        around = None  # not known before the search is read
        if look:
            with services.store.read() as session:  # under load, an earlier settle took all
                search = get_search(session, search_id)
                if not session.scalar(select(waiting_for(SearchRow.id == search_id))):
                    return told
                around = rounds_outside(search)
        look = True
        lock = services.engines.lock(search_id)
        if not lock.acquire(blocking=False):
            return told
        taken = True
        try:
            if not around:
                with services.store.write() as session:
                    search = take_search(session, search_id)
                    taken = search is not None
                    if not taken:
                        services.engines.held_elsewhere()
                    around = taken and rounds_outside(search)
                    if taken and not around:
                        told += settle_in(services, session, search)
            if around:
                told += _settle_around(services, search_id, None if most is None else most - told)
        finally:
            lock.release()
            # Claims that found the engine held wait for its round (`wait_round`): written,
            # or left to another process, they look again now, not after their timeout.
            services.engines.round_written(search_id)
        if not taken:
            # Another process is telling the search (PostgreSQL). It may have read the
            # arrivals before this one's committed: look again shortly, until they are told.
            if not turn.waited():
                return told  # left to the next result, a claim or the schedule
    return told


class _Turn:
    """Waiting for a search another process holds (PostgreSQL): a pause before each look
    again, doubling up to the last, until the patience runs out (the schedule tells what is
    left)."""

    PAUSE_S, PAUSE_MAX_S, PATIENCE_S = 0.002, 0.05, 10.0

    def __init__(self) -> None:
        self.pause, self.gives_up = self.PAUSE_S, time.monotonic() + self.PATIENCE_S

    def waited(self) -> bool:
        """Pause before the next look; False, without pausing, once patience has run out."""
        if time.monotonic() > self.gives_up:
            return False
        time.sleep(self.pause)
        self.pause = min(2 * self.pause, self.PAUSE_MAX_S)
        return True


def propose_round(services: Services, search_id: int) -> None:
    """A proposal round with no new result, for a search whose rounds run outside the write
    lock (a claim found nothing queued: an agent may have come online, a free slot): asked
    outside the lock, written if nothing moved the search meanwhile. Leaves at once when
    another thread holds the engine (its round will propose)."""
    lock = services.engines.lock(search_id)
    if not lock.acquire(blocking=False):
        return
    try:
        with services.store.write() as session:
            search = take_search(session, search_id)
            if search is None:  # another process holds it, and proposes meanwhile
                services.engines.held_elsewhere()
                return
            engine, slots = _engine(services, session, search)
            revision = search.revision
        if engine is None:
            return
        if engine.finished:  # what its re-measurements are chosen from, off the lock
            remeasure.ready_table(services, search_id)
        try:
            write_round(services, search_id, engine, engine.ask(slots), slots, revision)
        except BaseException:
            services.engines.drop(search_id)  # it proposed what no row says
            raise
    finally:
        lock.release()
    ask_again(services)


def rounds_outside(search: SearchRow) -> bool:
    """Whether the search's proposal rounds run outside the store's write lock: a running
    search whose strategy's rounds are slow (`Engine.slow_rounds`)."""
    running = search.status == SearchStatus.RUNNING
    return running and ENGINES[search.parsed_request.strategy].slow_rounds


def _settle_around(services: Services, search_id: int, most: int | None) -> int:
    """`settle` with each proposal round outside the write lock: a result is heard (told and
    asked) between transactions, and the next transaction writes its number and proposals
    together, if nothing moved the search meanwhile (another process, a cancel); else the
    engine, which heard what the rows do not say, is dropped and the result told again from
    the rows. Each transaction also takes the next result to hear, up to `most` told."""
    told = 0
    heard: tuple[int, int, Engine | None, list[Candidate] | None, int] | None = None
    turn = _Turn()
    try:
        while True:
            written, rest = False, None
            with services.store.write() as session:
                search = take_search(session, search_id)
                if search is not None:
                    if heard is not None:
                        rest = _write_heard(services, session, search, *heard)
                        written = rest is not None
                        if written:
                            told += 1
                            rest_of = heard[2], heard[4]  # its engine and slots
                        else:
                            services.engines.drop(search_id)  # told again, from the rows
                        heard = None
                    done = (most is not None and told >= most) or bool(rest)
                    arrival = None if done else _next(session, search)
                    if arrival is not None:
                        row = session.get(CandidateRow, arrival.job_id)
                        engine, slots = _engine(services, session, search)
                        revision, arrival_id = search.revision, arrival.id
            if search is None:  # another process holds the search (PostgreSQL): as in settle
                services.engines.held_elsewhere()
                if turn.waited():
                    continue
                if heard is not None:
                    services.engines.drop(search_id)  # it heard what no row says
                return told
            if written:  # committed: claims waiting for its proposals may take them
                services.engines.round_written(search_id)
            if rest:  # proposals left for transactions of their own (`advance`)
                try:
                    write_round(services, search_id, rest_of[0], rest, rest_of[1], search.revision)
                except BaseException:
                    services.engines.drop(search_id)  # it proposed what no row says
                    raise
                continue
            if arrival is None:
                return told
            asked = _hear(engine, row, slots)  # the costly part, outside the write lock
            heard = (arrival_id, revision, engine, asked, slots)
    except BaseException:
        if heard is not None:
            services.engines.drop(search_id)  # it heard what no row says
        raise


def _write_heard(
    services: Services,
    session: Session,
    search: SearchRow,
    arrival_id: int,
    revision: int,
    engine: Engine | None,
    asked: list[Candidate] | None,
    slots: int,
) -> list[Candidate] | None:
    """Write a result heard outside the lock, and as much of its proposals as one part holds
    (`advance`): returns the rest, for the caller to write after this transaction; None
    when the search moved on meanwhile."""
    arrival = session.get(ArrivalRow, arrival_id)
    if arrival is None or search.revision != revision:
        return None
    if engine is not None and services.engines.get(session, search) is not engine:
        return None  # another thread's rollback dropped it
    row = session.get(CandidateRow, arrival.job_id)
    session.delete(arrival)
    return _record(services, session, search, row, engine, asked, slots, in_parts=True)


def settle_after_answer(services: Services, search_id: int) -> None:
    """`settle`, run once a result's answer has gone: a failure is logged, not raised (the
    agent has its receipt), and the results stay for the next claim or the schedule."""
    try:
        settle(services, search_id, look=False)
        ask_again(services)
    except Exception:
        log.exception("search %s: telling it of new results failed; a claim will", search_id)


def settle_waiting(services: Services) -> int:
    """Settle every search with results waiting (the app's schedule: results a stopped server
    or a failed settle left, for searches no claim reaches); returns how many results."""
    with services.store.read() as session:
        searches = session.scalars(select(ArrivalRow.search_id).distinct()).all()
    told = sum(settle(services, search_id) for search_id in searches)
    ask_again(services)
    return told


# The arrivals of a search, taken (built once: every result told at once runs it).
_ARRIVALS = ArrivalRow.__table__
_TAKE_ARRIVALS = (
    delete(_ARRIVALS)
    .where(_ARRIVALS.c.search_id == bindparam("search"))
    .returning(_ARRIVALS.c.id, _ARRIVALS.c.job_id)
)


def settle_in(services: Services, session: Session, search: SearchRow) -> int:
    """`settle` inside the caller's write transaction, the search's row locked and its engine
    lock held (a claim that found nothing queued, a result told at once)."""
    with session.no_autoflush:  # nothing this transaction holds unflushed is an arrival
        waiting = sorted(session.execute(_TAKE_ARRIVALS, {"search": search.id}).all())
    if not waiting:
        return 0
    write_deferred(session)  # a result's job finished (`defer_columns`), before rows are read
    query = select(CandidateRow).where(CandidateRow.id.in_([job for _, job in waiting]))
    query = query.options(lazyload(CandidateRow.architecture))  # a result has no use for it
    rows = {row.id: row for row in session.scalars(query)}
    for _, job_id in waiting:
        _tell(services, session, search, rows[job_id])
    return len(waiting)


def tell_now(services: Services, session: Session, search: SearchRow, row: CandidateRow) -> bool:
    """Tell the search a result just recorded, in the caller's write transaction (the search's
    row locked), after any that arrived before it; False, and the result left to arrive,
    when another thread holds the search's engine (its settle tells it)."""
    lock = services.engines.lock(search.id)
    if not lock.acquire(blocking=False):
        arrive(session, search.id, row.id)
        return False
    try:
        settle_in(services, session, search)
        _tell(services, session, search, row)
    finally:
        lock.release()
    return True


def _tell(services: Services, session: Session, search: SearchRow, row: CandidateRow) -> None:
    """`_hear` and `_record` in the caller's write transaction: the engine is asked by
    `advance`, which leaves a round that may be large to be asked after the transaction."""
    engine, slots = _engine(services, session, search)
    _told(engine, row)
    _record(services, session, search, row, engine, None, slots)


def _next(session: Session, search: SearchRow) -> ArrivalRow | None:
    query = select(ArrivalRow).where(ArrivalRow.search_id == search.id)
    return session.scalars(query.order_by(ArrivalRow.id).limit(1)).first()


def _engine(services: Services, session: Session, search: SearchRow) -> tuple[Engine | None, int]:
    """The running search's engine and measuring slots; (None, 0) for a search that stopped."""
    if search.status != SearchStatus.RUNNING:
        return None, 0
    slots = measuring_slots(services, session, search.device_class)
    return services.engines.get(session, search), slots


def _hear(engine: Engine | None, row: CandidateRow, slots: int) -> list[Candidate] | None:
    """The engine's side of a result, in this order wherever it runs: told (a first
    measurement), then asked for its next proposals."""
    if engine is None:
        return None
    _told(engine, row)
    # A finished engine proposes nothing: `advance` then chooses re-measurements, from a
    # result table it first brings up to date off the write lock (`remeasure.chooses`).
    return None if engine.finished else engine.ask(slots)


def _told(engine: Engine | None, row: CandidateRow) -> None:
    """The engine told a result: a first measurement's, not a re-measurement's."""
    if engine is not None and row.round == 0:
        engine.tell(row.arch_id, measured_values(row))


def _record(
    services: Services,
    session: Session,
    search: SearchRow,
    row: CandidateRow,
    engine: Engine | None,
    asked: list[Candidate] | None,
    slots: int,
    in_parts: bool = False,
) -> list[Candidate]:
    """The rows' side: the result numbered, the proposals queued (`in_parts`: as much of them
    as one part holds, and the rest returned: `advance`)."""
    recorded(services, session, search, row, engine)
    if engine is None:
        return []
    return advance(services, session, search, asked, slots, in_parts)


def waiting_for(searches: ColumnElement[bool]) -> ColumnElement[bool]:
    """Whether a result waits for any of the searches `searches` selects."""
    searches_table = SearchRow.__table__
    return (
        select(_ARRIVALS.c.id)
        .join(searches_table, searches_table.c.id == _ARRIVALS.c.search_id)
        .where(searches)
        .exists()
    )
