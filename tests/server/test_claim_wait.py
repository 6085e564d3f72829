"""Claims that wait for work (`claim?wait=`, server.services.work and server.app.agent_path):
answered as soon as a job is queued in the process, 204 once the wait ends with none, a wait
out of range named; a client that goes away while it waits takes no job; a server or an agent
told to stop does not wait out the claims in flight."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from archvocab.wire import JobStatus
from hwnas.testing.agents import start_agent
from hwnas.testing.servers import api_client, serve
from server.app import agent_path
from server.services import jobs
from server.services.auth import TRUSTED, Caller
from server.store.rows import CandidateRow
from tests.factories import claim_waiting, register, search_request


def _until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "the condition did not come about"
        time.sleep(0.01)


def _claims_waiting(url: str) -> float:
    """`hwnas_claims_waiting` of the process that answers a new connection to `url`: with
    several server processes, each counts its own, and a kept-alive connection would ask the
    same one every time."""
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith("hwnas_claims_waiting "):
            return float(line.split()[1])
    raise AssertionError("no hwnas_claims_waiting in /metrics")


def _counted_claims(monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], list[list[str]]]:
    """From now on, the claims each agent asks on its own (`jobs.claim`), and the agents of
    each call that asks for several together (`jobs.claim_together`)."""
    alone: Counter[str] = Counter()
    together: list[list[str]] = []
    claim, claim_together = jobs.claim, jobs.claim_together

    def counted(services_, agent_id, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        try:
            return claim(services_, agent_id, *args, **kwargs)
        finally:  # counted once it has looked: `_send_waiting_claims` waits for that
            alone[agent_id] += 1

    def counted_together(services_, asks):  # noqa: ANN001, ANN202
        together.append([agent_id for agent_id, _ in asks])
        return claim_together(services_, asks)

    monkeypatch.setattr(jobs, "claim", counted)
    monkeypatch.setattr(jobs, "claim_together", counted_together)
    return alone, together


def _send_waiting_claims(
    client, agents: list[str], wait_s: float, looked: Counter[str]
) -> tuple[list[threading.Thread], dict[str, httpx.Response]]:
    """Each agent's claim, waiting up to `wait_s`, sent from a thread of its own; returned
    once all of them wait, each after its first look for work (counted in `looked`, from
    `_counted_claims`): a claim waits from before that look, and a job queued while it
    looks may be its answer without a wake. Each answer lands in the dict as its thread
    ends."""
    answers: dict[str, httpx.Response] = {}

    def wait(agent: str) -> None:
        answers[agent] = client.post(f"/api/v1/agents/{agent}/claim", params={"wait": wait_s})

    threads = [threading.Thread(target=wait, args=(agent,)) for agent in agents]
    for thread in threads:
        thread.start()
    _until(lambda: client.app.state.services.work.waiting() == len(agents))
    _until(lambda: all(looked[agent] for agent in agents))
    return threads, answers


def test_a_waiting_claim_gets_the_job_queued_while_it_waits(client, monkeypatch):
    # No asking again on a timer within the wait (a process alone does not; nor here one that
    # saw others write): only the wake can bring the job.
    monkeypatch.setattr(agent_path, "_RECHECK_S", 600.0)
    services = client.app.state.services
    agent = register(client)
    answers: list[httpx.Response] = []

    def claim() -> None:
        answers.append(client.post(f"/api/v1/agents/{agent}/claim", params={"wait": 25}))

    waiting = threading.Thread(target=claim)
    waiting.start()
    # Its first claim found nothing (no search yet), and it waits.
    _until(lambda: agent in services.idle_agents and services.work.waiting() == 1)
    client.post("/api/v1/searches", json=search_request())
    waiting.join(60)
    assert answers and answers[0].status_code == 200, answers
    running = client.get("/api/v1/searches/1/candidates", params={"status": "running"}).json()
    assert [c["arch_id"] for c in running] == [answers[0].json()["arch_id"]]
    assert services.work.waiting() == 0


def test_queued_jobs_wake_as_many_waiting_claims_of_their_class(client, monkeypatch):
    """One job queued for two waiting agents of its class wakes one of them, and none of
    another class's: a thousand idle agents do not all look for one job."""
    monkeypatch.setattr(agent_path, "_RECHECK_S", 600.0)
    cpus = [register(client), register(client)]
    jetson = register(client, device_class="jetson")
    for agent in [*cpus, jetson]:  # a first claim finds nothing: the agent's class is known
        assert client.post(f"/api/v1/agents/{agent}/claim").status_code == 204
    alone, together = _counted_claims(monkeypatch)
    threads, answers = _send_waiting_claims(client, [*cpus, jetson], wait_s=4, looked=alone)
    one_job = {"initial": 1, "parents": 1, "mutations": 1, "crossovers": 0}
    client.post("/api/v1/searches", json=search_request(population=one_job))
    for thread in threads:
        thread.join(60)
    assert sorted(answers[agent].status_code for agent in cpus) == [200, 204]
    assert answers[jetson].status_code == 204
    # Each asked once as it began to wait; only the one woken asked again.
    asked = alone + Counter(agent for asks in together for agent in asks)
    assert sorted(asked[agent] for agent in cpus) == [1, 2] and asked[jetson] == 1


def test_claims_woken_together_lease_their_jobs_together(client, monkeypatch):
    """Five waiting claims woken by one search's jobs are leased theirs in one transaction
    (`jobs.claim_together`), each a job of its own, none asking again on its own."""
    monkeypatch.setattr(agent_path, "_RECHECK_S", 600.0)
    agents = [register(client) for _ in range(5)]
    for agent in agents:  # a first claim finds nothing: the agent's class is known
        assert client.post(f"/api/v1/agents/{agent}/claim").status_code == 204
    alone, together = _counted_claims(monkeypatch)
    threads, answers = _send_waiting_claims(client, agents, wait_s=25, looked=alone)
    eight_jobs = {"initial": 8, "parents": 2, "mutations": 2, "crossovers": 2}
    client.post("/api/v1/searches", json=search_request(population=eight_jobs))
    for thread in threads:
        thread.join(60)
    assert all(answers[agent].status_code == 200 for agent in agents), answers
    assert len({answers[agent].json()["job_id"] for agent in agents}) == 5
    assert [sorted(asks) for asks in together] == [sorted(agents)]
    assert all(alone[agent] == 1 for agent in agents)  # each as it began to wait, no more


def test_claims_asked_together_get_the_jobs_there_are_and_no_one_elses(client):
    """`jobs.claim_together` leases the queued jobs in the order asked; an agent with none
    left, one that does not exist, and one its caller may not act for get None (their own
    claims then say why), and the transaction still leases the others'."""
    services = client.app.state.services
    two_jobs = {"initial": 2, "parents": 1, "mutations": 1, "crossovers": 0}
    client.post("/api/v1/searches", json=search_request(population=two_jobs))
    first, second, third, stranger = (register(client) for _ in range(4))
    someone_else = Caller("credential", agent_id=first)
    asks = [
        (stranger, someone_else),
        ("no-such-agent", TRUSTED),
        (first, TRUSTED),
        (second, TRUSTED),
        (third, TRUSTED),
    ]
    leases = jobs.claim_together(services, asks)
    assert leases[0] is None and leases[1] is None and leases[4] is None
    assert {leases[2].job_id, leases[3].job_id} == {1, 2}
    with services.store.read() as session:
        running = session.scalars(
            select(CandidateRow.agent_id).where(CandidateRow.status == JobStatus.RUNNING)
        ).all()
    assert sorted(running) == sorted([first, second])


def test_a_waiting_claim_with_no_work_is_answered_no_work_when_its_wait_ends(client):
    agent = register(client)
    answer = client.post(f"/api/v1/agents/{agent}/claim", params={"wait": 0.2})
    assert answer.status_code == 204
    assert client.app.state.services.work.waiting() == 0


@pytest.mark.parametrize(
    ("wait", "says"),
    [("31", "less than or equal to 30"), ("-1", "greater than or equal to 0"), ("soon", "number")],
)
def test_a_wait_out_of_range_is_named_with_its_bounds(client, wait, says):
    agent = register(client)
    answer = client.post(f"/api/v1/agents/{agent}/claim", params={"wait": wait})
    assert answer.status_code == 422
    message = answer.json()["message"]
    assert message.startswith("query.wait:") and says in message, message


def test_a_claim_whose_client_left_while_waiting_takes_no_job(tmp_path: Path):
    with (
        serve(tmp_path, tmp_path / "hwnas.db", "--no-auth") as server,
        api_client(server.url) as http,
    ):
        agent = register(http)
        with pytest.raises(httpx.ReadTimeout):  # the agent gives up, and its connection closes
            http.post(f"/api/v1/agents/{agent}/claim", params={"wait": 25}, timeout=0.5)
        _until(lambda: _claims_waiting(server.url) == 0, timeout_s=10)  # inside the 25 s
        assert http.post("/api/v1/searches", json=search_request()).status_code == 201
        candidates = http.get("/api/v1/searches/1/candidates").json()
        assert candidates and {c["status"] for c in candidates} == {"queued"}


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_server_told_to_stop_answers_its_waiting_claims_no_work_and_exits(
    tmp_path: Path, workers: str
):
    # uvicorn waits for the requests in flight before it stops; a claim waiting 25 s for work
    # is answered "no work" at the signal instead (server.app.stopping), in each process.
    with serve(tmp_path, tmp_path / "hwnas.db", "--no-auth", "--workers", workers) as server:
        with api_client(server.url) as http:
            agent = register(http)
        waiter, answers = claim_waiting(server.url, agent)
        _until(lambda: _claims_waiting(server.url) == 1)
        asked = time.monotonic()
        server.proc.terminate()
        waiter.join(30)
        server.proc.wait(30)
        stopped_s = time.monotonic() - asked
    assert [a.status_code for a in answers] == [204]
    assert stopped_s < 10, f"the server took {stopped_s:.1f} s to stop"  # not the claim's 25 s


def test_an_agent_told_to_stop_twice_while_its_claim_waits_exits_at_once(tmp_path: Path):
    # `hwnas agent` holds its claims open for work by default. A first stop lets the claim be
    # answered (a job it brings would be measured); a second ends it (agent.worker.StopWaiting)
    # instead of waiting out the server's hold, and the server takes no job for it.
    with (
        serve(tmp_path, tmp_path / "hwnas.db", "--no-auth") as server,
        api_client(server.url) as http,
    ):
        agent = start_agent(server.procs, "agent", server.url, "--claim-wait", "25")
        _until(lambda: _claims_waiting(server.url) == 1, timeout_s=120)  # after torch's import
        asked = time.monotonic()
        agent.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):
            agent.wait(1)  # still waiting for the claim's answer
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(30) == 0
        assert time.monotonic() - asked < 10  # not the 25 s the claim asked to wait
        _until(lambda: _claims_waiting(server.url) == 0, timeout_s=10)  # the server saw it leave
        assert http.post("/api/v1/searches", json=search_request()).status_code == 201
        candidates = http.get("/api/v1/searches/1/candidates").json()
        assert candidates and {c["status"] for c in candidates} == {"queued"}
