"""Structured logs: one JSON object per line, a line per request, domain events with ids."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from server.app.logs import configure_logging
from tests.factories import play_agent, register, search_request, synthetic_measurement


@contextmanager
def captured(fmt: str) -> Iterator[io.StringIO]:
    """Route every log record through configure_logging(fmt) into a string; undo afterwards."""
    root = logging.getLogger()
    before = root.level
    stream = io.StringIO()
    handler = configure_logging(fmt, "info", stream=stream)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(before)


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    with captured("json") as stream:
        yield stream


def lines(stream: io.StringIO) -> list[dict]:
    # json.loads fails the test on any line that is not one JSON object.
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def events(stream: io.StringIO, name: str) -> list[dict]:
    return [e for e in lines(stream) if e.get("event") == name]


def test_each_request_is_one_json_line_with_its_route_template(client, json_log):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    client.get(f"/api/v1/searches/{search_id}")
    [request] = [
        e for e in events(json_log, "http.request") if e["path"] == f"/api/v1/searches/{search_id}"
    ]
    assert request["logger"] == "hwnas.http" and request["level"] == "info"
    assert request["method"] == "GET" and request["status"] == 200
    assert request["route"] == "/api/v1/searches/{search_id}"
    assert isinstance(request["duration_ms"], float) and request["duration_ms"] >= 0
    assert request["ts"].endswith("Z") and request["client"]


def test_domain_events_carry_their_ids(client, json_log, clock):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    [created] = events(json_log, "search.created")
    assert created["logger"] == "hwnas.events"
    assert created["search_id"] == search_id and created["device_class"] == "test-cpu"
    assert created["strategy"] == "lts" and created["budget"] == 12
    agent = register(client)
    assert events(json_log, "agent.registered")[0]["agent_id"] == agent
    lease = client.post(f"/api/v1/agents/{agent}/claim").json()
    [claimed] = events(json_log, "job.claimed")
    assert claimed == {**claimed, "job_id": lease["job_id"], "search_id": search_id}
    failure = {"agent_id": agent, "lease_id": lease["lease_id"], "failure": {"kind": "timeout"}}
    client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=failure)
    [result] = events(json_log, "job.result")
    assert result["status"] == "failed" and result["failure_kind"] == "timeout"
    client.post(f"/api/v1/agents/{agent}/claim")
    clock.advance(31)  # the client fixture's lease is 30 s
    client.post(f"/api/v1/agents/{register(client)}/claim")
    assert events(json_log, "lease.expired")[0]["requeued"] == 1
    client.post(f"/api/v1/searches/{search_id}/cancel")
    [finished] = events(json_log, "search.finished")
    assert finished["search_id"] == search_id and finished["reason"] == "cancelled"


def test_a_strategy_that_falls_back_says_so_once_in_the_search_events(
    client, json_log, monkeypatch
):
    """hwnas's residual model cannot be fitted (injected): the search still finishes, and its
    events say once that it screened with the plain cost models instead, and why."""

    def cannot_fit(*args, **kwargs):
        raise ValueError("injected fit failure")

    monkeypatch.setattr("search.residual.ResidualModel", cannot_fit)
    request = search_request(
        strategy="hwnas", surrogate="residual_gp", budget={"max_evaluations": 16}
    )
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    play_agent(client, register(client))
    info = client.get(f"/api/v1/searches/{search_id}").json()
    assert info["status"] == "finished" and info["finish_reason"] == "budget"
    [fallback] = events(json_log, "search.fallback")
    assert fallback["search_id"] == search_id and fallback["strategy"] == "hwnas"
    assert "injected fit failure" in fallback["reason"]
    assert "plain cost models" in fallback["reason"]


def test_an_initial_design_without_a_known_objective_says_it_is_random(client, json_log):
    """An hwnas search whose proxy the agents compute (snip): nothing is known before a
    measurement, so its analytic-front design is random samples, and its events say so."""
    request = search_request(strategy="hwnas", objectives=["snip", "latency_ms", "memory_mb"])
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    assert client.get(f"/api/v1/searches/{search_id}/candidates").json()  # proposed already
    [fallback] = events(json_log, "search.fallback")
    assert fallback["search_id"] == search_id and fallback["strategy"] == "hwnas"
    assert "none of the objectives (snip, latency_ms, memory_mb) is known" in fallback["reason"]
    assert "4 of its 4 candidates are random samples" in fallback["reason"]


def test_a_measured_result_is_logged_without_a_failure_kind(client, json_log):
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    lease = client.post(f"/api/v1/agents/{agent}/claim").json()
    body = {
        "agent_id": agent,
        "lease_id": lease["lease_id"],
        "measurement": synthetic_measurement(lease["spec"]),
    }
    client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=body)
    [result] = events(json_log, "job.result")
    assert result["status"] == "measured" and result["failure_kind"] is None


def test_text_format_keeps_the_fields_as_key_value_pairs():
    with captured("text") as stream:
        logging.getLogger("hwnas.events").info("x", extra={"event": "x", "search_id": 4})
        logging.getLogger("hwnas.test").debug("below the level")
    [line] = stream.getvalue().splitlines()
    assert " INFO " in line and "hwnas.events x" in line and line.endswith("search_id=4")


def test_configure_logging_replaces_its_own_handler_and_rejects_unknown_formats():
    with captured("json") as first:
        logging.getLogger("hwnas.test").info("to the first")
        with captured("json") as second:
            logging.getLogger("hwnas.test").info("to the second")
    assert [e["message"] for e in lines(first)] == ["to the first"]
    assert [e["message"] for e in lines(second)] == ["to the second"]
    with pytest.raises(ValueError, match="'json' or 'text'"):
        configure_logging("xml", "info")  # type: ignore[arg-type]


def test_a_value_json_cannot_encode_is_written_as_text_not_raised(json_log):
    logging.getLogger("hwnas.test").info("odd", extra={"when": object})
    [entry] = lines(json_log)
    assert entry["message"] == "odd" and "object" in entry["when"]


def test_a_first_start_says_in_one_line_what_the_migrations_did(tmp_path):
    """A new database: one line that the schema was created, none of Alembic's narration
    (13 INFO lines before the one-time tokens, one naming an internal issue); a second start
    on the same database: nothing about the schema."""
    from hwnas.testing.ports import free_port
    from hwnas.testing.processes import Processes
    from hwnas.testing.servers import start_server

    procs = Processes(tmp_path)
    db = tmp_path / "fresh.db"
    try:
        for name in ("first", "second"):
            start_server(procs, db, free_port(), "--no-auth", name=name)
            procs.stop_all()
    finally:
        procs.stop_all()
    first, second = procs.log("first"), procs.log("second")
    assert "alembic" not in first and "alembic" not in second
    assert first.count("database schema created at revision") == 1
    assert "database schema" not in second
