"""What retrying cannot fix ends the agent at once (issue 19): a 401/403 at registration or on a
claim is one error line and exit code EXIT_REFUSED, with or without --once; network errors and
5xx are still retried; an idle agent's polls are not logged at INFO."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agent.client import AgentClient, Refused
from agent.lease import Backoff
from agent.worker import EXIT_REFUSED, Worker
from tests.factories import agent_registration

Handler = Callable[[httpx.Request], httpx.Response]
AGENT = {
    "agent_id": "a1",
    "device_class": "cpu-test",
    "name": None,
    "heartbeat_interval_s": 1,
    "lease_seconds": 30,
    "credential": "hwnas_a_secret",
}
REVOKED = {"detail": "token 'pis' was revoked at 2026-11-25 20:00 UTC"}


def answer(status: int, body: Any = None) -> Handler:
    return lambda request: httpx.Response(status, json=body)


def refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


class Server:
    """Answers each path's requests with its queued handlers, then with its last one; keeps
    what it was sent."""

    def __init__(self, script: dict[str, list[Handler]]) -> None:
        self.script = script
        self.sent: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        answers = self.script[request.url.path.rsplit("/", 1)[-1]]
        return (answers.pop(0) if len(answers) > 1 else answers[0])(request)

    def paths(self) -> list[str]:
        return [r.url.path.rsplit("/", 1)[-1] for r in self.sent]


@pytest.fixture
def quiet_httpx_restored() -> Iterator[None]:
    """The worker quiets httpx's logger; put it back as it was for the other tests."""
    http = logging.getLogger("httpx")
    level = http.level
    http.setLevel(logging.NOTSET)
    yield
    http.setLevel(level)


def run(server: Server, **options: Any) -> tuple[Worker, int]:
    options.setdefault("poll_interval", 0.01)
    options.setdefault("backoff", Backoff(initial=0.01, factor=2, cap=0.05))
    transport = httpx.MockTransport(server)
    with httpx.Client(base_url="http://server", transport=transport) as http:
        client = AgentClient(http, enrollment_token="hwnas_e_token")
        worker = Worker(client, agent_registration("refusals"), **options)
        return worker, worker.run()


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("once", [False, True])
def test_a_wrong_enrollment_token_ends_the_agent_with_one_line(caplog, once) -> None:
    server = Server({"agents": [answer(401, {"detail": "token not recognised: never issued"})]})
    worker, code = run(server, once=once)
    assert code == EXIT_REFUSED and server.paths() == ["agents"]  # asked once, not retried
    [line] = errors(caplog)
    assert line.startswith(
        "registering with the server was refused (401: token not recognised: never issued); "
        "give the agent a valid agent enrollment token (--token or HWNAS_AGENT_TOKEN"
    )
    assert "\n" not in line and worker.registrations == 0


def test_a_token_of_another_kind_is_refused_for_good_too(caplog) -> None:
    detail = (
        "registering an agent needs an agent enrollment token; this request carries a user token"
    )
    server = Server({"agents": [answer(403, {"detail": detail})]})
    _, code = run(server)
    assert code == EXIT_REFUSED
    assert errors(caplog)[0].startswith(f"registering with the server was refused (403: {detail})")


def test_a_revoked_token_ends_the_agent_at_its_next_claim(caplog) -> None:
    # The credential worked, then its enrollment token was revoked: the claim's 401 makes the
    # agent register again, and that is refused for good.
    forgotten = {"detail": "agent credential not recognised: its enrollment token revoked"}
    server = Server(
        {
            "agents": [answer(201, AGENT), answer(401, REVOKED)],
            "claim": [answer(204), answer(401, forgotten)],
        }
    )
    worker, code = run(server)
    assert code == EXIT_REFUSED
    assert server.paths() == ["agents", "claim", "claim", "agents"]
    [line] = errors(caplog)
    assert "registering with the server was refused (401: token 'pis' was revoked" in line
    assert worker.registrations == 1


def test_a_credential_refused_as_soon_as_it_is_issued_ends_the_agent(caplog) -> None:
    detail = "this agent credential belongs to agent 'a2', not 'a1'"
    server = Server({"agents": [answer(201, AGENT)], "claim": [answer(403, {"detail": detail})]})
    _, code = run(server, once=True)
    assert code == EXIT_REFUSED and server.paths() == ["agents", "claim"]
    assert errors(caplog)[0].startswith(f"claiming work was refused (403: {detail})")


def test_network_errors_and_server_errors_are_still_retried() -> None:
    server = Server(
        {
            "agents": [refused, answer(503, {"detail": "busy"}), answer(201, AGENT)],
            "claim": [answer(500, {"detail": "boom"}), answer(204)],
        }
    )
    worker, code = run(server, once=True)
    assert code == 0
    assert (worker.connection_errors, worker.api_errors, worker.registrations) == (1, 2, 1)


def test_the_client_tells_refusals_from_other_errors() -> None:
    server = Server({"agents": [answer(401, REVOKED)]})
    with httpx.Client(base_url="http://server", transport=httpx.MockTransport(server)) as http:
        with pytest.raises(Refused, match="401: token 'pis' was revoked") as caught:
            AgentClient(http).register(agent_registration("x"))
    assert caught.value.status == 401


def test_idle_polls_are_not_logged_at_info(caplog, quiet_httpx_restored) -> None:
    caplog.set_level(logging.INFO)
    server = Server({"agents": [answer(201, AGENT)], "claim": [answer(204)]})
    _, code = run(server, exit_when_idle=0.3)
    assert code == 0 and server.paths().count("claim") >= 10
    polls = [r for r in caplog.records if "/claim" in r.getMessage() or "204" in r.getMessage()]
    assert polls == []  # httpx would log each: `HTTP Request: POST .../claim "... 204 ..."`
    assert len(caplog.records) <= 3  # registered, no work, stopped
