"""End to end with real parts: uvicorn on a loopback port, two agent processes measuring real
PyTorch models, a SQLite file, everything driven through the REST API."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from hwnas.testing.agents import start_agent
from hwnas.testing.ports import free_port
from hwnas.testing.processes import Processes
from hwnas.testing.servers import start_server
from tests.factories import check_frontier_beyond_noise, search_request

pytestmark = pytest.mark.slow


@pytest.fixture
def procs(tmp_path):
    processes = Processes(tmp_path)
    yield processes
    processes.stop_all()


def one_agent_service(tmp: Path) -> tuple[str, Processes]:
    """A real server (authentication on) on a fresh SQLite file and one real agent (device
    class test-cpu); `procs.client(url)` is a user's client for it."""
    procs = Processes(tmp)
    port = free_port()
    start_server(procs, tmp / "service.db", port)
    url = f"http://127.0.0.1:{port}"
    start_agent(procs, "agent-0", url)
    return url, procs


def _wait_finished(
    client: httpx.Client, search_id: int, procs: Processes, timeout: float = 600
) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = client.get(f"/api/v1/searches/{search_id}").json()
        if info["status"] != "running":
            return info
        time.sleep(0.5)
    raise AssertionError(f"search did not finish: {info}\n{procs.log('agent-0')}")


def _check_search(client: httpx.Client, search_id: int, budget: int) -> None:
    info = client.get(f"/api/v1/searches/{search_id}").json()
    assert info["status"] == "finished" and info["finish_reason"] == "budget", info
    candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
    assert len(candidates) == budget
    assert len({c["arch_id"] for c in candidates}) == budget, "an architecture was proposed twice"
    for c in candidates:
        assert c["status"] == "measured", c
        m = c["measurement"]
        latency, provenance = m["latency"], m["provenance"]
        assert m["latency_ms"] == latency["median_ms"] > 0 and m["peak_memory_mb"] > 0
        assert latency["samples"] == len(latency["samples_ms"]) >= 5
        assert latency["ci_low_ms"] <= latency["median_ms"] <= latency["ci_high_ms"]
        assert provenance["threads"] == 1 and provenance["cpu_model"]
    objectives = info["request"]["objectives"]
    front = client.get(f"/api/v1/searches/{search_id}/pareto").json()
    check_frontier_beyond_noise(candidates, front, objectives)


def run_search(url: str, procs: Processes, request: dict, budget: int) -> list[dict]:
    """Create a search, wait for it, check it (`_check_search`); its candidates."""
    with procs.client(url) as client:
        created = client.post("/api/v1/searches", json=request)
        assert created.status_code == 201, created.text
        search_id = created.json()["id"]
        _wait_finished(client, search_id, procs)
        _check_search(client, search_id, budget=budget)
        return client.get(f"/api/v1/searches/{search_id}/candidates").json()


def test_two_agents_run_a_search_to_completion(tmp_path, procs):
    port = free_port()
    start_server(procs, tmp_path / "e2e.db", port)
    url = f"http://127.0.0.1:{port}"
    for i in range(2):
        start_agent(procs, f"agent-{i}", url, "--name", f"agent-{i}")
    with procs.client(url) as client:
        created = client.post(
            "/api/v1/searches", json=search_request(budget={"max_evaluations": 10})
        )
        assert created.status_code == 201, created.text
        search_id = created.json()["id"]
        _wait_finished(client, search_id, procs)
        _check_search(client, search_id, budget=10)
        agents = {
            c["measurement"]["agent_id"]
            for c in client.get(f"/api/v1/searches/{search_id}/candidates").json()
        }
        assert len(agents) == 2, "both agents should have measured something"


def test_agents_ride_out_a_server_restart(tmp_path, procs):
    port = free_port()
    db = tmp_path / "restart.db"
    server = start_server(procs, db, port)
    url = f"http://127.0.0.1:{port}"
    start_agent(procs, "agent-0", url)
    with procs.client(url) as client:
        search_id = client.post(
            "/api/v1/searches", json=search_request(budget={"max_evaluations": 10})
        ).json()["id"]
        deadline = time.monotonic() + 300
        while client.get(f"/api/v1/searches/{search_id}").json()["progress"]["measured"] < 3:
            assert time.monotonic() < deadline, procs.log("agent-0")
            time.sleep(0.3)
    os.kill(server.pid, signal.SIGKILL)
    server.wait()
    time.sleep(2)  # the agent sees connection errors and backs off
    start_server(procs, db, port)
    with procs.client(url) as client:
        _wait_finished(client, search_id, procs)
        _check_search(client, search_id, budget=10)


def test_a_repeated_search_reuses_measurements_and_onnxruntime_searches_run(tmp_path, procs):
    port = free_port()
    start_server(procs, tmp_path / "cache.db", port)
    url = f"http://127.0.0.1:{port}"
    start_agent(procs, "agent-0", url)
    budget = {"max_evaluations": 4}
    with procs.client(url) as client:
        first = client.post("/api/v1/searches", json=search_request(budget=budget)).json()
        _wait_finished(client, first["id"], procs)
        _check_search(client, first["id"], budget=4)

        measured = client.get(f"/api/v1/searches/{first['id']}/candidates").json()
        # Measurements taken while this shared machine was busy are flagged and not reused.
        trusted = sum(not c["measurement"]["provenance"]["busy"] for c in measured)
        again = client.post("/api/v1/searches", json=search_request(budget=budget)).json()
        assert again["progress"]["reused"] == trusted
        _wait_finished(client, again["id"], procs)
        _check_search(client, again["id"], budget=4)
        (agent,) = client.get("/api/v1/agents").json()
        assert agent["jobs_done"] == 4 + (4 - trusted), "only untrusted results are measured again"

        ort = search_request(budget={"max_evaluations": 3})
        ort["measurement"] = {**ort["measurement"], "runtime": "onnxruntime"}
        onnx = client.post("/api/v1/searches", json=ort).json()
        assert onnx["progress"]["reused"] == 0
        _wait_finished(client, onnx["id"], procs)
        _check_search(client, onnx["id"], budget=3)
        for c in client.get(f"/api/v1/searches/{onnx['id']}/candidates").json():
            provenance = c["measurement"]["provenance"]
            assert provenance["runtime"] == "onnxruntime" and provenance["torch_version"] is None
            assert c["measurement"]["load_s"] > 0


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_several_server_processes_share_one_store(tmp_path, procs, store, request):
    """`hwnas serve --workers 2`: two processes behind one port, each caching engines, one
    database; two agents' requests land on either. The search runs as on one process."""
    db = tmp_path / "workers.db" if store == "sqlite" else request.getfixturevalue("postgres_url")
    port = free_port()
    start_server(procs, db, port, "--workers", "2")
    url = f"http://127.0.0.1:{port}"
    for i in range(2):
        start_agent(procs, f"agent-{i}", url, "--name", f"agent-{i}")
    candidates = run_search(url, procs, search_request(budget={"max_evaluations": 10}), 10)
    with procs.client(url) as client:
        done = sum(a["jobs_done"] for a in client.get("/api/v1/agents").json())
        search_id = client.get("/api/v1/searches").json()[0]["id"]
        remeasured = client.get(f"/api/v1/searches/{search_id}").json()["progress"]["remeasured"]
    # every job once: the candidates measured here and the frontier's re-measurements
    measured_here = sum(not c["reused"] for c in candidates)
    assert done == measured_here + remeasured, "a result was counted twice"
    assert "database is locked" not in procs.log("server")
