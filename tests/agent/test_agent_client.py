"""The agent's API client against scripted HTTP answers (httpx.MockTransport)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agent.client import AgentClient, AgentUnknown, ApiError, BadLease
from archvocab.wire import (
    AgentRegistration,
    DeviceFingerprint,
    Failure,
    JobLease,
    JobResult,
    LeaseRef,
)

Handler = Callable[[httpx.Request], httpx.Response]

FINGERPRINT = DeviceFingerprint(
    hostname="pi",
    os="Linux 6.1",
    cpu_model="Cortex-A72",
    machine="aarch64",
    cores=4,
    ram_bytes=4 * 2**30,
    torch_version="2.3.0",
    accelerator=None,
)
LEASE: dict[str, Any] = {
    "job_id": 7,
    "lease_id": "L7",
    "lease_expires_at": "2030-01-01T00:00:00Z",
    "lease_seconds": 60.0,
    "search_id": 1,
    "arch_id": "abc",
    "spec": {"n_layer": 2},
    "settings": {"seq_len": 16},
}


@pytest.fixture
def scripted() -> Iterator[tuple[AgentClient, list[httpx.Request], list[Handler]]]:
    """A client whose requests are answered by the handlers the test queues, in order."""
    seen: list[httpx.Request] = []
    answers: list[Handler] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.pop(0)(request)

    with httpx.Client(base_url="http://server", transport=httpx.MockTransport(handle)) as http:
        yield AgentClient(http), seen, answers


def reply(status: int, body: Any = None) -> Handler:
    return lambda request: (
        httpx.Response(status, json=body) if body is not None else httpx.Response(status)
    )


def test_register_posts_the_registration(scripted: Any) -> None:
    client, seen, answers = scripted
    info = {
        "agent_id": "a1",
        "device_class": "pi4",
        "name": None,
        "heartbeat_interval_s": 5,
        "lease_seconds": 60,
    }
    answers.append(reply(201, info))
    got = client.register(AgentRegistration(device_class="pi4", fingerprint=FINGERPRINT))
    assert got.agent_id == "a1" and got.heartbeat_interval_s == 5
    assert seen[0].method == "POST" and seen[0].url.path == "/api/v1/agents"
    assert json.loads(seen[0].content)["fingerprint"]["cpu_model"] == "Cortex-A72"


def test_claim_returns_a_lease_or_none(scripted: Any) -> None:
    client, seen, answers = scripted
    answers += [reply(200, LEASE), reply(204)]
    lease = client.claim("a1")
    assert isinstance(lease, JobLease) and lease.job_id == 7 and lease.settings.seq_len == 16
    assert client.claim("a1") is None
    assert [r.url.path for r in seen] == ["/api/v1/agents/a1/claim"] * 2


def test_claim_for_an_unknown_agent_raises_agent_unknown(scripted: Any) -> None:
    client, _, answers = scripted
    answers.append(reply(404, {"detail": "agent a1 is not registered"}))
    with pytest.raises(AgentUnknown, match="404: agent a1 is not registered") as caught:
        client.claim("a1")
    assert caught.value.status == 404


def test_claim_with_unreadable_settings_keeps_the_job_ids(scripted: Any) -> None:
    client, _, answers = scripted
    answers.append(reply(200, {**LEASE, "settings": {"seq_len": 16, "precision": "fp8"}}))
    with pytest.raises(BadLease) as caught:
        client.claim("a1")
    assert (caught.value.job_id, caught.value.lease_id) == (7, "L7")
    assert "precision" in caught.value.message


@pytest.mark.parametrize(("status", "expected"), [(200, True), (409, False), (404, False)])
def test_heartbeat_and_submit_report_whether_the_lease_holds(
    scripted: Any, status: int, expected: bool
) -> None:
    client, seen, answers = scripted
    ref = LeaseRef(agent_id="a1", lease_id="L7")
    answers += [reply(status, {"detail": "x"}), reply(status, {"detail": "x"})]
    assert client.heartbeat(7, ref) is expected
    result = JobResult(agent_id="a1", lease_id="L7", failure=Failure(kind="timeout", message="t"))
    assert client.submit(7, result) is expected
    assert [r.url.path for r in seen] == ["/api/v1/jobs/7/heartbeat", "/api/v1/jobs/7/result"]
    assert json.loads(seen[0].content) == {"agent_id": "a1", "lease_id": "L7"}
    assert json.loads(seen[1].content)["failure"] == {"kind": "timeout", "message": "t"}


def test_unexpected_status_raises_api_error_with_the_detail(scripted: Any) -> None:
    client, _, answers = scripted
    answers.append(reply(500, {"detail": "database is locked"}))
    with pytest.raises(ApiError, match="500: database is locked") as caught:
        client.heartbeat(7, LeaseRef(agent_id="a1", lease_id="L7"))
    assert caught.value.status == 500 and not isinstance(caught.value, AgentUnknown)


def test_connection_errors_propagate(scripted: Any) -> None:
    client, _, answers = scripted

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    answers.append(refuse)
    with pytest.raises(httpx.ConnectError):
        client.claim("a1")
