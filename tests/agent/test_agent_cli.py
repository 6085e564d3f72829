"""`hwnas agent` end to end: a real agent process against the minimal server."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from typing import Any

import pytest

from agent.cli import run
from hwnas.cli import build_parser


def agent_args(url: str, *extra: str) -> list[str]:
    return [
        "agent",
        "--server",
        url,
        "--device-class",
        "cpu-test",
        "--poll-interval",
        "0.1",
        *extra,
    ]


def test_once_measures_one_job_and_exits(live_server: Any, tiny_spec: dict[str, Any]) -> None:
    state = live_server.state
    job = state.add_job({**tiny_spec, "d_model": 0})
    later = state.add_job({**tiny_spec, "d_model": 0})
    args = build_parser().parse_args(agent_args(live_server.url, "--once", "--name", "cli-test"))
    assert isinstance(args, argparse.Namespace)
    assert run(args) == 0
    assert list(state.results) == [job] and [j["job_id"] for j in state.queue] == [later]
    assert state.registrations[0].name == "cli-test"
    assert state.registrations[0].fingerprint.cores >= 1


def test_bad_device_class_is_a_usage_error(live_server: Any, capsys: Any) -> None:
    args = build_parser().parse_args(
        ["agent", "--server", live_server.url, "--device-class", "a b"]
    )
    assert run(args) == 2
    assert "device_class" in capsys.readouterr().err
    assert live_server.state.registrations == []


def test_sigterm_finishes_the_current_job_then_exits(
    live_server: Any, tiny_spec: dict[str, Any]
) -> None:
    state = live_server.state
    job = state.add_job(tiny_spec)
    state.add_job(tiny_spec)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hwnas", *agent_args(live_server.url)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with proc:
        assert state.job_claimed.wait(60), proc.stderr
        proc.send_signal(signal.SIGTERM)  # the child needs ~2 s to import torch: mid-job
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "SIGTERM: finishing the current job" in err
    assert state.results[job].measurement is not None
    assert len(state.claims) == 1 and len(state.queue) == 1
    assert out == ""


def test_server_url_needs_a_scheme(capsys: Any) -> None:
    args = build_parser().parse_args(["agent", "--server", "localhost:8000", "--device-class", "x"])
    assert run(args) == 2
    assert "http://" in capsys.readouterr().err


class _Http:
    """Stands in for httpx.Client: records the claims that reach the server."""

    def __init__(self) -> None:
        self.posts: list[str] = []

    def post(self, path: str, **_: Any) -> Any:
        self.posts.append(path)
        raise AssertionError("claim reached the server")


def test_no_job_is_claimed_before_the_measuring_processes_are_warm() -> None:
    import threading

    from agent.cli import ClaimWhenReady

    http = _Http()
    client = ClaimWhenReady(http, enrollment_token=None)  # type: ignore[arg-type]
    stopping = threading.Event()
    client.stopping = stopping.is_set
    threading.Timer(0.3, stopping.set).start()
    assert client.claim("agent-1") is None  # stopped while waiting: "no work"
    assert http.posts == []


def test_warming_starts_once_the_server_accepts_the_agent(monkeypatch) -> None:
    from agent.cli import ClaimWhenReady
    from agent.client import AgentClient, Refused

    warmed: list[object] = []
    client = ClaimWhenReady(_Http(), enrollment_token="wrong", warm=warmed.append)  # type: ignore[arg-type]

    def refuse(self, registration):
        raise Refused(401, "invalid token")

    monkeypatch.setattr(AgentClient, "register", refuse)
    with pytest.raises(Refused):
        client.register(None)  # type: ignore[arg-type]
    assert warmed == []  # a refused agent exits without importing torch first
    monkeypatch.setattr(AgentClient, "register", lambda self, registration: "info")
    assert client.register(None) == "info"  # type: ignore[arg-type]
    assert client.register(None) == "info"  # type: ignore[arg-type]
    assert warmed == [client.ready]  # once


def test_warming_the_forkserver_waits_for_its_preload() -> None:
    import threading
    import time

    from agent.cli import start_warming
    from agent.launch import run_forked

    ready = threading.Event()
    start_warming(ready)
    assert ready.wait(120)
    started = time.monotonic()
    ended = run_forked({"step": "nope", "spec": {}, "settings": {}}, started + 60, None)
    assert ended.status == "done" and time.monotonic() - started < 3.0  # no torch import left
