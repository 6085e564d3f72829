"""Several server processes on one store (PostgreSQL, or a SQLite file on one machine): each
caches search engines in memory, and a search's revision tells a process when another one
changed it, so a search run across servers proposes exactly what a single server would."""

from __future__ import annotations

import itertools

from sqlalchemy import select

from server.store.rows import CandidateRow
from tests.factories import FINGERPRINT, search_request, synthetic_measurement


def _run(servers, request) -> tuple[list[str], list[str], dict]:
    """Create the search on the first server, then one agent whose requests go to the servers
    in turn, results and the rest each in their own turn so that both servers tell engines:
    (proposed arch ids, frontier ids, final search info)."""
    turn, results = itertools.cycle(servers), itertools.cycle(servers)
    search_id = next(turn).post("/api/v1/searches", json=request).json()["id"]
    body = {"device_class": "test-cpu", "fingerprint": FINGERPRINT}
    agent = next(turn).post("/api/v1/agents", json=body).json()["agent_id"]
    while (claimed := next(turn).post(f"/api/v1/agents/{agent}/claim")).status_code == 200:
        lease = claimed.json()
        result = {
            "agent_id": agent,
            "lease_id": lease["lease_id"],
            "measurement": synthetic_measurement(lease["spec"]),
        }
        reported = next(results).post(f"/api/v1/jobs/{lease['job_id']}/result", json=result)
        assert reported.status_code == 200, reported.text
    assert claimed.status_code == 204, claimed.text
    reader = next(turn)
    proposed = [c["arch_id"] for c in reader.get(f"/api/v1/searches/{search_id}/candidates").json()]
    front = [p["arch_id"] for p in reader.get(f"/api/v1/searches/{search_id}/pareto").json()]
    return proposed, front, reader.get(f"/api/v1/searches/{search_id}").json()


def test_a_search_run_across_two_servers_proposes_what_one_server_would(make_client):
    request = search_request(budget={"max_evaluations": 20}, seed=3)
    alone = _run([make_client("alone.db")], request)
    first, second = make_client("shared.db"), make_client("shared.db")
    shared = _run([first, second], request)
    assert shared[2]["status"] == "finished" and shared[2]["progress"]["measured"] == 20
    assert shared[0] == alone[0], "the proposals differ from a single server's"
    assert shared[1] == alone[1]
    # Each server caught its engine up on the rows the other had added, and none replayed
    # the whole history on a result: the first made the engine, the second rebuilt it once.
    engines = first.app.state.services.engines, second.app.state.services.engines
    assert engines[0].catch_ups > 0 and engines[1].catch_ups > 0
    assert (engines[0].restores, engines[1].restores) == (0, 1)


def test_results_told_by_two_servers_in_turn_are_numbered_one_after_another(make_client):
    first, second = make_client("shared.db"), make_client("shared.db")
    _run([first, second], search_request(budget={"max_evaluations": 20}, seed=3))
    # Each server keeps the last number it gave, at the search's revision: the other's
    # results in between move the revision, and the number is read again.
    with first.app.state.store.read() as session:
        numbers = session.scalars(select(CandidateRow.result_seq)).all()
    assert sorted(n for n in numbers if n is not None) == list(range(1, 21))


def test_a_cancel_on_one_server_stops_proposals_on_the_other(make_client):
    first, second = make_client("shared.db"), make_client("shared.db")
    search_id = first.post("/api/v1/searches", json=search_request()).json()["id"]
    body = {"device_class": "test-cpu", "fingerprint": FINGERPRINT}
    agent = second.post("/api/v1/agents", json=body).json()["agent_id"]
    lease = second.post(f"/api/v1/agents/{agent}/claim").json()
    assert first.post(f"/api/v1/searches/{search_id}/cancel").json()["status"] == "cancelled"
    result = {
        "agent_id": agent,
        "lease_id": lease["lease_id"],
        "measurement": synthetic_measurement(lease["spec"]),
    }
    # The running job may still report, but the other server proposes nothing more.
    assert second.post(f"/api/v1/jobs/{lease['job_id']}/result", json=result).status_code == 200
    assert second.post(f"/api/v1/agents/{agent}/claim").status_code == 204
    info = second.get(f"/api/v1/searches/{search_id}").json()
    assert info["status"] == "cancelled" and info["progress"]["measured"] == 1


def _report(client, agent: str, lease: dict, lease_id: str | None = None):
    result = {
        "agent_id": agent,
        "lease_id": lease_id or lease["lease_id"],
        "measurement": synthetic_measurement(lease["spec"]),
    }
    return client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=result)


def test_a_refused_result_costs_no_other_search_its_engine(client):
    services = client.app.state.services
    agents = {}
    for device_class in ("test-cpu", "other-cpu"):
        request = search_request(device_class=device_class, budget={"max_evaluations": 40})
        client.post("/api/v1/searches", json=request).raise_for_status()
        body = {"device_class": device_class, "fingerprint": FINGERPRINT}
        agents[device_class] = client.post("/api/v1/agents", json=body).json()["agent_id"]
    mine = agents["test-cpu"]
    first = client.post(f"/api/v1/agents/{mine}/claim").json()
    assert _report(client, mine, first).status_code == 200
    restores = services.engines.restores
    other = agents["other-cpu"]
    theirs = client.post(f"/api/v1/agents/{other}/claim").json()
    assert _report(client, other, theirs, lease_id="not-the-lease").status_code == 409
    second = client.post(f"/api/v1/agents/{mine}/claim").json()
    assert _report(client, mine, second).status_code == 200
    assert services.engines.restores == restores, "the refusal made the other search replay"


def test_a_lease_another_server_gave_out_is_requeued_by_the_next_claim_once_it_runs_out(
    make_client, clock
):
    """A claim looks for expired leases only once the first running lease it knew of can have
    run out (`leases.ExpiryWatch`); a lease another server gave out later runs out later, so
    no expired job waits for the schedule."""
    first, second = make_client("shared.db"), make_client("shared.db")  # 30 s leases
    first.post("/api/v1/searches", json=search_request()).raise_for_status()
    body = {"device_class": "test-cpu", "fingerprint": FINGERPRINT}
    a, b, c = (first.post("/api/v1/agents", json=body).json()["agent_id"] for _ in range(3))
    held = first.post(f"/api/v1/agents/{a}/claim").json()  # runs out at t + 30
    clock.advance(20)
    other = second.post(f"/api/v1/agents/{b}/claim").json()  # runs out at t + 50
    assert other["job_id"] != held["job_id"]
    clock.advance(5)  # t + 25: nothing has run out, and nothing is taken back
    early = first.post(f"/api/v1/agents/{c}/claim").json()
    assert early["job_id"] not in (held["job_id"], other["job_id"])
    clock.advance(10)  # t + 35: a's lease ran out; the next claim, on either server, requeues it
    late = second.post(f"/api/v1/agents/{c}/claim").json()
    assert late["job_id"] == held["job_id"]
    ref = {"agent_id": a, "lease_id": held["lease_id"]}
    assert first.post(f"/api/v1/jobs/{held['job_id']}/heartbeat", json=ref).status_code == 409
    clock.advance(20)  # t + 55: b's lease ran out too, and the first server takes it back
    again = first.post(f"/api/v1/agents/{a}/claim").json()
    assert again["job_id"] == other["job_id"]
