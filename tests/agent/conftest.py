"""Agent test helpers: tiny specs, and a minimal real HTTP server speaking the agent API.

The minimal server is a stand-in for the real one (not ready yet): a FastAPI app under
uvicorn on 127.0.0.1, in a background thread, that hands out queued jobs and records what
agents send. It implements only the agent-facing endpoints, with the documented statuses.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse

from archvocab.wire import AgentRegistration, JobResult, LeaseRef, MeasurementSettings

TINY_SPEC: dict[str, Any] = {
    "n_layer": 2,
    "d_model": 64,
    "d_inner": [128, 128],
    "n_head": [2, 2],
    "d_embed": 64,
    "div_val": 1,
    "cutoffs": [],
    "vocab_size": 1000,
    "n_positions": 64,
}
# Well under a second per measurement: a short warm-up and timed phase, no minimum time.
FAST_SETTINGS: dict[str, Any] = {
    "seq_len": 16,
    "warmup_max_s": 0.5,
    "max_time_s": 0.5,
    "min_samples": 5,
    "min_time_s": 0.0,
    "timeout_s": 120.0,
}


@pytest.fixture(scope="session")
def tiny_spec() -> dict[str, Any]:
    """A 2-layer, d_model 64, 1000-token GPT-2 that runs in milliseconds. Shared: don't mutate;
    make variants with ``{**tiny_spec, "n_layer": ...}``."""
    return dict(TINY_SPEC)


@pytest.fixture(scope="session")
def fast_settings() -> MeasurementSettings:
    return MeasurementSettings(**FAST_SETTINGS)


@dataclass
class ServerState:
    """What the minimal server holds and what it received; tests read and steer it."""

    lease_seconds: float = 30.0
    heartbeat_interval_s: float = 0.2
    queue: list[dict[str, Any]] = field(default_factory=list)
    agents: dict[str, AgentRegistration] = field(default_factory=dict)
    leases: dict[int, str] = field(default_factory=dict)
    registrations: list[AgentRegistration] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    heartbeats: list[tuple[int, LeaseRef]] = field(default_factory=list)
    results: dict[int, JobResult] = field(default_factory=dict)
    refused: list[tuple[str, int]] = field(default_factory=list)
    refuse_heartbeats: bool = False
    refuse_results: bool = False
    forget_agents_on_result: bool = False
    job_claimed: threading.Event = field(default_factory=threading.Event)
    _next_job: int = 1

    def add_job(self, spec: dict[str, Any], settings: dict[str, Any] | None = None) -> int:
        job_id, self._next_job = self._next_job, self._next_job + 1
        self.queue.append({"job_id": job_id, "spec": spec, "settings": settings or FAST_SETTINGS})
        return job_id

    def forget_agents(self) -> None:
        """What a database reset does to the server's memory of agents."""
        self.agents.clear()


def make_app(state: ServerState) -> FastAPI:
    app = FastAPI()

    def refuse(what: str, job_id: int) -> JSONResponse:
        state.refused.append((what, job_id))
        return JSONResponse(
            {"detail": f"job {job_id}: lease expired or not yours"}, status_code=409
        )

    @app.post("/api/v1/agents", status_code=201)
    def register(body: AgentRegistration) -> dict[str, Any]:
        agent_id = uuid.uuid4().hex
        state.agents[agent_id] = body
        state.registrations.append(body)
        return {
            "agent_id": agent_id,
            "device_class": body.device_class,
            "name": body.name,
            "heartbeat_interval_s": state.heartbeat_interval_s,
            "lease_seconds": state.lease_seconds,
        }

    @app.post("/api/v1/agents/{agent_id}/claim", response_model=None)
    def claim(agent_id: str) -> Response | dict[str, Any]:
        state.claims.append(agent_id)
        if agent_id not in state.agents:
            return JSONResponse({"detail": f"agent {agent_id} is not registered"}, status_code=404)
        if not state.queue:
            return Response(status_code=204)
        job = state.queue.pop(0)
        lease_id = uuid.uuid4().hex
        state.leases[job["job_id"]] = lease_id
        state.job_claimed.set()
        expires = datetime.now(UTC) + timedelta(seconds=state.lease_seconds)
        return {
            **job,
            "lease_id": lease_id,
            "lease_expires_at": expires.isoformat(),
            "lease_seconds": state.lease_seconds,
            "search_id": 1,
            "arch_id": f"arch{job['job_id']}",
        }

    @app.post("/api/v1/jobs/{job_id}/heartbeat", response_model=None)
    def heartbeat(job_id: int, body: LeaseRef) -> JSONResponse | dict[str, Any]:
        state.heartbeats.append((job_id, body))
        if state.refuse_heartbeats or state.leases.get(job_id) != body.lease_id:
            return refuse("heartbeat", job_id)
        expires = datetime.now(UTC) + timedelta(seconds=state.lease_seconds)
        return {"job_id": job_id, "lease_expires_at": expires.isoformat()}

    @app.post("/api/v1/jobs/{job_id}/result", response_model=None)
    def result(job_id: int, body: JobResult) -> JSONResponse | dict[str, Any]:
        if state.refuse_results or state.leases.get(job_id) != body.lease_id:
            return refuse("result", job_id)
        state.results[job_id] = body
        del state.leases[job_id]
        if state.forget_agents_on_result:
            state.forget_agents()
        return {"job_id": job_id, "status": "accepted"}

    return app


@dataclass
class LiveServer:
    url: str
    state: ServerState


@contextmanager
def serving(state: ServerState, port: int = 0) -> Iterator[LiveServer]:
    """The minimal server for `state` on 127.0.0.1:`port` (0: a free one) until the block ends."""
    config = uvicorn.Config(
        make_app(state),
        host="127.0.0.1",
        port=port,
        http="h11",
        ws="none",
        lifespan="off",
        log_config=None,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="minimal-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "minimal server did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield LiveServer(f"http://127.0.0.1:{port}", state)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def minimal_server() -> tuple[type[ServerState], Any]:
    """(ServerState, serving) for tests that start and stop servers themselves."""
    return ServerState, serving


@pytest.fixture
def live_server() -> Iterator[LiveServer]:
    """The minimal server on a free port of 127.0.0.1, stopped after the test."""
    with serving(ServerState()) as live:
        yield live
