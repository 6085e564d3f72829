"""The agent API: leases, heartbeats, results, expiry, hostile input; restarts lose nothing."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from sqlalchemy import event

from tests.factories import FINGERPRINT, play_agent, register, search_request, synthetic_measurement


def _claim(client, agent):
    response = client.post(f"/api/v1/agents/{agent}/claim")
    assert response.status_code == 200, response.text
    return response.json()


def _result(agent, lease, **extra):
    return {
        "agent_id": agent,
        "lease_id": lease["lease_id"],
        "measurement": synthetic_measurement(lease["spec"]),
        **extra,
    }


def test_claim_gives_a_lease_on_a_spec_with_the_search_settings(client):
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    lease = _claim(client, agent)
    assert lease["settings"]["seq_len"] == 16 and lease["spec"]["vocab_size"] == 1000
    assert lease["lease_seconds"] == 30


def test_agents_only_get_work_for_their_device_class(client):
    client.post("/api/v1/searches", json=search_request())
    other = register(client, device_class="jetson")
    assert client.post(f"/api/v1/agents/{other}/claim").status_code == 204


def test_unknown_agent_gets_404(client):
    response = client.post("/api/v1/agents/nobody/claim")
    assert response.status_code == 404 and response.json()["detail"] == "agent 'nobody' not found"


def test_a_result_is_accepted_once_and_foreign_leases_get_409(client):
    client.post("/api/v1/searches", json=search_request())
    alice, bob = register(client), register(client)
    lease = _claim(client, alice)
    job = f"/api/v1/jobs/{lease['job_id']}"
    foreign = client.post(f"{job}/result", json=_result(bob, lease))
    assert foreign.status_code == 409 and "never given to agent" in foreign.json()["detail"]
    first = client.post(f"{job}/result", json=_result(alice, lease))
    assert first.json() == {
        "job_id": lease["job_id"],
        "accepted": True,
        "duplicate": False,
        "next": None,
    }
    # A retry (the first answer was lost): the same answer, marked duplicate; nothing changes.
    again = client.post(f"{job}/result", json=_result(alice, lease))
    assert again.json() == {
        "job_id": lease["job_id"],
        "accepted": True,
        "duplicate": True,
        "next": None,
    }
    measured = client.get("/api/v1/searches/1/candidates", params={"status": "measured"}).json()
    assert len(measured) == 1
    [view] = [a for a in client.get("/api/v1/agents").json() if a["agent_id"] == alice]
    assert view["jobs_done"] == 1


def test_an_expired_lease_goes_back_to_the_queue_and_its_late_measurement_counts_once(
    client, clock
):
    client.post(
        "/api/v1/searches",
        json=search_request(
            population={"initial": 1, "parents": 1, "mutations": 1, "crossovers": 0}
        ),
    )
    slow, fast = register(client), register(client)
    lease = _claim(client, slow)
    assert client.post(f"/api/v1/agents/{fast}/claim").status_code == 204
    clock.advance(31)
    relet = _claim(client, fast)
    assert relet["job_id"] == lease["job_id"] and relet["lease_id"] != lease["lease_id"]
    job = f"/api/v1/jobs/{lease['job_id']}"
    # The slow agent comes back with a measurement: the job has none yet, so it counts...
    late = client.post(f"{job}/result", json=_result(slow, lease))
    assert late.status_code == 200 and late.json()["duplicate"] is False
    # ...and the agent the job went to next is told to drop it, first at its heartbeat,
    ref = {"agent_id": fast, "lease_id": relet["lease_id"]}
    assert client.post(f"{job}/heartbeat", json=ref).status_code == 409
    # then if it reports anyway.
    second = client.post(f"{job}/result", json=_result(fast, relet))
    assert second.status_code == 409 and "already has a result" in second.json()["detail"]
    [candidate] = client.get("/api/v1/searches/1/candidates", params={"status": "measured"}).json()
    assert candidate["measurement"]["agent_id"] == slow
    jobs_done = {a["agent_id"]: a["jobs_done"] for a in client.get("/api/v1/agents").json()}
    assert jobs_done == {slow: 1, fast: 0}


def test_a_lease_says_when_its_job_went_into_the_queue(client, clock):
    """From the job's queueing to its lease is the wait for an agent, which a waiting claim's
    own latency includes (bench/load.py reads it)."""
    proposed = clock.now
    client.post(
        "/api/v1/searches",
        json=search_request(
            population={"initial": 1, "parents": 1, "mutations": 1, "crossovers": 0}
        ),
    )
    slow, fast = register(client), register(client)
    clock.advance(5)
    lease = _claim(client, slow)
    assert datetime.fromisoformat(lease["queued_at"]) == proposed.replace(tzinfo=UTC)
    clock.advance(31)  # the lease ran out a second ago: it has been waiting since then
    relet = _claim(client, fast)
    assert relet["job_id"] == lease["job_id"]
    assert relet["queued_at"] == lease["lease_expires_at"]


def test_a_failure_reported_after_the_lease_expired_is_dropped_and_the_job_retried(client, clock):
    client.post("/api/v1/searches", json=search_request())
    slow, fast = register(client), register(client)
    lease = _claim(client, slow)
    clock.advance(31)
    failure = {"agent_id": slow, "lease_id": lease["lease_id"], "failure": {"kind": "timeout"}}
    taken = [_claim(client, fast)["job_id"] for _ in range(4)]  # requeues, then hands it out
    assert lease["job_id"] in taken
    late = client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=failure)
    assert late.status_code == 409 and "will be tried again" in late.json()["detail"]
    assert client.get("/api/v1/searches/1").json()["progress"]["failed"] == 0


def test_heartbeats_keep_a_lease_alive(client, clock):
    client.post("/api/v1/searches", json=search_request())
    agent, other = register(client), register(client)
    lease = _claim(client, agent)
    ref = {"agent_id": agent, "lease_id": lease["lease_id"]}
    for _ in range(3):
        clock.advance(20)
        assert client.post(f"/api/v1/jobs/{lease['job_id']}/heartbeat", json=ref).status_code == 200
    taken = [_claim(client, other)["job_id"] for _ in range(3)]
    assert lease["job_id"] not in taken
    clock.advance(31)
    # Expired, but nobody took the job yet: a late heartbeat still renews it.
    assert client.post(f"/api/v1/jobs/{lease['job_id']}/heartbeat", json=ref).status_code == 200
    clock.advance(31)
    retaken = _claim(client, other)  # expired again: requeued and handed to the other agent
    assert retaken["job_id"] == lease["job_id"]
    assert client.post(f"/api/v1/jobs/{lease['job_id']}/heartbeat", json=ref).status_code == 409


def test_failures_are_recorded_with_their_kind_and_never_retried(client):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    agent = register(client)
    lease = _claim(client, agent)
    failure = {
        "agent_id": agent,
        "lease_id": lease["lease_id"],
        "failure": {"kind": "out_of_memory", "message": "CUDA out of memory"},
    }
    assert client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=failure).status_code == 200
    play_agent(client, agent)
    info = client.get(f"/api/v1/searches/{search_id}").json()
    assert info["status"] == "finished" and info["progress"]["failed"] == 1
    failed = client.get(
        f"/api/v1/searches/{search_id}/candidates", params={"status": "failed"}
    ).json()
    assert [c["arch_id"] for c in failed] == [lease["arch_id"]]
    assert failed[0]["failure"] == failure["failure"] and not failed[0]["on_frontier"]
    [view] = client.get("/api/v1/agents").json()
    remeasured = info["progress"]["remeasured"]  # frontier points measured again at the end
    assert view["agent_id"] == agent and view["failures"] == 1
    assert view["jobs_done"] == 11 + remeasured
    assert view["fingerprint"]["cpu_model"] == "test cpu"


def test_hostile_agent_input_gets_422_and_changes_nothing(client):
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    lease = _claim(client, agent)
    good = synthetic_measurement(lease["spec"])
    bad_bodies = [
        {"agent_id": agent, "lease_id": lease["lease_id"]},  # no outcome
        {**_result(agent, lease), "failure": {"kind": "timeout"}},  # both outcomes
        {**_result(agent, lease), "measurement": {**good, "latency_ms": -1}},
        {**_result(agent, lease), "measurement": {**good, "latency_samples_ms": []}},
        {"agent_id": agent, "lease_id": lease["lease_id"], "failure": {"kind": "meltdown"}},
        {**_result(agent, lease), "lease_id": "x" * 10_000},
        ["not", "an", "object"],
    ]
    for body in bad_bodies:
        response = client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=body)
        assert response.status_code == 422, (body, response.text)
    # json.dumps writes NaN as a bare token, which Python clients can send; it must be refused.
    nan = json.dumps({**_result(agent, lease), "measurement": {**good, "latency_ms": float("nan")}})
    assert "NaN" in nan
    response = client.post(
        f"/api/v1/jobs/{lease['job_id']}/result",
        content=nan,
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422
    bad_registration = {"device_class": "cpu", "fingerprint": {**FINGERPRINT, "cores": "many"}}
    assert client.post("/api/v1/agents", json=bad_registration).status_code == 422
    # The lease is untouched: the real result still lands.
    assert (
        client.post(
            f"/api/v1/jobs/{lease['job_id']}/result", json=_result(agent, lease)
        ).status_code
        == 200
    )


def test_a_restarted_server_resumes_the_search_and_proposes_the_same_architectures(make_client):
    first = make_client("interrupted.db")
    search_id = first.post(
        "/api/v1/searches", json=search_request(budget={"max_evaluations": 20})
    ).json()["id"]
    play_agent(first, register(first), max_jobs=7)  # stop mid-generation
    second = make_client("interrupted.db")  # a new app (and engine) over the same file
    play_agent(second, register(second))
    resumed = second.get(f"/api/v1/searches/{search_id}/candidates").json()

    straight = make_client("straight.db")
    straight.post("/api/v1/searches", json=search_request(budget={"max_evaluations": 20}))
    play_agent(straight, register(straight))
    uninterrupted = straight.get(f"/api/v1/searches/{search_id}/candidates").json()
    assert [c["arch_id"] for c in resumed] == [c["arch_id"] for c in uninterrupted]
    assert second.get(f"/api/v1/searches/{search_id}").json()["status"] == "finished"


def test_agents_are_online_within_a_lease_period_of_their_last_request(client, clock):
    agent = register(client)
    assert client.get("/api/v1/agents").json()[0]["online"] is True
    clock.advance(31)  # the fixture's lease is 30 s
    assert client.get("/api/v1/agents").json()[0]["online"] is False
    client.post(f"/api/v1/agents/{agent}/claim")
    assert client.get("/api/v1/agents").json()[0]["online"] is True


class _Writes:
    """Counts the statements that write (or, on SQLite, take the write lock) on a store."""

    def __init__(self, client) -> None:
        from sqlalchemy import event

        self.count = 0
        event.listen(client.app.state.store.db, "before_cursor_execute", self._seen)

    def _seen(self, conn, cursor, statement, *args) -> None:
        verb = " ".join(statement.split()[:2]).upper()
        if verb.split()[0] in ("INSERT", "UPDATE", "DELETE") or verb == "BEGIN IMMEDIATE":
            self.count += 1


def test_an_idle_claim_writes_nothing_and_work_still_reaches_the_agent(client, clock):
    client.post("/api/v1/searches", json=search_request())  # LTS: 4 first, then a generation
    agent = register(client)
    leases = [_claim(client, agent) for _ in range(4)]
    writes = _Writes(client)
    assert client.post(f"/api/v1/agents/{agent}/claim").status_code == 204  # asks the engine
    asked = writes.count
    for _ in range(5):  # the engine said it has nothing until results come: nobody asks again
        assert client.post(f"/api/v1/agents/{agent}/claim").status_code == 204
    assert writes.count == asked
    # An agent that polls for a twentieth of a lease is marked seen again: one write.
    clock.advance(2)
    assert client.post(f"/api/v1/agents/{agent}/claim").status_code == 204
    assert writes.count > asked
    again = writes.count
    assert client.post(f"/api/v1/agents/{agent}/claim").status_code == 204
    assert writes.count == again
    for lease in leases:
        reported = client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=_result(agent, lease))
        assert reported.status_code == 200
    # The last result completed the generation: the next one is queued and handed out.
    lease = _claim(client, agent)
    client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=_result(agent, lease))
    # A second agent is a second measuring slot: the engine is asked again on its claim.
    other = register(client)
    assert play_agent(client, other) + play_agent(client, agent) > 0
    assert client.get("/api/v1/searches/1").json()["status"] == "finished"


class _Statements:
    """The statements a store runs (`count`), and what each reads or writes as (verb, first
    table) pairs (`seen`): a statement whose WITH holds another (PostgreSQL) gives a pair for
    each."""

    # (a row lock, FOR UPDATE or FOR NO KEY UPDATE, is not a write)
    _PARTS = re.compile(
        r"\b(SELECT\b.*?\bFROM|INSERT INTO|(?<!FOR )(?<!KEY )UPDATE|DELETE FROM)\s+(\w+)", re.S
    )

    def __init__(self, client) -> None:
        from sqlalchemy import event

        self.count = 0
        self.texts: list[str] = []
        self.seen: list[tuple[str, str]] = []
        event.listen(client.app.state.store.db, "before_cursor_execute", self._seen)

    def _seen(self, conn, cursor, statement, *args) -> None:
        self.count += 1
        self.texts.append(" ".join(statement.split())[:90])
        parts = self._PARTS.findall(statement)
        if not parts:  # BEGIN IMMEDIATE, a ping
            self.seen.append((statement.split()[0].upper(), ""))
        for verb, table in parts:
            self.seen.append((verb.split()[0].upper(), table))


def test_a_result_reads_its_lease_with_its_job_and_writes_each_row_once(client, clock):
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    for _ in range(2):  # the process's per-search work done once
        lease = _claim(client, agent)
        client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=_result(agent, lease))
    lease = _claim(client, agent)
    clock.advance(5)  # the result comes later than an agent's "last seen" resolution
    statements = _Statements(client)
    reported = client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=_result(agent, lease))
    assert reported.status_code == 200
    seen = statements.seen
    assert ("SELECT", "leases") not in seen  # the lease came with the job
    assert seen.count(("INSERT", "measurements")) == 1
    # the count, no read-modify-write, and the agent marked seen with it
    assert seen.count(("UPDATE", "agents")) == 1
    assert seen.count(("UPDATE", "searches")) == 1
    # finished, numbered and scored as the search is told, in one statement
    assert seen.count(("UPDATE", "candidates")) == 1
    # SQLite: BEGIN and 9; PostgreSQL locks the job's search in one statement, then the job
    # (writes that tell one search take turns), and moves the agent's count with the
    # measurement's insert; its driver's BEGIN is not counted here. Of those, one counts the
    # live agents again (searches.LIVE_COUNT_S has passed), one reads the results so far
    # (the search's first results fix its hypervolume's reference).
    dialect = client.app.state.store.db.dialect.name
    assert statements.count <= {"sqlite": 10, "postgresql": 9}[dialect], statements.texts
    [candidate] = [
        c
        for c in client.get("/api/v1/searches/1/candidates").json()
        if c["arch_id"] == lease["arch_id"]
    ]
    assert candidate["status"] == "measured" and candidate["measurement"]["agent_id"] == agent
    [view] = client.get("/api/v1/agents").json()
    assert view["jobs_done"] == 3
    assert datetime.fromisoformat(view["last_seen_at"]) == clock.now.replace(tzinfo=UTC)


def test_a_late_result_for_a_job_its_search_cancelled_is_dropped(client, clock):
    client.post("/api/v1/searches", json=search_request())
    slow, elsewhere = register(client), register(client, device_class="jetson")
    lease = _claim(client, slow)
    clock.advance(31)
    # Another class's claim finds nothing, but first puts the expired lease's job back.
    assert client.post(f"/api/v1/agents/{elsewhere}/claim").status_code == 204
    client.post("/api/v1/searches/1/cancel")
    late = client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=_result(slow, lease))
    assert late.status_code == 409
    assert late.json()["detail"] == (
        f"job {lease['job_id']} was cancelled with its search; the result is dropped"
    )
    [view] = [a for a in client.get("/api/v1/agents").json() if a["agent_id"] == slow]
    assert view["jobs_done"] == 0 and view["failures"] == 0
    assert client.get("/api/v1/searches/1/candidates", params={"status": "measured"}).json() == []


def test_a_repeated_failure_is_a_duplicate_and_counts_once(client):
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    lease = _claim(client, agent)
    failure = {"agent_id": agent, "lease_id": lease["lease_id"], "failure": {"kind": "timeout"}}
    job = f"/api/v1/jobs/{lease['job_id']}/result"
    assert client.post(job, json=failure).json()["duplicate"] is False
    assert client.post(job, json=failure).json()["duplicate"] is True
    [view] = client.get("/api/v1/agents").json()
    assert view["failures"] == 1 and view["jobs_done"] == 0
    assert client.get("/api/v1/searches/1").json()["progress"]["failed"] == 1


def test_a_result_can_claim_the_next_job_until_none_is_left(client):
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    lease, results = _claim(client, agent), 0
    while lease is not None:
        url = f"/api/v1/jobs/{lease['job_id']}/result"
        answer = client.post(url, params={"claim_next": True}, json=_result(agent, lease))
        assert answer.status_code == 200 and answer.json()["accepted"] is True
        results += 1
        lease = answer.json()["next"]
        if lease is not None:  # leased to this agent as a claim's would be
            assert lease["job_id"] != answer.json()["job_id"]
    candidates = client.get("/api/v1/searches/1/candidates").json()
    assert results == len(candidates) == 12  # one claim for the whole search
    assert {c["status"] for c in candidates} == {"measured"}
    [view] = client.get("/api/v1/agents").json()
    assert view["jobs_done"] == 12
    assert client.post(f"/api/v1/agents/{agent}/claim").status_code == 204


def test_a_queued_next_job_is_taken_in_the_results_own_transaction(client):
    client.post("/api/v1/searches", json=search_request(strategy="lts"))
    agent = register(client)
    lease = _claim(client, agent)  # the first generation's other three stay queued
    statements, commits = _Statements(client), []
    event.listen(client.app.state.store.db, "commit", lambda conn: commits.append(conn))
    url = f"/api/v1/jobs/{lease['job_id']}/result"
    answer = client.post(url, params={"claim_next": True}, json=_result(agent, lease))
    assert answer.status_code == 200
    taken = answer.json()["next"]
    assert taken is not None and taken["job_id"] != lease["job_id"]
    assert len(commits) == 1  # the result and the lease written together
    assert statements.seen.count(("INSERT", "leases")) == 1
    running = client.get("/api/v1/searches/1/candidates", params={"status": "running"}).json()
    assert [c["arch_id"] for c in running] == [taken["arch_id"]]


def test_a_result_that_finds_nothing_queued_writes_nothing_more_while_its_search_waits(client):
    client.post("/api/v1/searches", json=search_request(strategy="lts"))
    agents = [register(client) for _ in range(4)]
    leases = [_claim(client, agent) for agent in agents]  # the whole first generation
    commits = []
    event.listen(client.app.state.store.db, "commit", lambda conn: commits.append(conn))
    url = f"/api/v1/jobs/{leases[0]['job_id']}/result"
    answer = client.post(url, params={"claim_next": True}, json=_result(agents[0], leases[0]))
    assert answer.status_code == 200 and answer.json()["next"] is None
    # The result only: the search, told it, was asked and waits for its generation, which a
    # read shows; the searches are not asked again under the write lock.
    assert len(commits) == 1
    for agent, lease in zip(agents[1:], leases[1:], strict=True):
        url = f"/api/v1/jobs/{lease['job_id']}/result"
        client.post(url, params={"claim_next": True}, json=_result(agent, lease))
    assert _claim(client, agents[0])["arch_id"] not in {lease["arch_id"] for lease in leases}


def test_a_claim_after_a_result_tops_up_only_when_a_read_cannot_show_nothing_would_come(client):
    client.post("/api/v1/searches", json=search_request(strategy="lts"))
    agents = [register(client) for _ in range(4)]
    leases = [_claim(client, agent) for agent in agents]  # the whole first generation
    services = client.app.state.services
    commits = []
    event.listen(client.app.state.store.db, "commit", lambda conn: commits.append(conn))
    url = f"/api/v1/jobs/{leases[0]['job_id']}/result"
    assert client.post(url, json=_result(agents[0], leases[0])).status_code == 200
    assert len(commits) == 1
    # The search, told the result, was asked and waits for its generation: the claim's own
    # look for a queued job is its only write transaction.
    assert client.post(f"/api/v1/agents/{agents[0]}/claim").status_code == 204
    assert len(commits) == 2
    # A process that has not asked the engine since (as after a restart): a read cannot show
    # it would give nothing, so the searches are asked, in a write transaction of its own.
    services.engines._idle.clear()
    services.idle_agents.clear()
    assert client.post(f"/api/v1/agents/{agents[0]}/claim").status_code == 204
    assert len(commits) == 4
    for agent, lease in zip(agents[1:], leases[1:], strict=True):
        url = f"/api/v1/jobs/{lease['job_id']}/result"
        assert client.post(url, json=_result(agent, lease)).status_code == 200
    assert _claim(client, agents[0])["arch_id"] not in {lease["arch_id"] for lease in leases}


def test_a_refused_result_claims_nothing_and_a_bad_flag_is_named(client):
    client.post("/api/v1/searches", json=search_request())
    alice, bob = register(client), register(client)
    lease = _claim(client, alice)
    url = f"/api/v1/jobs/{lease['job_id']}/result"
    refused = client.post(url, params={"claim_next": True}, json=_result(bob, lease))
    assert refused.status_code == 409
    running = client.get("/api/v1/searches/1/candidates", params={"status": "running"}).json()
    assert [c["arch_id"] for c in running] == [lease["arch_id"]]  # bob took nothing
    bad = client.post(url, params={"claim_next": "maybe"}, json=_result(alice, lease))
    assert bad.status_code == 422 and "claim_next" in bad.json()["message"]
