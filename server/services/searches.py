"""The user-facing search service: create, read, cancel. Wires the engine to the store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from time import sleep
from typing import Any, NamedTuple

from sqlalchemy import case, func, select, update
from sqlalchemy.orm import Session

from archvocab.wire import (
    CandidateInfo,
    HypervolumeTrace,
    JobStatus,
    SearchCreate,
    SearchInfo,
    SearchStatus,
)
from search.engine import Engine
from search.records import Candidate
from server.services import availability, quality, remeasure
from server.services.availability import Fleet
from server.services.context import Services
from server.services.engines import measured_values
from server.services.events import log_event
from server.services.results import FrontierPoint
from server.services.turns import short_turns
from server.services.views import Census, candidate_info, search_info
from server.store.proposals import enqueue
from server.store.rows import AgentRow, CandidateRow, SearchRow
from server.store.store import get_search, take_search, write_columns


def create_search(
    services: Services, request: SearchCreate, server_url: str | None = None
) -> SearchInfo:
    """Start a search. Its answer warns at once when no agent of its device class has ever
    registered (server.services.availability); `server_url` goes into the command it names.
    Its first round is written here; if the measurement cache answered it, the rounds after
    are asked by `ask_again`, which the route runs once its answer has gone: a search of
    5,000 the cache held whole took 16 s to answer otherwise (docs/benchmarks.md, "A
    replayed search's table off the write lock")."""
    # A pure function of the request: sampling the space for it held the write lock 21-26 ms
    # (docs/benchmarks.md, "A replayed search's table off the write lock").
    normalisation = quality.initial_normalisation(request)
    lock = None
    try:
        with services.store.write() as session:
            search = SearchRow(
                name=request.name,
                status=SearchStatus.RUNNING,
                device_class=request.device_class,
                runtime=request.measurement.runtime,
                device=request.measurement.device,
                request=request.model_dump(mode="json"),
                created_at=services.store.now(),
                normalisation=normalisation,
                revision=0,
            )
            session.add(search)
            session.flush()
            engine = services.engines.new(search, request, quality.normaliser(search))
            slots = measuring_slots(services, session, search.device_class)
            search_id = search.id
            # Held before anyone can see the search: a claim leaves it alone until it has
            # its first proposals (server.services.jobs).
            lock = services.engines.lock(search_id)
            lock.acquire()
        _first_round(services, search_id, engine, slots)
    finally:
        if lock is not None:
            lock.release()
    log_event(
        "search.created",
        search_id=search_id,
        strategy=request.strategy,
        device_class=request.device_class,
        budget=request.budget.max_evaluations,
    )
    return get_search_info(services, search_id, server_url)


def _first_round(services: Services, search_id: int, engine: Engine, slots: int) -> None:
    """A new search's first proposals, asked for outside the store's write lock (a first
    generation of the largest population takes seconds), then written; a search whose first
    round fails is removed, as if never created."""
    try:
        asked = ask(engine, slots)
    except Exception:
        services.engines.drop(search_id)
        with services.store.write() as session:
            session.delete(get_search(session, search_id, lock=True))
        raise
    write_round(services, search_id, engine, asked, slots, revision=0)


# A round's proposals are written this many to a transaction, so that others' requests get
# in between: while a first generation of 10,000 was written, registrations waited 2.3 s at
# worst in one transaction, 11-13 ms at the median 500 to one, and 3-4 ms 50 to one
# (bench/create_blocking.py; docs/benchmarks.md, "A large first generation in small parts").
ROUND_CHUNK = 50
# ... and at most this many that the measurement cache holds: each is told to the engine at
# once, about 0.5 ms apiece against 0.03 for writing a proposal (`_tell_cached`). Parts of 8 held
# the write lock 12-19 ms at the p90 of a replay, parts of 4 10-14 ms for a replay about a
# tenth longer; parts of 2 gave 10 ms for a replay a quarter longer (docs/benchmarks.md,
# "Checkpoints off the write lock; a replay's parts of 4").
REUSED_CHUNK = 4
# A round of at most this many is asked for in the transaction that made it due (the result
# that completed a generation, a claim): breeding and writing it hold the write lock about 20
# ms. A larger one is asked for after it (`ask_again`): the next generation of the largest
# population, 20,000, held the lock 1.5 s. A small one stays in the transaction as before:
# asked after it, it would wait behind the threads the transaction let in, and the first
# load runs that asked every generation after it looked worse (claim p99 65-140 ms against
# 40), though they compared code served two ways (docs/benchmarks.md, "Generations off the
# result's transaction").
ROUND_IN_TRANSACTION = 100
# What a round written in parts sleeps between them (`write_round`): a 10,000 first generation
# takes 0.05 s longer.
_BETWEEN_PARTS_S = 0.0002


def ask(engine: Engine, slots: int) -> list[Candidate]:
    """`engine.ask(slots)` outside the write lock; while it proposes a round larger than
    `ROUND_IN_TRANSACTION`, threads take short turns at the interpreter, so that the
    requests served meanwhile are not kept waiting for it (server.services.turns)."""
    if engine.most_asked(slots) <= ROUND_IN_TRANSACTION:
        return engine.ask(slots)
    with short_turns():
        return engine.ask(slots)


def write_round(
    services: Services,
    search_id: int,
    engine: Engine,
    asked: list[Candidate],
    slots: int,
    revision: int,
) -> bool:
    """Write the proposals `engine` made outside the write lock for `slots`, in parts
    (`advance`), while the search is still at the revision the last one left and this
    engine is still its engine; else the round is void (a cancel, another process) and the
    engine, which holds proposals no row has, is dropped. The caller holds the search's
    engine lock. Claims waiting for a round hear of each part (`EngineCache.wait_round`):
    they may take what is written already."""
    while True:
        with services.store.write() as session:
            search = get_search(session, search_id, lock=True)
            current = services.engines.get(session, search) if search.revision == revision else None
            if current is not engine:
                services.engines.drop(search_id)
                return False
            asked = advance(services, session, search, asked, slots, in_parts=True)
            revision = search.revision
        services.engines.round_written(search_id)
        if not asked:
            return True
        # A thread woken for the write lock must get a core before this one takes the lock
        # again, or it waits out the next part too: requests waited up to 30-100 ms for parts
        # of 2 ms (docs/benchmarks.md, "The largest create lets others in between its parts").
        sleep(_BETWEEN_PARTS_S)


def _enqueue(
    services: Services,
    session: Session,
    search: SearchRow,
    engine: Engine,
    batch: list[Candidate],
    most_reused: int | None,
) -> tuple[int, int]:
    """Persist the engine's proposals, at most `most_reused` of them reused (`enqueue`); those
    the measurement cache has are told at once. Returns how many were written, and how many
    of those were told. Where the strategy fell back on a simpler rule to propose them, the
    search's events say why."""
    for reason in engine.take_fallbacks():
        log_event("search.fallback", search_id=search.id, strategy=engine.strategy, reason=reason)
    written, reused = enqueue(session, search, batch, services.store.now(), most_reused)
    services.work.queued(search.device_class, written - len(reused))
    if reused:
        _tell_cached(services, session, search, reused, engine)  # a new revision
    else:
        services.engines.changed(session, search)
    return written, len(reused)


def _tell_cached(
    services: Services,
    session: Session,
    search: SearchRow,
    rows: list[CandidateRow],
    engine: Engine,
) -> None:
    """`tell` for the measurement cache's hits of one part, in order: one new revision and
    one statement numbering them all, rather than two statements each (a part of 4 ran 13
    statements, now 6: docs/benchmarks.md, "A replay's part told together")."""
    last = quality.record_results(
        session,
        search,
        rows,
        engine,
        lambda row: engine.tell(row.arch_id, measured_values(row)),
        services.engines.last_numbered(search),
    )
    if last is not None:
        services.engines.changed(session, search)
        services.engines.numbered(search, last)
        return
    for row in rows:  # the normalisation still open
        tell(services, session, search, row, engine)


def live_agents(services: Services, session: Session, device_class: str) -> int:
    """How many measurements a search of `device_class` can have running at once: the agents
    of the class seen within a lease period (at least one). Counted again when the process's
    count is `LIVE_COUNT_S` old, or an agent of the class registered here since."""
    store = services.store
    now = store.now()
    counted = services.live_counts.get(device_class)
    if counted is not None and now - counted[0] < timedelta(seconds=LIVE_COUNT_S):
        return counted[1]
    since = now - timedelta(seconds=store.settings.lease_seconds)
    with session.no_autoflush:  # what this transaction holds unflushed is no agent
        live = session.scalar(
            select(func.count(AgentRow.id)).where(
                AgentRow.device_class == device_class, AgentRow.last_seen_at >= since
            )
        )
    live = max(1, live or 0)
    services.live_counts[device_class] = (now, live)
    return live


# How long a process trusts its count of a device class's live agents: every result and
# claim that finds nothing needs it, and an agent that comes or goes moves it by one.
LIVE_COUNT_S = 1.0


# Proposals kept queued beyond the live agents, as a share of them: an agent that reports a
# result finds its next job already queued, rather than waiting for a proposal round (which
# runs after the result's answer: server.services.arrivals). A small share, because a
# proposal made earlier knows fewer results; below 1 / QUEUE_AHEAD agents, none.
QUEUE_AHEAD = 0.05


def measuring_slots(services: Services, session: Session, device_class: str) -> int:
    """How many of a search's candidates may be queued or measuring at once: its live agents
    (`live_agents`) and `QUEUE_AHEAD` of them more."""
    live = live_agents(services, session, device_class)
    return live + int(live * QUEUE_AHEAD)


def advance(
    services: Services,
    session: Session,
    search: SearchRow,
    asked: list[Candidate] | None = None,
    slots: int | None = None,
    in_parts: bool = False,
) -> list[Candidate]:
    """Ask the engine for what to measure next and write it, or write what it proposed just
    before (`asked`, for `slots`); finish the search when the engine is done.

    Left to `ask_again`, once the transaction is over:
    - an engine that would propose more than `ROUND_IN_TRANSACTION`: a generational
      strategy's next generation, up to 20,000 candidates, took 1.5 s under the write lock.
      Such a strategy has nothing being measured then, so nothing is told to it meanwhile
      and the same proposals come;
    - a finished engine's re-measurements, when they would be chosen now: their result table
      is brought up to date off the write lock first (`remeasure.ready_table`);
    - a search left to `ask_again` already (a replay from the measurement cache between two
      of its rounds): it is asked there.

    `in_parts` (the caller holds the search's engine lock between its transactions): at
    most `ROUND_CHUNK` proposals, `REUSED_CHUNK` of them reused, are written here, and what
    is left of `asked` is returned for the caller's next transaction."""
    if search.status != SearchStatus.RUNNING:
        return []
    engine = services.engines.get(session, search)
    if slots is None:
        slots = measuring_slots(services, session, search.device_class)
    if asked is None:
        if services.engines.to_ask_later(search.id):
            # A claim that came between two of a replay's rounds bred the next generation in
            # its transaction, others waiting 10-18 ms for it.
            return []
        large = engine.most_asked(slots) > ROUND_IN_TRANSACTION
        if large or (engine.finished and remeasure.chooses(session, search)):
            services.engines.ask_later(search.id)
            return []
        asked = engine.ask(slots)
    # Cache hits are told at once, which can complete a generation or free a slot: the
    # engine is asked again, in a transaction of its own (`ask_again`), until it waits on
    # real measurements or is done. Asked again here, a search that the cache could replay
    # whole replayed it in this transaction, every other request waiting (5,832 cached
    # candidates in 2.2 s: docs/benchmarks.md, "Bad neighbours").
    later = False
    while asked:
        part = asked[:ROUND_CHUNK] if in_parts else asked
        written, told = _enqueue(
            services, session, search, engine, part, REUSED_CHUNK if in_parts else None
        )
        if written < len(asked):
            return asked[written:]
        if told and not engine.finished:
            later = True
            services.engines.ask_later(search.id)
            break
        asked = engine.ask(slots)
    remeasuring = False
    if engine.finished:
        if (
            remeasure.remeasure_budget(search.parsed_request) > 0
            and not remeasure.table_at_hand(services, session, search)
            and remeasure.chooses(session, search)
        ):
            # Told from the cache, its last results finished the engine here: the table its
            # re-measurements are chosen from is built off the write lock first (`ask_again`).
            services.engines.ask_later(search.id)
            return []
        remeasuring, queued = remeasure.queue(
            services.results, session, search, slots, services.store.now()
        )
        if queued:
            services.work.queued(search.device_class, queued)
    if engine.finished and not remeasuring:
        search.status = SearchStatus.FINISHED
        search.finish_reason = engine.finish_reason
        search.finished_at = services.store.now()
        services.engines.forget(search.id)
        _log_finished(search)
    elif not later:  # asked again in this state, it would give nothing more: idle claims
        services.engines.idle(search.id, search.revision, slots)  # need not ask
    return []


class AskedAgain(NamedTuple):
    """What `ask_again` did: the searches it asked, and those another thread held, each with
    `EngineCache.rounds_written` before the look."""

    asked: list[int]
    held: list[tuple[int, int]]


def ask_again(services: Services) -> AskedAgain:
    """Ask the searches left to be asked once a transaction was over (`advance`), each round
    asked outside the write lock and written in parts (`write_round`), until each waits on
    real measurements or is done. The caller's write transaction is over: others' requests
    get in between. Returns the searches asked, and those another thread held meanwhile,
    each with `EngineCache.rounds_written` before the look (its holder asks it again after
    letting go: a claim may wait for that round, `EngineCache.wait_round`)."""
    asked: list[int] = []
    held: list[tuple[int, int]] = []
    elsewhere: list[int] = []  # held by another process (PostgreSQL), which may not ask it
    while searches := services.engines.take_asked_later():
        for search_id in searches:
            written = services.engines.rounds_written(search_id)  # before the look
            lock = services.engines.lock(search_id)
            if not lock.acquire(blocking=False):
                held.append((search_id, written))
                continue
            try:
                with services.store.write() as session:
                    search = take_search(session, search_id)
                    if search is None:
                        elsewhere.append(search_id)
                        continue
                    if search.status != SearchStatus.RUNNING:
                        services.engines.forget(search_id)  # what the look above kept of it
                        continue
                    engine = services.engines.get(session, search)
                    slots = measuring_slots(services, session, search.device_class)
                    revision = search.revision
                if engine.finished:  # what its re-measurements are chosen from, off the lock
                    remeasure.ready_table(services, search_id)
                try:
                    write_round(services, search_id, engine, ask(engine, slots), slots, revision)
                except BaseException:
                    services.engines.drop(search_id)  # it proposed what no row says
                    raise
                asked.append(search_id)
            finally:
                lock.release()
                services.engines.round_written(search_id)
        sleep(_BETWEEN_PARTS_S)
    # Left for whichever thread asks next (the schedule at the latest), should the holder not.
    for search_id in [*elsewhere, *(search_id for search_id, _ in held)]:
        services.engines.ask_later(search_id)
    return AskedAgain(asked, held)


def tell(
    services: Services,
    session: Session,
    search: SearchRow,
    row: CandidateRow,
    engine: Engine | None,
) -> None:
    """The one way a finished candidate reaches its search, whether an agent measured it or
    the cache had it: the engine (when the search still runs) is told its values, and the
    result is numbered and scored. A re-measurement (round > 0) is the search's business,
    not the engine's: it is not told."""
    if engine is not None and row.round == 0:
        engine.tell(row.arch_id, measured_values(row))
    recorded(services, session, search, row, engine)


def recorded(
    services: Services,
    session: Session,
    search: SearchRow,
    row: CandidateRow,
    engine: Engine | None,
) -> None:
    """The rows' side of `tell`, for a result the engine (if any) has heard already: a new
    revision, and the result numbered and scored."""
    if row.round > 0:  # a new revision all the same: it may let the search finish
        write_columns(session, row)  # its finish, if left to be written with its number
        services.engines.changed(session, search)
        return
    if engine is None:  # a search that stopped: its numbers are read
        quality.record_result(session, search, row, engine)
        return
    last = services.engines.last_numbered(search)  # at the revision before this result's
    services.engines.changed(session, search)
    services.engines.numbered(search, quality.record_result(session, search, row, engine, last))


def _log_finished(search: SearchRow) -> None:
    log_event("search.finished", search_id=search.id, reason=search.finish_reason)


def hypervolume_trace(services: Services, search_id: int) -> HypervolumeTrace:
    with services.store.read() as session:
        search = get_search(session, search_id)
        return quality.trace(search, services.results.get(session, search).rows)


def census(session: Session, search_id: int) -> Census:
    """Counts over the search's candidate rows, by the database (no row is loaded)."""
    again = CandidateRow.round > 0
    query = (
        select(
            again,
            CandidateRow.status,
            func.count(),
            func.sum(case((CandidateRow.reused, 1), else_=0)),
            func.max(CandidateRow.generation),
        )
        .where(CandidateRow.search_id == search_id)
        .group_by(again, CandidateRow.status)
    )
    rows = session.execute(query).all()
    candidates = [r[1:] for r in rows if not r[0]]
    return Census(
        by_status={status: n for status, n, _, _ in candidates},
        reused=sum(int(r or 0) for _, _, r, _ in candidates),
        generation=max((g or 0 for *_, g in candidates), default=0),
        remeasures={status: n for again, status, n, _, _ in rows if again},
    )


def in_flight(session: Session, search_id: int) -> dict[str, int]:
    """The search's candidates queued and running, by status, as `census` counts them
    (re-measurements apart), through the status index: `census` reads every candidate row of
    the search (0.1 s at 100,000)."""
    query = (
        select(CandidateRow.status, func.count())
        .where(
            CandidateRow.status.in_((JobStatus.QUEUED, JobStatus.RUNNING)),
            CandidateRow.search_id == search_id,
            CandidateRow.round == 0,
        )
        .group_by(CandidateRow.status)
    )
    return {status: n for status, n in session.execute(query)}


def _info(
    services: Services,
    session: Session,
    search: SearchRow,
    fleet: Fleet,
    server_url: str | None,
) -> SearchInfo:
    return search_info(
        search,
        census(session, search.id),
        services.results.get(session, search),
        agents=availability.availability(search, fleet, server_url),
        warnings=availability.warnings(search, fleet, server_url),
    )


def get_search_info(
    services: Services, search_id: int, server_url: str | None = None
) -> SearchInfo:
    """The search as users see it; `server_url`: this server's, for the agent command a
    search that waits for an agent names."""
    with services.store.read() as session:
        fleet = Fleet(services.store, session)
        return _info(services, session, get_search(session, search_id), fleet, server_url)


def list_searches(services: Services, server_url: str | None = None) -> list[SearchInfo]:
    with services.store.read() as session:
        fleet = Fleet(services.store, session)
        searches = session.scalars(select(SearchRow).order_by(SearchRow.id)).all()
        return [_info(services, session, s, fleet, server_url) for s in searches]


def list_candidates(
    services: Services,
    search_id: int,
    status: str | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> list[CandidateInfo]:
    """The search's candidates in the order they were proposed; a page of them with `limit`."""
    with services.store.read() as session:
        search = get_search(session, search_id)
        request = search.parsed_request
        table = services.results.get(session, search)
        query = select(CandidateRow).where(
            CandidateRow.search_id == search_id, CandidateRow.round == 0
        )
        if status is not None:
            query = query.where(CandidateRow.status == status)
        query = query.order_by(CandidateRow.id).offset(offset).limit(limit)
        return [candidate_info(r, request, table) for r in session.scalars(query).unique()]


@dataclass(frozen=True)
class FrontierView:
    """A search's request and its frontier's points in result order, as its result table has
    them now (server.services.choosing filters and orders them); `kept(name, make)` is
    `make()`, made once per state of the frontier (`ResultTable.per_frontier`)."""

    request: SearchCreate
    points: list[FrontierPoint]
    kept: Callable[[str, Callable[[], Any]], Any]


def frontier(services: Services, search_id: int) -> FrontierView:
    with services.store.read() as session:
        search = get_search(session, search_id)
        table = services.results.get(session, search)
    return FrontierView(table.request, table.frontier_points(), table.per_frontier)


def candidates_by_arch(
    services: Services, search_id: int, arch_ids: Sequence[str]
) -> list[CandidateInfo]:
    """The search's candidates of `arch_ids` (told ones), in that order, each as /candidates
    gives it: the few a choice returns, read after choosing among the table's points."""
    with services.store.read() as session:
        search = get_search(session, search_id)
        request = search.parsed_request
        table = services.results.get(session, search)
        rows: dict[str, CandidateRow] = {}
        for start in range(0, len(arch_ids), 500):  # bounded IN lists
            query = select(CandidateRow).where(
                CandidateRow.search_id == search_id,
                CandidateRow.round == 0,
                CandidateRow.arch_id.in_(arch_ids[start : start + 500]),
            )
            rows.update((r.arch_id, r) for r in session.scalars(query).unique())
        return [candidate_info(rows[a], request, table) for a in arch_ids]


def cancel_search(services: Services, search_id: int) -> SearchInfo:
    """Stop proposing; queued jobs are cancelled, running ones may still report."""
    with services.store.write() as session:
        search = get_search(session, search_id, lock=True)
        if search.status == SearchStatus.RUNNING:
            search.revision += 1
            search.status = SearchStatus.CANCELLED
            search.finish_reason = "cancelled"
            search.finished_at = services.store.now()
            session.execute(
                update(CandidateRow)
                .where(CandidateRow.search_id == search_id, CandidateRow.status == JobStatus.QUEUED)
                .values(status=JobStatus.CANCELLED)
            )
            services.engines.forget(search_id)
            _log_finished(search)
    return get_search_info(services, search_id)
