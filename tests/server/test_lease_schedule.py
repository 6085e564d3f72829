"""Expired leases are requeued on a schedule, not only when another agent claims (issue 19):
the app's background pass (server.app.sweeper) and the pass itself
(server.services.leases.requeue_stale), with several server processes on one database."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import server.app.sweeper as sweeper
from server.services.leases import requeue_stale, sweep_grace, sweep_interval
from server.settings import Settings
from tests.factories import play_agent, register, search_request, synthetic_measurement


def _claim(client, agent: str) -> dict:
    response = client.post(f"/api/v1/agents/{agent}/claim")
    assert response.status_code == 200, response.text
    return response.json()


def _status(client, search_id: int, arch_id: str) -> str:
    candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
    return next(c["status"] for c in candidates if c["arch_id"] == arch_id)


def _wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.02)


def test_the_sweep_runs_every_sixth_of_a_lease_and_waits_one_heartbeat_period():
    assert sweep_interval(Settings(lease_seconds=3)) == 0.5
    assert sweep_interval(Settings(lease_seconds=600)) == 10
    assert sweep_interval(Settings(lease_seconds=600, requeue_every_s=2)) == 2
    assert sweep_grace(Settings(lease_seconds=60, heartbeat_interval_s=10)) == 10
    assert sweep_grace(Settings(lease_seconds=3, heartbeat_interval_s=10)) == 1.5


def test_a_dead_agents_job_goes_back_to_the_queue_with_no_claim(make_client, clock):
    client = make_client(requeue_every_s=0.05)  # the fixture's lease is 30 s
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    dead = register(client)
    lease = _claim(client, dead)
    assert _status(client, search_id, lease["arch_id"]) == "running"
    # The agent died: its lease (30 s) ran out, and the grace after it (one heartbeat
    # period, 10 s); nobody else asks for work.
    clock.advance(30 + 11)
    _wait_until(
        lambda: _status(client, search_id, lease["arch_id"]) == "queued",
        timeout=10,
        what="the schedule to requeue the expired job",
    )
    running = client.get(f"/api/v1/searches/{search_id}").json()["progress"]["running"]
    assert running == 0
    # Exactly once still: the dead agent's result, should it come after all, counts once...
    job = f"/api/v1/jobs/{lease['job_id']}/result"
    late = {
        "agent_id": dead,
        "lease_id": lease["lease_id"],
        "measurement": synthetic_measurement(lease["spec"]),
    }
    assert client.post(job, json=late).json()["duplicate"] is False
    assert client.post(job, json=late).json()["duplicate"] is True
    # ...and the search goes on to the end with another agent, that job never measured again.
    assert play_agent(client, register(client)) == 11
    info = client.get(f"/api/v1/searches/{search_id}").json()
    assert info["status"] == "finished" and info["progress"]["measured"] == 12


def test_a_lease_that_only_just_ran_out_is_left_to_its_agent(make_client, clock):
    # A schedule too slow to run during the test: the passes below are the test's own.
    client = make_client(requeue_every_s=60)
    store = client.app.state.store
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    lease = _claim(client, agent)
    beat = f"/api/v1/jobs/{lease['job_id']}/heartbeat"
    ref = {"agent_id": agent, "lease_id": lease["lease_id"]}
    clock.advance(30 + 9)  # ran out 9 s ago: within the grace of one heartbeat period (10 s)
    assert requeue_stale(store) == 0
    assert client.post(beat, json=ref).status_code == 200  # the slow agent keeps its job
    clock.advance(30 + 11)
    assert requeue_stale(store) == 1
    assert client.post(beat, json=ref).status_code == 409
    assert requeue_stale(store) == 0  # nothing left: the pass is idempotent


def test_server_processes_sweeping_one_database_requeue_each_job_once(make_client, clock):
    # Two apps over one database, as `hwnas serve --workers 2` or two hosts run them.
    first = make_client("shared.db", requeue_every_s=60)
    second = make_client("shared.db", requeue_every_s=60)
    first.post("/api/v1/searches", json=search_request())
    leases = [_claim(first, register(first)) for _ in range(2)]
    clock.advance(30 + 11)
    stores = [first.app.state.store, second.app.state.store] * 4
    counts: list[int] = []
    start = threading.Barrier(len(stores))

    def sweep(store) -> None:
        start.wait()
        counts.append(requeue_stale(store))

    threads = [threading.Thread(target=sweep, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sum(counts) == 2 and len(counts) == len(stores)
    taken = [_claim(second, register(second))["job_id"] for _ in range(2)]
    assert sorted(taken) == sorted(lease["job_id"] for lease in leases)


def test_stopping_the_server_waits_for_a_sweep_under_way(make_client, monkeypatch):
    # A pass made slow (failure injection): the app's shutdown must let it finish before the
    # store closes, or the pass's pooled connection outlives its pool.
    events: list[str] = []
    started = threading.Event()

    def slow_pass(store, work) -> int:
        started.set()
        time.sleep(0.3)
        events.append("pass finished")
        return 0

    monkeypatch.setattr(sweeper, "requeue_stale", slow_pass)
    client = make_client(requeue_every_s=0.01)
    store = client.app.state.store
    close = store.close
    monkeypatch.setattr(store, "close", lambda: (events.append("store closed"), close()))
    assert started.wait(10)
    client.__exit__(None, None, None)
    assert events[-2:] == ["pass finished", "store closed"]
