"""The agents' routes answered in front of FastAPI (server.app.agent_path): requests that read
as expected never reach the app behind; any other goes on to it whole, and gets its answer."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from server.app.agent_path import AgentPath
from server.app.factory import create_app
from server.services import agents, auth
from server.settings import Settings
from tests.factories import FINGERPRINT, register, search_request, synthetic_measurement


class Behind:
    """The app behind the AgentPath under test (the whole hwnas app), noting what reaches it."""

    def __init__(self, app) -> None:  # noqa: ANN001 - an ASGI app
        self.app = app
        self.reached: list[tuple[str, bytes]] = []

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI callables
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks = []

        async def noted() -> dict:
            message = await receive()
            chunks.append(message.get("body", b""))
            return message

        try:
            await self.app(scope, noted, send)
        finally:
            self.reached.append((f"{scope['method']} {scope['path']}", b"".join(chunks)))


@pytest.fixture
def fronted(tmp_path: Path):
    """(a client of an AgentPath in front of the app, what reached the app), auth as asked."""

    def make(**settings) -> tuple[TestClient, Behind]:
        url = f"sqlite:///{tmp_path / 'a.db'}"
        app = create_app(Settings(database_url=url, max_request_bytes=4096, **settings))
        behind = Behind(app)
        front = AgentPath(behind, app.state.services, max_bytes=4096)
        client = TestClient(front)
        made.append(client.__enter__())
        return client, behind

    made: list[TestClient] = []
    yield make
    for client in made:
        client.__exit__(None, None, None)


def _result(agent: str, lease: dict) -> dict:
    return {
        "agent_id": agent,
        "lease_id": lease["lease_id"],
        "measurement": synthetic_measurement(lease["spec"]),
    }


def test_registrations_claims_heartbeats_and_results_that_read_never_reach_the_app(fronted):
    client, behind = fronted()
    client.post("/api/v1/searches", json=search_request())
    behind.reached.clear()
    agent = register(client)
    claimed = client.post(f"/api/v1/agents/{agent}/claim")
    assert claimed.status_code == 200 and claimed.headers["content-type"] == "application/json"
    lease, results = claimed.json(), 0
    beat = client.post(
        f"/api/v1/jobs/{lease['job_id']}/heartbeat",
        json={"agent_id": agent, "lease_id": lease["lease_id"]},
    )
    assert beat.status_code == 200 and beat.json()["job_id"] == lease["job_id"]
    while lease is not None:
        url = f"/api/v1/jobs/{lease['job_id']}/result"
        answer = client.post(url, params={"claim_next": True}, json=_result(agent, lease))
        assert answer.status_code == 200 and answer.json()["accepted"] is True
        lease, results = answer.json()["next"], results + 1
    assert client.post(f"/api/v1/agents/{agent}/claim").status_code == 204
    assert behind.reached == []
    measured = client.get("/api/v1/searches/1/candidates", params={"status": "measured"}).json()
    assert results == len(measured) == 12  # the search heard every result
    assert behind.reached == [("GET /api/v1/searches/1/candidates", b"")]


@pytest.mark.parametrize(
    ("path", "query", "body", "status", "named"),
    [
        ("/api/v1/jobs/1/result", "", b"{not json", 422, "JSON decode error"),
        ("/api/v1/jobs/1/result", "", b'{"agent_id": "a"}', 422, "lease_id"),
        ("/api/v1/jobs/1/result", "claim_next=maybe", None, 422, "claim_next"),
        ("/api/v1/jobs/0/result", "", None, 422, "job_id"),
        (f"/api/v1/jobs/{2**31}/result", "", None, 422, "job_id"),
        ("/api/v1/jobs/1/heartbeat", "", b'{"agent_id": 5}', 422, "agent_id"),
        ("/api/v1/agents/" + "a" * 65 + "/claim", "", b"", 422, "agent_id"),
        ("/api/v1/jobs/1/result", "", b"x" * 5000, 413, "limit"),
    ],
)
def test_requests_that_do_not_read_go_on_whole_and_get_the_apps_answer(
    fronted, path, query, body, status, named
):
    client, behind = fronted()
    agent = register(client)
    if body is None:
        body = b'{"agent_id": "%s", "lease_id": "x", "measurement": null}' % agent.encode()
    url = f"{path}?{query}" if query else path
    answer = client.post(url, content=body, headers={"content-type": "application/json"})
    assert answer.status_code == status and named in answer.text
    assert behind.reached[-1] == (f"POST {path}", body if status != 413 else b"")


@pytest.mark.parametrize("content_type", [None, "text/plain"])
def test_a_body_that_is_not_sent_as_json_goes_on_and_is_refused(fronted, content_type):
    client, behind = fronted()
    agent = register(client)
    body = b'{"agent_id": "%s", "lease_id": "x"}' % agent.encode()
    headers = {} if content_type is None else {"content-type": content_type}
    answer = client.post("/api/v1/jobs/5/heartbeat", content=body, headers=headers)
    assert answer.status_code == 422 and "valid dictionary" in answer.text
    assert behind.reached[-1] == ("POST /api/v1/jobs/5/heartbeat", body)


def test_domain_errors_answered_in_front_have_the_apps_shape(fronted):
    client, behind = fronted(auth=True)
    behind.reached.clear()
    unsigned = client.post("/api/v1/agents/someone/claim")
    assert unsigned.status_code == 401 and unsigned.headers["www-authenticate"] == "Bearer"
    assert "the agent's credential" in unsigned.json()["detail"]
    stranger = client.post(
        "/api/v1/agents/someone/claim", headers={"authorization": "Bearer hwnas_a_unknown"}
    )
    assert stranger.status_code == 401 and "credential" in stranger.json()["detail"]
    assert behind.reached == []


def test_refusals_answered_in_front_are_those_fastapi_gives(fronted):
    """Each refused registration, claim and heartbeat, sent as is (answered in front) and with
    a query parameter FastAPI ignores (which sends it on): the same status, body and headers."""
    client, behind = fronted(auth=True)
    store = behind.app.state.store
    with store.write() as session:
        _, user = auth.create_token(session, "alice", "user", store.now())
        _, enroll = auth.create_token(session, "fleet", "agent", store.now())
    client.post("/api/v1/searches", json=search_request(), headers=_bearer(user))
    body = {"device_class": "test-cpu", "fingerprint": FINGERPRINT}
    registered = client.post("/api/v1/agents", json=body, headers=_bearer(enroll))
    by_app = client.post("/api/v1/agents?unread=1", json=body, headers=_bearer(enroll))
    assert registered.status_code == by_app.status_code == 201
    assert registered.headers["content-type"] == by_app.headers["content-type"]
    differ = {"agent_id", "credential"}  # each agent's own
    same = {k: v for k, v in registered.json().items() if k not in differ}
    assert same == {k: v for k, v in by_app.json().items() if k not in differ}
    assert set(registered.json()) == set(by_app.json())
    registered = registered.json()
    agent, credential = registered["agent_id"], _bearer(registered["credential"])
    lease = client.post(f"/api/v1/agents/{agent}/claim", headers=credential).json()
    beat = f"/api/v1/jobs/{lease['job_id']}/heartbeat"
    wrong = {"agent_id": agent, "lease_id": "not-this-one"}
    cases = [
        ("/api/v1/agents/nobody/claim", None, credential),  # another agent's credential
        ("/api/v1/agents/nobody/claim", None, {}),
        ("/api/v1/agents/nobody/claim", None, {"authorization": "Basic abc"}),
        ("/api/v1/agents/nobody/claim", None, _bearer(user)),
        (beat, wrong, credential),
        ("/api/v1/jobs/999/heartbeat", {"agent_id": agent, "lease_id": "x"}, credential),
        (beat, {**wrong, "agent_id": "nobody"}, credential),
        ("/api/v1/agents", body, {}),  # registering without an enrollment token
        ("/api/v1/agents", body, _bearer(user)),
        ("/api/v1/agents", body, credential),
        ("/api/v1/agents", body, {"authorization": "Bearer hwnas_a_unknown"}),
    ]
    for path, sent, headers in cases:
        answers = []
        for query in ("", "?unread=1"):
            before = len(behind.reached)
            answer = client.post(path + query, json=sent, headers=headers)
            answers.append(
                (answer.status_code, answer.json(), answer.headers.get("www-authenticate"))
            )
            assert len(behind.reached) == before + bool(query)
        assert answers[0] == answers[1] and answers[0][0] >= 400, (path, answers)


def _bearer(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


def test_an_unknown_job_is_a_404_naming_it(fronted):
    client, behind = fronted()
    agent = register(client)
    body = {"agent_id": agent, "lease_id": "x", "failure": {"kind": "error", "message": "m"}}
    answer = client.post("/api/v1/jobs/77/result", json=body)
    assert answer.status_code == 404 and answer.json()["resource"] == "job"
    assert behind.reached == []  # neither the registration nor the result


def test_registrations_take_a_worker_thread_one_at_a_time_and_claims_go_on_meanwhile(
    fronted, monkeypatch
):
    client, _ = fronted()
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    lock, one_inside = threading.Lock(), threading.Event()
    inside, most, registered = 0, 0, 0
    real = agents.register_agent

    def slow_registration(*args, **kwargs):  # noqa: ANN002, ANN003 - register_agent's own
        nonlocal inside, most, registered
        with lock:
            inside += 1
            most = max(most, inside)
        one_inside.set()
        time.sleep(0.05)
        with lock:
            inside -= 1
            registered += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(agents, "register_agent", slow_registration)
    with ThreadPoolExecutor(8) as pool:
        registrations = [pool.submit(register, client) for _ in range(6)]
        assert one_inside.wait(10)
        claimed = client.post(f"/api/v1/agents/{agent}/claim")
        registered_by_then = registered
        new_agents = [registration.result() for registration in registrations]
    assert claimed.status_code == 200
    assert registered_by_then < 6  # the claim did not queue behind the registrations
    assert most == 1
    assert len(set(new_agents)) == 6
