"""Live search engines, one per running search, rebuilt from the store when missing.

The engine is a cache of what the rows say: after a restart `restore` replays the candidate
rows (in proposal order) and the engine proposes exactly what the live one would have; an
engine another process moved past catches up on the new rows alone.
"""

from __future__ import annotations

import threading

from sqlalchemy import Row, Select, select
from sqlalchemy.orm import Session

from archvocab.registry import parse_space
from archvocab.wire import JobStatus, SearchCreate
from proxies.registry import zero_cost_scores
from search.engine import Engine
from search.errors import InvalidHistory
from search.hypervolume import Normaliser
from search.noise import steering_widths
from search.records import DEVICE_SECONDS, PENDING, Outcome
from search.strategies import ENGINES
from server.services.heap import settle_after
from server.services.quality import normaliser
from server.store.rows import ArchitectureRow, CandidateRow, MeasurementRow, SearchRow
from server.store.store import write_columns


def measured_values(row: CandidateRow) -> dict[str, float] | None:
    """Objective values the engine is told for a finished candidate (None: it failed)."""
    if row.status != JobStatus.MEASURED or row.measurement is None:
        return None
    m = row.measurement
    # Low-cost proxies come with the measurement: the agent computed them (agent.proxy_values).
    values = {
        **m.result.get("proxies", {}),
        "latency_ms": m.latency_ms,
        "memory_mb": m.peak_memory_mb,
    }
    if m.result.get("total_s"):  # what the measurement cost the agent
        values[DEVICE_SECONDS] = float(m.result["total_s"])
    return values


def _engine_kwargs(request: SearchCreate, normaliser: Normaliser | None) -> dict:
    kwargs: dict = {
        "objectives": list(request.objectives),
        "scorer": zero_cost_scores,
        "seed": request.seed,
        "max_evaluations": request.budget.max_evaluations,
        "population": request.population,
        "constraints": request.constraints,
    }
    if request.strategy == "layer_scaled":
        kwargs["layers"] = request.layers
    if request.strategy == "hwnas":
        # It steers by the hypervolume the search reports, once that is fixed.
        kwargs["normaliser"] = normaliser
        # Its parents come from the frontier beyond the device's noise: a point that a
        # re-measurement could put on the frontier stays a parent. (lts keeps LTS's exact
        # frontier: diluting its uniform parent draw cost it 2% hypervolume in
        # bench/search_efficiency.py, where hwnas's was level or better.)
        kwargs["tolerance"] = steering_widths(request.measurement.device, request.noise.confidence)
        kwargs["surrogate"] = request.surrogate
        kwargs["value_per"] = request.value_per
        kwargs["initial_design"] = request.initial_design
    return kwargs


class EngineCache:
    """search id -> (live engine, the search revision it reflects). Callers hold the
    store's write lock and, where several processes share the store, the search's row lock;
    a proposal round between transactions holds the search's engine lock (`lock`) instead.
    It observes the store's write transactions (`Store.observe`): a rolled-back one drops the
    engines it held.

    Another server process may have proposed or told since this one last did: the search row's
    `revision` then differs from the cached one, and the engine catches up on what is new
    (the results of its pending candidates and the proposals after its last), not the whole
    history; only an engine this process never had is rebuilt from all the rows.
    """

    def __init__(self) -> None:
        self._engines: dict[int, tuple[Engine, int]] = {}
        self._handed_out: set[int] = set()  # searches whose engine this transaction holds
        # search id -> (revision, measuring slots) at which it was last asked for proposals
        # and had none to give: asked again then, it would give none (`known_idle`).
        self._idle: dict[int, tuple[int, int]] = {}
        # search id -> the lock a thread holds while it uses the search's engine outside the
        # store's write lock (a proposal round: server.services.arrivals.settle)
        self._locks: dict[int, threading.Lock] = {}
        self._rounds: dict[int, _Rounds] = {}  # such rounds written, and waiters for the next
        # Searches to be asked again once a transaction is over, in transactions of their
        # own: the measurement cache answered their last round in part, or their next round
        # may be a whole generation (server.services.searches.advance, ask_again).
        self._asked_later: set[int] = set()
        # search id -> (revision, its last result number), as this process numbered it: while
        # the search's revision is that one, nobody has numbered a result since (numbering a
        # running search's result moves its revision: server.services.searches.recorded), and
        # the next result is numbered without a read (`last_numbered`).
        self._numbered: dict[int, tuple[int, int]] = {}
        self._asked_later_lock = threading.Lock()
        self.restores = 0  # engines rebuilt from every row (a restart, a first sight)
        self.catch_ups = 0  # stale engines brought up to date from the new rows only
        # Whether another server process writes to this store's searches: seen when an
        # engine is stale (`get`) or a search's row is held elsewhere (`held_elsewhere`).
        self.shared = False

    def new(
        self, search: SearchRow, request: SearchCreate, normaliser: Normaliser | None
    ) -> Engine:
        engine = ENGINES[request.strategy](
            parse_space(request.space), **_engine_kwargs(request, normaliser)
        )
        self._engines[search.id] = (engine, search.revision)
        self._handed_out.add(search.id)
        return engine

    def get(self, session: Session, search: SearchRow) -> Engine:
        self._handed_out.add(search.id)
        cached = self._engines.get(search.id)
        if cached is not None and cached[1] == search.revision:
            return cached[0]
        engine = cached[0] if cached is not None else None
        if engine is not None:
            try:
                _catch_up(session, search, engine)
                self.catch_ups += 1
                self.shared = True
            except InvalidHistory:  # the rows are not a continuation of it: start over
                engine = None
        if engine is None:
            engine = self._restore(session, search)
            self.restores += 1
            settle_after(engine.proposed)
        self._engines[search.id] = (engine, search.revision)
        return engine

    def held_elsewhere(self) -> None:
        """A search's row was held by another transaction that no thread of this process
        runs (this process's writers of a search hold its engine lock): another process."""
        self.shared = True

    def round_written(self, search_id: int) -> None:
        """A thread let go of the search's engine lock (a proposal round run outside the write
        lock was written, or results told): wake `wait_round`."""
        rounds = self._rounds.get(search_id)  # none: no thread looked (or the search ended)
        if rounds is not None:
            rounds.moved()

    def rounds_written(self, search_id: int) -> int:
        """How many times `round_written` was said of the search since a thread first asked
        this: asked before finding its engine lock held, then `wait_round` since then."""
        return self._rounds.setdefault(search_id, _Rounds()).written

    def wait_round(self, search_id: int, since: int, timeout: float) -> bool:
        """Wait until the search's engine lock is let go after `rounds_written` said `since`
        (at once if it was already), or timeout; whether it was. Counted, not only signalled:
        a holder that let go between the caller's look and its wait woke no one, and the
        caller waited out its timeout (a second of each result's answer, under load)."""
        rounds = self._rounds.setdefault(search_id, _Rounds())
        with rounds.condition:
            return rounds.condition.wait_for(lambda: rounds.written != since, timeout)

    def lock(self, search_id: int) -> threading.Lock:
        """The search's engine lock: whoever uses its engine outside the store's write lock
        holds it; whoever uses it inside the write lock must get it without waiting (or
        leave the search alone), so that no thread waits for one lock holding the other."""
        return self._locks.setdefault(search_id, threading.Lock())

    def idle(self, search_id: int, revision: int, slots: int) -> None:
        """The search, asked at `revision` with `slots` measuring slots, proposes no more."""
        self._idle[search_id] = (revision, slots)

    def known_idle(self, search_id: int, revision: int, slots: int) -> bool:
        """Whether asking the search again would propose nothing: its engine said so at this
        revision with these slots (nothing in the rows moved since, in any process)."""
        return self._idle.get(search_id) == (revision, slots)

    def ask_later(self, search_id: int) -> None:
        """Ask the search again once this transaction is over (`take_asked_later`)."""
        with self._asked_later_lock:
            self._asked_later.add(search_id)

    def to_ask_later(self, search_id: int) -> bool:
        """Whether the search waits to be asked again (`ask_later`)."""
        with self._asked_later_lock:
            return search_id in self._asked_later

    def take_asked_later(self) -> list[int]:
        """The searches to ask again, each handed to one caller."""
        with self._asked_later_lock:
            taken, self._asked_later = sorted(self._asked_later), set()
        return taken

    def changed(self, session: Session, search: SearchRow) -> None:
        """The engine was told or asked something the rows now record: a new revision."""
        write_columns(session, search, revision=search.revision + 1)
        cached = self._engines.get(search.id)
        if cached is not None:
            self._engines[search.id] = (cached[0], search.revision)

    def rolled_back(self) -> None:
        """The transaction failed: an engine it held may have been told something the rows do
        not record. Those are rebuilt from the rows when next needed; the others stay."""
        for search_id in self._handed_out:
            self._engines.pop(search_id, None)
            self._idle.pop(search_id, None)
            self._numbered.pop(search_id, None)
        self._handed_out.clear()

    def committing(self, session: Session) -> None:
        pass

    def committed(self) -> None:
        self._handed_out.clear()

    def drop(self, search_id: int) -> None:
        self._engines.pop(search_id, None)
        self._idle.pop(search_id, None)
        self._numbered.pop(search_id, None)

    def last_numbered(self, search: SearchRow) -> int | None:
        """The search's last result number, where this process gave it at the search's
        present revision (its row read under the search's lock); None: read it."""
        known = self._numbered.get(search.id)
        return known[1] if known is not None and known[0] == search.revision else None

    def numbered(self, search: SearchRow, result_seq: int) -> None:
        """This transaction gave the search's result `result_seq`, at its present revision."""
        self._handed_out.add(search.id)  # a rollback forgets it
        self._numbered[search.id] = (search.revision, result_seq)

    def forget(self, search_id: int) -> None:
        """The search ended: nothing of it is kept. A thread still holding its engine lock
        holds an engine no longer cached (it writes nothing: server.services.arrivals checks
        the engine it heard with is the cached one), and a waiter for its next round is woken."""
        self.drop(search_id)
        self._locks.pop(search_id, None)
        rounds = self._rounds.pop(search_id, None)
        if rounds is not None:
            rounds.moved()

    def held(self) -> int:
        """Searches this cache keeps anything of (engines, locks, waiters)."""
        return len({*self._engines, *self._idle, *self._locks, *self._rounds})

    @staticmethod
    def _restore(session: Session, search: SearchRow) -> Engine:
        request = search.parsed_request
        return ENGINES[request.strategy].restore(
            parse_space(request.space),
            history=[_record(row) for row in session.execute(_history(search))],
            **_engine_kwargs(request, normaliser(search)),
        )


class _Rounds:
    """One search's engine lock let go (`EngineCache.round_written`), counted, and the
    threads waiting for it to be."""

    def __init__(self) -> None:
        self.written = 0
        self.condition = threading.Condition()

    def moved(self) -> None:
        with self.condition:
            self.written += 1
            self.condition.notify_all()


def _history(search: SearchRow) -> Select:
    """A search's proposals (round 0) in proposal order, as the columns a replay needs: a
    measurement's raw samples are most of its size and a replay needs none of them."""
    return (
        select(
            ArchitectureRow.spec,
            CandidateRow.generation,
            CandidateRow.status,
            MeasurementRow.latency_ms,
            MeasurementRow.peak_memory_mb,
            MeasurementRow.result["proxies"],
            CandidateRow.arch_id,
            CandidateRow.result_seq,
        )
        .join(ArchitectureRow, ArchitectureRow.arch_id == CandidateRow.arch_id)
        .outerjoin(MeasurementRow, MeasurementRow.id == CandidateRow.measurement_id)
        .where(CandidateRow.search_id == search.id, CandidateRow.round == 0)
        .order_by(CandidateRow.id)
    )


def _record(row: Row) -> tuple[dict, int, Outcome]:
    spec, generation, status, latency, memory, proxies, _, told_as = row
    # A result still waiting in `arrivals` (no number yet) is not the engine's yet either.
    if status not in (JobStatus.MEASURED, JobStatus.FAILED) or told_as is None:
        return spec, generation, PENDING
    if status == JobStatus.FAILED or latency is None:
        return spec, generation, None
    return spec, generation, {**(proxies or {}), "latency_ms": latency, "memory_mb": memory}


def _catch_up(session: Session, search: SearchRow, engine: Engine) -> None:
    """Tell `engine` what other processes recorded since it was last used: the outcomes of
    its pending candidates that have one now, then the proposals past its last (the rows are
    in proposal order and never deleted, so those are the rows after its count)."""
    pending = engine.pending
    told = []
    if pending:
        rows = session.execute(_history(search).where(CandidateRow.arch_id.in_(pending)))
        for row in rows:
            _, _, outcome = _record(row)
            if outcome is not PENDING:
                told.append((row.arch_id, outcome))
    proposed = session.execute(_history(search).offset(engine.proposed))
    engine.catch_up(told=told, proposed=[_record(row) for row in proposed])
    fixed = normaliser(search)
    if fixed is not None:  # another process may have fixed it since
        engine.use_normaliser(fixed)
