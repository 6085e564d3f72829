"""Results are told to their search after the result request (server.services.arrivals): the
same results in the same order give the same search however late the telling, and results a
stopped server left untold are told by the next claim or by the schedule."""

from __future__ import annotations

import sys
import threading
from collections import Counter

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from archvocab.wire import JobResult
from server.app.factory import create_app
from server.services import arrivals, jobs
from server.services.engines import EngineCache
from server.services.turns import TURN_S
from server.settings import Settings
from server.store.store import take_search
from tests.factories import play_agent, register, search_request, synthetic_measurement

AGENTS = 3


def _report(services, agent: str, lease) -> int:
    body = {
        "agent_id": agent,
        "lease_id": lease.lease_id,
        "measurement": synthetic_measurement(lease.spec),
    }
    receipt, search_id = jobs.submit_result(services, lease.job_id, JobResult.model_validate(body))
    assert receipt.accepted and not receipt.duplicate
    return search_id


def _run(client, settle_each: bool) -> list[str]:
    """A hwnas search measured by three agents in rounds: each claims, then all report in
    the same order; the search is told after each result, or only before the next claims."""
    request = search_request(
        strategy="hwnas",
        budget={"max_evaluations": 24},
        population={"initial": 6, "parents": 2, "mutations": 2, "crossovers": 2},
    )
    client.post("/api/v1/searches", json=request).raise_for_status()
    agents = [register(client) for _ in range(AGENTS)]
    services = client.app.state.services
    while True:
        leases = [(a, jobs.claim(services, a)) for a in agents]
        leases = [(a, lease) for a, lease in leases if lease is not None]
        if not leases:
            break
        for agent, lease in leases:
            search_id = _report(services, agent, lease)
            if settle_each:
                assert arrivals.settle(services, search_id) == 1
        if not settle_each:
            assert arrivals.settle(services, search_id) == len(leases)
    search = client.get("/api/v1/searches/1").json()
    assert search["status"] == "finished"
    candidates = client.get("/api/v1/searches/1/candidates").json()
    assert len(candidates) == 24
    return [c["arch_id"] for c in candidates]


def test_telling_the_results_late_and_together_proposes_the_same_search(make_client):
    at_once = _run(make_client("each.db"), settle_each=True)
    together = _run(make_client("together.db"), settle_each=False)
    assert together == at_once


def test_a_slow_round_search_is_told_after_the_request_in_arrival_order(client):
    services, (agent, other) = _slow_search(client, 2)
    first, second = jobs.claim(services, agent), jobs.claim(services, other)
    _report(services, other, second)  # the later claim reports first
    _report(services, agent, first)
    points = client.get("/api/v1/searches/1/points").json()
    assert points["rows"] == []  # recorded, not yet told: no result number
    assert arrivals.settle(services, 1) == 2
    rows = client.get("/api/v1/searches/1/points").json()["rows"]
    assert [row[:2] for row in rows] == [[second.arch_id, 1], [first.arch_id, 2]]
    assert arrivals.settle(services, 1) == 0  # told once


def test_a_search_with_cheap_rounds_is_told_in_the_result_request(client):
    client.post("/api/v1/searches", json=search_request()).raise_for_status()  # LTS
    agent = register(client)
    services = client.app.state.services
    lease = jobs.claim(services, agent)
    body = {"agent_id": agent, "lease_id": lease.lease_id}
    body["measurement"] = synthetic_measurement(lease.spec)
    receipt, to_settle = jobs.submit_result(services, lease.job_id, JobResult.model_validate(body))
    assert receipt.accepted and to_settle is None
    rows = client.get("/api/v1/searches/1/points").json()["rows"]
    assert [row[:2] for row in rows] == [[lease.arch_id, 1]]


class _SearchHeld:
    """Another PostgreSQL transaction (another server process's settle) holding a search's
    row until `release`."""

    def __init__(self, services, search_id: int) -> None:
        self._session = services.store._sessions()
        self._session.begin()
        assert take_search(self._session, search_id) is not None

    def release(self) -> None:
        self._session.rollback()
        self._session.close()


@pytest.fixture
def two_processes(postgres_url, clock):
    """Two apps on one PostgreSQL database, as two server processes sharing the store."""
    settings = Settings(database_url=postgres_url, lease_seconds=30.0, clock=clock)
    with TestClient(create_app(settings)) as first, TestClient(create_app(settings)) as second:
        yield first, second


def _write_nothing(services) -> bool:
    with services.store.write():
        return True


def _cheap_search(client, agents: int) -> tuple[object, list[str]]:
    client.post("/api/v1/searches", json=search_request()).raise_for_status()  # LTS
    return client.app.state.services, [register(client) for _ in range(agents)]


def test_a_process_that_shares_postgresql_with_another_leaves_its_results_to_arrive(
    two_processes,
):
    first, second = two_processes
    services, agents = _cheap_search(first, 4)
    leases = [jobs.claim(services, a) for a in agents]
    assert _report(services, agents[0], leases[0]) is None  # alone so far: told at once
    assert _report(second.app.state.services, agents[1], leases[1]) is None  # the other
    assert not services.engines.shared
    assert _report(services, agents[2], leases[2]) is None  # its engine was stale
    assert services.engines.shared  # another process wrote the search: from now on
    assert _report(services, agents[3], leases[3]) == 1  # the result only arrives
    assert first.get("/api/v1/searches/1/points").json()["last"] == 3
    assert arrivals.settle(services, 1) == 1
    rows = first.get("/api/v1/searches/1/points").json()["rows"]
    assert [row[0] for row in rows] == [x.arch_id for x in leases]


def _shared(two_processes, agents: int) -> tuple:
    """An LTS search on two processes' store, whose first process has seen the second write
    it (`EngineCache.shared`), its first two agents' results told: (the first's client, its
    services, the second's services, the agents, their first leases)."""
    first, second = two_processes
    services, agents = _cheap_search(first, agents)
    other = second.app.state.services
    leases = [jobs.claim(services, a) for a in agents]
    assert _report(other, agents[0], leases[0]) is None
    assert _report(services, agents[1], leases[1]) is None  # a stale engine: shared
    assert services.engines.shared
    return first, services, other, agents, leases


def test_results_are_recorded_while_another_process_holds_their_search(two_processes):
    first, services, other, agents, leases = _shared(two_processes, 3)
    lease = jobs.claim(services, agents[0])
    held = _SearchHeld(other, 1)
    try:
        reporter, reported = _in_thread(
            "reporter",
            lambda: [
                _report(services, a, x) for a, x in ((agents[2], leases[2]), (agents[0], lease))
            ],
        )
        reporter.join(10)
        assert not reporter.is_alive()  # neither result waited for the search's row
        assert reported["value"] == [1, 1]
        # A settle meanwhile waits its turn without holding this process's writes up.
        settler, told = _in_thread("settler", lambda: arrivals.settle(services, 1))
        settler.join(0.3)
        assert settler.is_alive()
        writer, wrote = _in_thread("writer", lambda: _write_nothing(services))
        writer.join(10)
        assert wrote == {"value": True}  # this process's write lock is free
    finally:
        held.release()
    settler.join(10)
    assert not settler.is_alive()
    assert told["value"] == 2
    rows = first.get("/api/v1/searches/1/points").json()["rows"]
    assert [row[0] for row in rows] == [x.arch_id for x in (*leases, lease)]


def test_a_settle_that_leaves_its_turn_to_another_process_wakes_the_waiting_claims(
    two_processes,
):
    _, services, other, agents, _ = _shared(two_processes, 2)
    lease = jobs.claim(services, agents[0])
    assert _report(services, agents[0], lease) == 1  # arrives
    # A claim that found the engine held waits for its round, up to its timeout.
    since = services.engines.rounds_written(1)
    waiter, _ = _in_thread("waiter", lambda: services.engines.wait_round(1, since, 60))
    held = _SearchHeld(other, 1)
    try:
        settler, _ = _in_thread("settler", lambda: arrivals.settle(services, 1))
        waiter.join(10)
        assert not waiter.is_alive()  # woken though nothing was told: it looks again
    finally:
        held.release()
    settler.join(10)
    assert not settler.is_alive()


def test_a_claim_that_found_the_engine_held_does_not_wait_when_it_was_let_go_already():
    """The holder may let go between the claim's look and its wait: the wait must see that,
    not wait out its timeout for a wake that came before it began (a lost wake-up)."""
    engines = EngineCache()
    since = engines.rounds_written(7)  # the claim's look: the engine lock is held
    engines.round_written(7)  # the holder lets go before the claim waits
    assert engines.wait_round(7, since, timeout=60)  # at once
    assert not engines.wait_round(7, engines.rounds_written(7), timeout=0.01)  # none since


def test_results_a_stopped_server_left_untold_are_told_by_the_next_claim(make_client):
    before = make_client("stopped.db")
    services, (agent,) = _slow_search(before, 1)
    first = jobs.claim(services, agent)
    assert jobs.claim(services, agent) is None  # one agent: one job at a time
    _report(services, agent, first)  # recorded, and the server stops before telling it
    after = make_client("stopped.db")
    claimed = after.post(f"/api/v1/agents/{agent}/claim")
    assert claimed.status_code == 200, claimed.text  # proposed after the result was told
    assert claimed.json()["arch_id"] != first.arch_id
    assert after.get("/api/v1/searches/1/points").json()["last"] == 1


def test_the_schedule_tells_a_cancelled_search_its_last_results(client):
    services, (agent,) = _slow_search(client, 1)
    lease = jobs.claim(services, agent)
    _report(services, agent, lease)  # left untold (a failed settle)
    client.post("/api/v1/searches/1/cancel").raise_for_status()
    assert arrivals.settle_waiting(services) == 1
    rows = client.get("/api/v1/searches/1/points").json()["rows"]
    assert [row[0] for row in rows] == [lease.arch_id]
    assert arrivals.settle_waiting(services) == 0


class _HeldRound:
    """Failure injection: the engine's next proposal round, wherever it runs, waits until
    released, as a slow strategy's would; the rounds after it run as usual."""

    def __init__(self, monkeypatch) -> None:
        from search.engine import Engine

        self.started, self.release = threading.Event(), threading.Event()
        ask = Engine.ask

        def held(engine, slots=1):
            if not self.started.is_set():
                self.started.set()
                assert self.release.wait(30)
            return ask(engine, slots)

        monkeypatch.setattr(Engine, "ask", held)


def _in_thread(name: str, work) -> tuple[threading.Thread, dict]:
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", work()), name=name)
    thread.start()
    return thread, out


def _slow_search(client, agents: int) -> tuple[object, list[str]]:
    """A hwnas search (its proposal rounds run outside the write lock) and its agents, whose
    number is the number of jobs it keeps queued or running."""
    request = search_request(strategy="hwnas", budget={"max_evaluations": 12})
    client.post("/api/v1/searches", json=request).raise_for_status()
    names = [register(client) for _ in range(agents)]
    return client.app.state.services, names


def test_claims_and_results_go_on_while_a_proposal_round_runs(client, monkeypatch):
    services, (a, b, c) = _slow_search(client, 3)
    first, second, third = (jobs.claim(services, agent) for agent in (a, b, c))
    search_id = _report(services, a, first)
    held = _HeldRound(monkeypatch)
    settler, told = _in_thread("settler", lambda: arrivals.settle(services, search_id))
    assert held.started.wait(30)
    # The round holds the search's engine, not the store: the others claim and report.
    _report(services, c, third)
    assert jobs.claim(services, c) is None  # nothing queued: the round has not written yet
    held.release.set()
    settler.join(30)
    assert not settler.is_alive()
    assert told["value"] == 2  # the result reported meanwhile too, after the first
    rows = client.get("/api/v1/searches/1/points").json()["rows"]
    assert [row[0] for row in rows] == [first.arch_id, third.arch_id]
    assert second is not None


def test_a_claim_with_nothing_queued_waits_for_the_round_under_way(client, monkeypatch):
    services, (agent,) = _slow_search(client, 1)
    first = jobs.claim(services, agent)
    search_id = _report(services, agent, first)
    held = _HeldRound(monkeypatch)
    settler, _ = _in_thread("settler", lambda: arrivals.settle(services, search_id))
    assert held.started.wait(30)
    claimer, claimed = _in_thread("claimer", lambda: jobs.claim(services, agent))
    claimer.join(0.5)
    assert claimer.is_alive()  # nothing queued yet: it waits for the round, not "no work"
    held.release.set()
    for thread in (settler, claimer):
        thread.join(30)
        assert not thread.is_alive()
    assert claimed["value"] is not None and claimed["value"].arch_id != first.arch_id


def _one_result_in(client) -> tuple[object, int]:
    """A slow-round search whose one agent has reported its first job, not yet told."""
    services, (agent,) = _slow_search(client, 1)
    return services, _report(services, agent, jobs.claim(services, agent))


def test_a_round_another_process_overtook_is_dropped_and_told_once(make_client, monkeypatch):
    straight = make_client("straight.db")
    services, search_id = _one_result_in(straight)
    assert arrivals.settle(services, search_id) == 1
    expected = [c["arch_id"] for c in straight.get("/api/v1/searches/1/candidates").json()]
    assert len(expected) == 2

    first = make_client("shared.db")
    services, search_id = _one_result_in(first)
    held = _HeldRound(monkeypatch)
    settler, told = _in_thread("settler", lambda: arrivals.settle(services, search_id))
    assert held.started.wait(30)
    second = make_client("shared.db")  # another server process on the same database
    assert arrivals.settle(second.app.state.services, search_id) == 1
    held.release.set()
    settler.join(30)
    assert told["value"] == 0  # its result was told meanwhile: its round is dropped
    candidates = [c["arch_id"] for c in first.get("/api/v1/searches/1/candidates").json()]
    assert candidates == expected  # one proposal after the result, not two
    assert first.get("/api/v1/searches/1/points").json()["last"] == 1


def test_a_round_that_a_cancel_overtook_is_dropped_and_its_result_still_counts(client, monkeypatch):
    services, search_id = _one_result_in(client)
    held = _HeldRound(monkeypatch)
    settler, told = _in_thread("settler", lambda: arrivals.settle(services, search_id))
    assert held.started.wait(30)
    client.post("/api/v1/searches/1/cancel").raise_for_status()
    held.release.set()
    settler.join(30)
    assert told["value"] == 1
    assert len(client.get("/api/v1/searches/1/candidates").json()) == 1  # none proposed after
    assert client.get("/api/v1/searches/1/points").json()["last"] == 1


def test_a_new_search_proposes_its_first_round_outside_the_write_lock(client, monkeypatch):
    held = _HeldRound(monkeypatch)
    creating = lambda: client.post("/api/v1/searches", json=search_request())  # noqa: E731
    creator, created = _in_thread("settler", creating)
    assert held.started.wait(30)
    agent = register(client)  # a write meanwhile: not held up by the round
    services = client.app.state.services
    claimer, claimed = _in_thread("claimer", lambda: jobs.claim(services, agent))
    claimer.join(0.5)
    assert claimer.is_alive()  # nothing queued yet: it waits for the first round
    held.release.set()
    for thread in (creator, claimer):
        thread.join(30)
        assert not thread.is_alive()
    assert created["value"].status_code == 201, created["value"].text
    assert created["value"].json()["progress"]["proposed"] == 4
    assert claimed["value"] is not None


def test_an_agent_joining_a_slow_round_search_gets_a_job_proposed_for_it(client):
    services, (agent,) = _slow_search(client, 1)
    first = jobs.claim(services, agent)
    assert first is not None
    assert jobs.claim(services, agent) is None  # one agent, one job: nothing more yet
    other = register(client)  # a second measuring slot
    second = jobs.claim(services, other)  # proposed for it, outside the write lock
    assert second is not None and second.arch_id != first.arch_id
    assert len(client.get("/api/v1/searches/1/candidates").json()) == 2


def test_a_first_generation_written_in_parts_is_the_same_search(make_client, monkeypatch):
    from server.services import searches

    request = search_request(population={"initial": 10, "parents": 2, "mutations": 2})
    whole = make_client("whole.db")
    whole.post("/api/v1/searches", json=request).raise_for_status()
    expected = [c["arch_id"] for c in whole.get("/api/v1/searches/1/candidates").json()]
    monkeypatch.setattr(searches, "ROUND_CHUNK", 3)
    parts = make_client("parts.db")
    created = parts.post("/api/v1/searches", json=request).json()
    assert created["progress"]["queued"] == 10
    assert [c["arch_id"] for c in parts.get("/api/v1/searches/1/candidates").json()] == expected
    assert created["progress"]["generation"] == 0 and len(expected) == 10


def test_a_result_that_completes_a_generation_leaves_the_next_to_be_bred_and_written_after_it(
    make_client, monkeypatch
):
    # Bred and written in the transaction of the result that completed the generation before,
    # a generation of the largest population (20,000) held every other request up for 1.5 s
    # (docs/benchmarks.md, "Generations off the result's transaction").
    from search.strategies.lts import LTSEngine
    from server.services import searches
    from server.store.rows import CandidateRow

    request = search_request(
        budget={"max_evaluations": 30},
        population={"initial": 6, "parents": 2, "mutations": 6, "crossovers": 4},
    )

    def run(client) -> list[tuple[int, str]]:
        client.post("/api/v1/searches", json=request).raise_for_status()
        play_agent(client, register(client))
        assert client.get("/api/v1/searches/1").json()["status"] == "finished"
        candidates = client.get("/api/v1/searches/1/candidates").json()
        return [(c["generation"], c["arch_id"]) for c in candidates]

    expected = run(make_client("whole.db"))  # each generation asked in the transaction
    assert len({generation for generation, _ in expected}) >= 3

    monkeypatch.setattr(searches, "ROUND_CHUNK", 4)
    monkeypatch.setattr(searches, "ROUND_IN_TRANSACTION", 4)
    parts = make_client("parts.db")
    store = parts.app.state.services.store
    under_lock: list[bool] = []  # for each ask that proposed something
    short: list[bool] = []  # ... whether threads took short turns meanwhile
    ask = LTSEngine.ask

    def watched(engine, slots: int = 1):
        batch = ask(engine, slots)
        if batch:
            under_lock.append(store.write_lock._is_owned())
            short.append(sys.getswitchinterval() == TURN_S)
        return batch

    monkeypatch.setattr(LTSEngine, "ask", watched)
    written: list[int] = []  # proposals each write transaction wrote

    class Counted:
        def committing(self, session) -> None:  # noqa: ANN001 - a Session
            count = session.scalar(
                select(func.count()).select_from(CandidateRow).where(CandidateRow.round == 0)
            )
            written.append(count - sum(written))

        def committed(self) -> None:
            pass

        def rolled_back(self) -> None:
            pass

    store.observe(Counted())
    assert run(parts) == expected
    # The first generation is asked for outside the lock by the create; a later one of at
    # most ROUND_IN_TRANSACTION by the result that made it due, in its transaction.
    sizes = Counter(generation for generation, _ in expected)
    assert [g > 0 and sizes[g] <= 4 for g in sorted(sizes)] == under_lock
    assert under_lock.count(False) >= 3  # the first, and two generations of 10
    assert short == [not locked for locked in under_lock]  # the large rounds' only
    assert max(written) == 4 and sum(written) == len(expected)


@pytest.mark.parametrize("left_to_ask_again", [False, True])
def test_a_search_left_to_be_asked_again_is_bred_off_the_write_lock(
    make_client, monkeypatch, left_to_ask_again
):
    # Between two of a replay's rounds, which `ask_again` asks off the write lock, a claim
    # that came in bred the next generation in its transaction, others waiting 10-18 ms
    # (docs/benchmarks.md, "A replay's claims and lookups; where a replay's holds go").
    from search.strategies.lts import LTSEngine

    client = make_client(requeue_every_s=3600)  # no schedule asks it meanwhile
    request = search_request(
        budget={"max_evaluations": 30},
        population={"initial": 6, "parents": 2, "mutations": 6, "crossovers": 4},
    )
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    agent = register(client)
    assert play_agent(client, agent, max_jobs=5) == 5
    services = client.app.state.services
    last = jobs.claim(services, agent)
    under_lock: list[bool] = []  # for each ask that proposed something
    ask = LTSEngine.ask

    def watched(engine, slots: int = 1):
        batch = ask(engine, slots)
        if batch:
            under_lock.append(services.store.write_lock._is_owned())
        return batch

    monkeypatch.setattr(LTSEngine, "ask", watched)

    def proposed() -> int:
        return client.get(f"/api/v1/searches/{search_id}").json()["progress"]["proposed"]

    if left_to_ask_again:  # as a replay's round leaves it
        services.engines.ask_later(search_id)
    _report(services, agent, last)  # completes the first generation
    assert proposed() == (6 if left_to_ask_again else 16)
    lease = jobs.claim(services, agent)  # the second generation's first job
    assert lease is not None and proposed() == 16
    # Left to be asked again, the claim asked it after its transaction; else the result
    # that completed the generation bred it in its own (a generation of at most
    # ROUND_IN_TRANSACTION).
    assert under_lock == [not left_to_ask_again]
    _report(services, agent, lease)
    assert play_agent(client, agent) >= 30 - 7  # and any re-measurements
    assert client.get(f"/api/v1/searches/{search_id}").json()["status"] == "finished"
    assert proposed() == 30


def test_a_round_written_in_parts_pauses_between_them_with_the_write_lock_let_go(
    client, monkeypatch
):
    # A thread woken for the write lock gets a core meanwhile, and the lock: without the
    # pause, the writing thread took the lock again first, and requests waited out run after
    # run of parts (bench/create_blocking.py; a timing, so not asserted here).
    from server.services import searches

    monkeypatch.setattr(searches, "ROUND_CHUNK", 5)
    services = client.app.state.services
    parts, pauses = [], []
    written = services.engines.round_written

    def counted(search_id: int) -> None:
        parts.append(search_id)
        written(search_id)

    def pause(seconds: float) -> None:
        pauses.append((len(parts), seconds, services.store.write_lock._is_owned()))

    monkeypatch.setattr(services.engines, "round_written", counted)
    monkeypatch.setattr(searches, "sleep", pause)
    client.post("/api/v1/searches", json=search_request(population={"initial": 12}))
    assert len(parts) == 3
    assert pauses == [(1, searches._BETWEEN_PARTS_S, False), (2, searches._BETWEEN_PARTS_S, False)]
    assert searches._BETWEEN_PARTS_S > 0


def test_a_search_that_ended_leaves_nothing_in_the_engine_cache(client):
    # Finished (hwnas, with rounds outside the write lock and their locks) and cancelled.
    engines = client.app.state.services.engines
    _run(client, settle_each=True)
    running = client.post("/api/v1/searches", json=search_request()).json()
    agent = register(client)
    assert client.post(f"/api/v1/agents/{agent}/claim").status_code == 200
    assert engines.held() == 1  # the running search
    client.post(f"/api/v1/searches/{running['id']}/cancel").raise_for_status()
    assert engines.held() == 0


def test_a_slow_round_settle_waits_for_another_process_without_holding_its_writes_up(
    two_processes,
):
    first, second = two_processes
    services, search_id = _one_result_in(first)
    held = _SearchHeld(second.app.state.services, search_id)
    try:
        settler, told = _in_thread("settler", lambda: arrivals.settle(services, search_id))
        settler.join(0.3)
        assert settler.is_alive()  # its result waits for the other process's turn
        writer, wrote = _in_thread("writer", lambda: _write_nothing(services))
        writer.join(10)
        assert wrote == {"value": True}  # this process's write lock is free meanwhile
    finally:
        held.release()
    settler.join(30)
    assert not settler.is_alive()
    assert told["value"] == 1
    assert first.get("/api/v1/searches/1/points").json()["last"] == 1
    assert len(first.get("/api/v1/searches/1/candidates").json()) == 2  # proposed after it
