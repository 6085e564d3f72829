"""The job loop against a minimal real HTTP server, and scripted answers for outages."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agent import cli as agent_cli
from agent.child import FAULT_ENV
from agent.client import AgentClient
from agent.lease import Backoff
from agent.worker import Worker
from archvocab.wire import MeasurementResult
from hwnas.cli import build_parser
from hwnas.testing.ports import free_port
from tests.factories import agent_registration

REGISTRATION = agent_registration("worker-test")


@pytest.fixture
def http(live_server: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.url, timeout=10) as client:
        yield client


def make_worker(http: httpx.Client, **options: Any) -> Worker:
    options.setdefault("poll_interval", 0.05)
    options.setdefault("backoff", Backoff(initial=0.01, factor=2, cap=0.05))
    return Worker(AgentClient(http), REGISTRATION, **options)


def in_thread(worker: Worker) -> tuple[threading.Thread, list[int]]:
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    return thread, codes


# -- against the minimal server ---------------------------------------------------------------
def test_measures_reports_and_exits_when_idle(
    live_server: Any, http: httpx.Client, tiny_spec: dict[str, Any], fast_settings: Any
) -> None:
    state = live_server.state
    # at least 0.8 s of timed samples: heartbeats go every 0.2 s meanwhile
    settings = {**fast_settings.model_dump(), "min_time_s": 0.8, "max_time_s": 1.0}
    good = state.add_job(tiny_spec, settings)
    bad = state.add_job({**tiny_spec, "n_head": [3, 2]})
    worker = make_worker(http, exit_when_idle=0.3)
    assert worker.run() == 0
    assert worker.counters() == {
        "registrations": 1,
        "jobs_claimed": 2,
        "jobs_done": 2,
        "measurements_reported": 1,
        "failures_reported": 1,
        "conflicts": 0,
        "jobs_abandoned": 0,
        "jobs_refused": 0,
        "heartbeats": worker.heartbeats,
        "connection_errors": 0,
        "api_errors": 0,
        "busy_retries": 0,
        "reference_measurements": 0,
    }
    assert [r.device_class for r in state.registrations] == ["cpu-test"]
    measurement = state.results[good].measurement
    assert isinstance(measurement, MeasurementResult)
    assert measurement.latency.samples >= 5 and measurement.peak_memory_mb > 0
    assert state.results[good].lease_id and state.results[good].failure is None
    assert (
        state.results[bad].failure is not None and state.results[bad].failure.kind == "invalid_spec"
    )
    assert worker.heartbeats >= 1 and {job for job, _ in state.heartbeats} == {good}
    assert len(state.claims) >= 3  # two jobs, then at least one empty claim


def test_lost_lease_kills_the_child_and_drops_the_job(
    live_server: Any, http: httpx.Client, tiny_spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAULT_ENV, "hang")  # the child would run until its 60 s timeout
    state = live_server.state
    state.refuse_heartbeats = True
    job = state.add_job(tiny_spec, {"seq_len": 16, "timeout_s": 60})
    worker = make_worker(http, once=True)
    started = time.monotonic()
    assert worker.run() == 0
    assert time.monotonic() - started < 10
    assert (worker.conflicts, worker.jobs_done, worker.heartbeats) == (1, 0, 0)
    assert state.results == {} and state.refused == [("heartbeat", job)]


def test_refused_result_counts_a_conflict(
    live_server: Any, http: httpx.Client, tiny_spec: dict[str, Any]
) -> None:
    state = live_server.state
    state.refuse_results = True
    job = state.add_job({**tiny_spec, "d_model": 0})
    worker = make_worker(http, once=True)
    assert worker.run() == 0
    assert (worker.conflicts, worker.jobs_done, worker.failures_reported) == (1, 0, 0)
    assert state.refused == [("result", job)]


def test_registers_again_when_the_server_forgets_the_agent(
    live_server: Any, http: httpx.Client, tiny_spec: dict[str, Any]
) -> None:
    state = live_server.state
    state.forget_agents_on_result = True  # as if its database were reset after each result
    first, second = (state.add_job({**tiny_spec, "d_model": 0}) for _ in range(2))
    worker = make_worker(http, max_jobs=2)
    assert worker.run() == 0
    assert (worker.registrations, worker.jobs_done, worker.failures_reported) == (2, 2, 2)
    assert set(state.results) == {first, second}
    assert len(state.registrations) == 2
    assert state.results[first].agent_id != state.results[second].agent_id


def test_max_jobs_leaves_the_rest_queued(
    live_server: Any, http: httpx.Client, tiny_spec: dict[str, Any]
) -> None:
    state = live_server.state
    for _ in range(3):
        state.add_job({**tiny_spec, "d_model": 0})
    worker = make_worker(http, max_jobs=2)
    assert worker.run() == 0
    assert worker.jobs_done == 2 and len(state.queue) == 1 and len(state.claims) == 2


def test_stop_finishes_and_reports_the_current_job(
    live_server: Any, http: httpx.Client, tiny_spec: dict[str, Any]
) -> None:
    state = live_server.state
    job = state.add_job(tiny_spec)
    state.add_job(tiny_spec)
    worker = make_worker(http)
    thread, codes = in_thread(worker)
    assert state.job_claimed.wait(30)
    worker.stop()
    thread.join(60)
    assert codes == [0]
    assert worker.jobs_done == 1 and worker.measurements_reported == 1
    assert isinstance(state.results[job].measurement, MeasurementResult)
    assert len(state.queue) == 1 and len(state.claims) == 1  # nothing claimed after stop()


def test_abort_kills_the_current_job(
    live_server: Any, http: httpx.Client, tiny_spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAULT_ENV, "hang")
    state = live_server.state
    state.add_job(tiny_spec, {"seq_len": 16, "timeout_s": 60})
    worker = make_worker(http)
    thread, codes = in_thread(worker)
    assert state.job_claimed.wait(30)
    worker.abort()
    thread.join(10)
    assert codes == [0]
    assert (worker.jobs_abandoned, worker.jobs_done, worker.conflicts) == (1, 0, 0)
    assert state.results == {}


# -- outages ----------------------------------------------------------------------------------
def test_gives_up_when_the_server_stays_unreachable() -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{free_port()}", timeout=2) as http:
        worker = make_worker(http, exit_when_idle=0.3)
        assert worker.run() == 1
    assert worker.connection_errors >= 2 and worker.registrations == 0


Script = dict[str, list[Callable[[httpx.Request], httpx.Response]]]


def scripted_http(script: Script) -> httpx.Client:
    """Answers each path's requests with its queued handlers, then with its last one."""

    def handle(request: httpx.Request) -> httpx.Response:
        key = request.url.path.rsplit("/", 1)[-1]
        answers = script[key]
        return (answers.pop(0) if len(answers) > 1 else answers[0])(request)

    return httpx.Client(base_url="http://server", transport=httpx.MockTransport(handle))


def refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def answer(status: int, body: Any = None) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(status, json=body)


AGENT = {
    "agent_id": "a1",
    "device_class": "cpu-test",
    "name": None,
    "heartbeat_interval_s": 1,
    "lease_seconds": 30,
}


def lease(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "job_id": 3,
        "lease_id": "L3",
        "lease_expires_at": "2030-01-01T00:00:00Z",
        "lease_seconds": 30,
        "search_id": 1,
        "arch_id": "x",
        "spec": spec,
        "settings": {"seq_len": 16},
    }


def test_retries_connection_errors_with_backoff_until_the_server_is_back(
    tiny_spec: dict[str, Any],
) -> None:
    script: Script = {
        "agents": [refused, refused, refused, answer(201, AGENT)],
        "claim": [refused, answer(200, lease({**tiny_spec, "d_model": 0})), answer(204)],
        "result": [refused, refused, answer(200, {})],
    }
    with scripted_http(script) as http:
        worker = make_worker(http, exit_when_idle=0.2)
        assert worker.run() == 0
    assert worker.connection_errors == 3 + 1 + 2
    assert (worker.registrations, worker.jobs_done, worker.failures_reported) == (1, 1, 1)


def test_backoff_doubles_up_to_the_cap() -> None:
    backoff = Backoff(initial=0.5, factor=2, cap=10)
    assert [backoff.next() for _ in range(7)] == [0.5, 1, 2, 4, 8, 10, 10]
    backoff.reset()
    assert backoff.next() == 0.5


def test_a_server_error_is_retried_like_an_outage() -> None:
    script: Script = {
        "agents": [answer(500, {"detail": "boom"}), answer(201, AGENT)],
        "claim": [answer(204)],
    }
    with scripted_http(script) as http:
        worker = make_worker(http, once=True)
        assert worker.run() == 0
    assert (worker.api_errors, worker.registrations, worker.jobs_claimed) == (1, 1, 0)


def test_an_unreadable_lease_is_reported_as_an_error(tiny_spec: dict[str, Any]) -> None:
    bad = {**lease(tiny_spec), "settings": {"seq_len": 16, "precision": "fp8"}}
    sent: list[httpx.Request] = []

    def accept(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={})

    script: Script = {
        "agents": [answer(201, AGENT)],
        "claim": [answer(200, bad)],
        "result": [accept],
    }
    with scripted_http(script) as http:
        worker = make_worker(http, once=True)
        assert worker.run() == 0
    assert (worker.jobs_claimed, worker.failures_reported) == (1, 1)
    body = json.loads(sent[0].content)
    assert body["lease_id"] == "L3" and body["failure"]["kind"] == "error"
    assert "precision" in body["failure"]["message"]


def test_survives_a_server_restart_with_a_fresh_database(
    tiny_spec: dict[str, Any], minimal_server: Any
) -> None:
    state_cls, serving = minimal_server
    first, second = state_cls(), state_cls()
    first.add_job({**tiny_spec, "d_model": 0})
    second.add_job({**tiny_spec, "d_model": 0})
    port = free_port()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
        worker = make_worker(http, max_jobs=2)
        with serving(first, port=port):
            thread, codes = in_thread(worker)
            deadline = time.monotonic() + 30
            while not first.results and time.monotonic() < deadline:
                time.sleep(0.02)
        time.sleep(0.3)  # down: the worker meets refused connections and backs off
        with serving(second, port=port):  # back, with no memory of the agent
            thread.join(30)
    assert codes == [0]
    assert len(first.results) == 1 and len(second.results) == 1
    assert worker.connection_errors >= 1 and worker.registrations == 2
    assert worker.jobs_done == 2 and len(second.registrations) == 1


def test_a_result_answer_that_brings_the_next_job_saves_its_claim(
    tiny_spec: dict[str, Any],
) -> None:
    broken = {**tiny_spec, "d_model": 0}  # fails at once: no measuring in this test
    second = {**lease(broken), "job_id": 4, "lease_id": "L4"}
    unreadable = {**lease(broken), "job_id": 5, "lease_id": "L5", "settings": {"seq_len": -1}}
    sent: list[httpx.Request] = []

    def receipt(job: int, next_job: dict[str, Any] | None) -> Callable:
        def reply(request: httpx.Request) -> httpx.Response:
            sent.append(request)
            return httpx.Response(200, json={"job_id": job, "accepted": True, "next": next_job})

        return reply

    def claim(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=lease(broken)) if len(sent) == 1 else httpx.Response(204)

    script: Script = {
        "agents": [answer(201, AGENT)],
        "claim": [claim],
        # job 3's answer brings job 4, job 4's brings an unreadable job 5, reported failed
        "result": [receipt(3, second), receipt(4, unreadable), receipt(5, None)],
    }
    with scripted_http(script) as http:
        worker = make_worker(http, exit_when_idle=0.2)
        assert worker.run() == 0
    asked = [(r.url.path.rsplit("/", 2)[-2:], r.url.params.get("claim_next")) for r in sent]
    assert asked[:4] == [
        (["a1", "claim"], None),
        (["3", "result"], "true"),
        (["4", "result"], "true"),
        (["5", "result"], None),  # a failure for a lease it could not read: nothing more asked
    ]
    assert all(path[-1] == "claim" for path, _ in asked[4:])  # then claims again, idle
    bodies = [json.loads(r.content) for r in sent[1:4]]
    assert [b["lease_id"] for b in bodies] == ["L3", "L4", "L5"]
    assert "seq_len" in bodies[2]["failure"]["message"]
    assert (worker.jobs_claimed, worker.jobs_done, worker.failures_reported) == (3, 3, 3)


def test_an_agent_at_max_jobs_does_not_ask_for_the_next(tiny_spec: dict[str, Any]) -> None:
    sent: list[httpx.Request] = []

    def accept(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"job_id": 3, "accepted": True})

    script: Script = {
        "agents": [answer(201, AGENT)],
        "claim": [answer(200, lease({**tiny_spec, "d_model": 0}))],
        "result": [accept],
    }
    with scripted_http(script) as http:
        worker = make_worker(http, max_jobs=1)
        assert worker.run() == 0
    assert [r.url.params.get("claim_next") for r in sent] == [None]


@pytest.mark.parametrize("server_waits", [True, False])
def test_a_claim_that_waited_for_work_asks_again_at_once(server_waits: bool) -> None:
    """With `claim_wait`, a claim asks the server to hold it open; a 204 that took its wait
    (the server waited) is followed by the next claim at once, while one answered at once
    (a server that does not wait) is followed after the poll interval, as without."""
    asked: list[tuple[float, str | None]] = []
    worker: Worker | None = None

    def claim(request: httpx.Request) -> httpx.Response:
        asked.append((time.monotonic(), request.url.params.get("wait")))
        if server_waits:
            time.sleep(0.2)  # the server held it open for its wait
        if len(asked) == 2:
            assert worker is not None
            worker.stop()
        return httpx.Response(204)

    script: Script = {"agents": [answer(201, AGENT)], "claim": [claim]}
    with scripted_http(script) as http:
        poll_interval = 20.0 if server_waits else 0.5
        worker = make_worker(http, claim_wait=0.2, poll_interval=poll_interval)
        thread, codes = in_thread(worker)
        thread.join(60)
    assert codes == [0] and [wait for _, wait in asked] == ["0.2", "0.2"]
    gap = asked[1][0] - asked[0][0]
    if server_waits:
        assert gap < poll_interval  # no poll interval after the wait
    else:
        assert gap >= poll_interval  # as after any 204 answered at once


@pytest.mark.parametrize(
    ("options", "most"), [({"once": True}, None), ({"exit_when_idle": 0.5}, 0.5)]
)
def test_a_claim_waits_no_longer_than_the_agent_would_stay(
    options: dict[str, Any], most: float | None
) -> None:
    """`once` exits at the first "no work", so it does not wait for work; `exit_when_idle`
    caps each claim's wait at the idle time left."""
    waits: list[str | None] = []

    def claim(request: httpx.Request) -> httpx.Response:
        waits.append(request.url.params.get("wait"))
        return httpx.Response(204)

    script: Script = {"agents": [answer(201, AGENT)], "claim": [claim] * 50}
    with scripted_http(script) as http:
        worker = make_worker(http, claim_wait=20.0, **options)
        thread, codes = in_thread(worker)
        thread.join(60)
    assert codes == [0] and waits
    if most is None:
        assert waits == [None]
    else:
        assert all(w is not None and 0 <= float(w) <= most for w in waits[:1]), waits
        assert all(w is None or float(w) <= most for w in waits), waits


@pytest.mark.parametrize("value", ["-1", "31", "nan"])
def test_a_claim_wait_out_of_range_is_a_usage_error(capsys: Any, value: str) -> None:
    argv = ["agent", "--server", "http://127.0.0.1:9", "--device-class", "x"]
    args = build_parser().parse_args([*argv, "--claim-wait", value])
    assert agent_cli.run(args) == 2
    assert f"--claim-wait must be 0 to 30 s, got {value}" in capsys.readouterr().err
