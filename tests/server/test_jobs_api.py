"""The agent API: leases, heartbeats, results, expiry, hostile input; restarts lose nothing."""

from __future__ import annotations

import json

from factories import FINGERPRINT, play_agent, register, search_request, synthetic_measurement


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
    assert foreign.status_code == 409 and "not held by agent" in foreign.json()["detail"]
    assert client.post(f"{job}/result", json=_result(alice, lease)).status_code == 200
    again = client.post(f"{job}/result", json=_result(alice, lease))
    assert again.status_code == 409 and "job is measured" in again.json()["detail"]
    measured = client.get("/api/v1/searches/1/candidates", params={"status": "measured"}).json()
    assert len(measured) == 1


def test_an_expired_lease_goes_back_to_the_queue_and_its_late_result_gets_409(client, clock):
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
    late = client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=_result(slow, lease))
    assert late.status_code == 409
    assert (
        client.post(f"/api/v1/jobs/{relet['job_id']}/result", json=_result(fast, relet)).status_code
        == 200
    )


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
    assert view["agent_id"] == agent and view["failures"] == 1 and view["jobs_done"] == 11
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
