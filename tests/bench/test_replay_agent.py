"""bench/replay_agent.py: an agent whose device is the replay; and bench/agent_scaling.py's
reading of runs. The slow test runs a real server and two replay-agent processes."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from agent.measure import MeasurementCancelled
from archvocab.registry import parse_spec
from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.wire import Failure, MeasurementResult, MeasurementSettings, ProxyRequest
from bench import replay_fleet
from bench.replay import DEFAULT_TABLE, DeviceReplay
from bench.replay_agent import ReplayDevice
from bench.scaling_report import report, summarise
from hwnas.testing.servers import serve

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def replay() -> DeviceReplay:
    return DeviceReplay.load()


def test_replayed_measurement_is_a_valid_result_with_real_device_seconds(
    replay: DeviceReplay,
) -> None:
    device = ReplayDevice(replay, time_scale=0.001)
    exact = replay.table["rows"][0]
    unseen = GPT2Space().sample(random.Random(3)).to_dict()
    for spec in (exact["spec"], unseen):
        got = replay.measure(spec)
        result = device(spec, MeasurementSettings())
        assert isinstance(result, MeasurementResult)
        assert result.latency_ms == got.latency_ms == result.latency.median_ms
        assert result.peak_memory_mb == got.memory_mb
        assert result.total_s == got.wall_s  # unscaled: the server counts real device-seconds
        assert result.provenance.runtime == "torch"
        assert result.details["slept_s"] < got.wall_s
        assert sorted(result.latency.samples_ms)[len(result.latency.samples_ms) // 2] == (
            result.latency_ms
        )
    assert device(exact["spec"], MeasurementSettings()).details["from_table"] is True


def test_replay_refuses_what_the_table_cannot_answer(replay: DeviceReplay) -> None:
    device = ReplayDevice(replay, time_scale=0.0)
    spec = replay.table["rows"][0]["spec"]
    other = device(spec, MeasurementSettings(seq_len=32))
    assert isinstance(other, Failure) and "settings" in other.message
    asked = device(spec, MeasurementSettings(), proxies=ProxyRequest(names=["synflow"]))
    assert isinstance(asked, Failure) and "proxies" in asked.message


def test_cancel_stops_the_simulated_measurement(replay: DeviceReplay) -> None:
    device = ReplayDevice(replay, time_scale=100.0)
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    with pytest.raises(MeasurementCancelled):
        device(replay.table["rows"][0]["spec"], MeasurementSettings(), cancel=cancel)


def test_the_replay_agent_imports_no_server_or_search_code() -> None:
    probe = (
        "import json, sys; import bench.replay_agent; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('server', 'search', 'fastapi', 'sqlalchemy', 'uvicorn', 'pymoo', 'torch'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == []


def test_scaling_summary_counts_unreached_runs_as_slowest() -> None:
    def run(agents: int, seed: int, wall: float | None) -> dict:
        return {
            "agents": agents,
            "seed": seed,
            "wall_s_to_target": wall,
            "measurements_to_target": None if wall is None else 100,
            "device_s_to_target": None if wall is None else 300.0,
            "agent_utilisation": None,
            "server_cpu_s": 1.0,
            "results_seen": 100,
        }

    runs = [run(1, 0, 100.0), run(4, 0, 25.0), run(1, 1, 120.0), run(4, 1, None)]
    runs += [run(1, 2, 110.0), run(4, 2, 30.0)]
    summary = summarise(runs, [1, 4])
    assert summary[0]["wall_s"] == 110.0 and summary[1]["wall_s"] == 30.0
    assert summary[1]["reached"] == 2 and summary[1]["speedup"] == pytest.approx(110 / 30)
    args = type("Args", (), {"target": 0.3, "budget": 10, "seeds": 3, "time_scale": 0.2})()
    args.agents = [1, 4]
    text, verdict = report(summary, runs, args)
    assert verdict is True and "PASS" in text and "not reached" in text


@pytest.mark.slow
def test_two_replay_agents_run_a_search_through_a_real_server(replay: DeviceReplay) -> None:
    budget = 12
    with (
        tempfile.TemporaryDirectory(prefix="hwnas-replay-agent-") as tmp,
        serve(Path(tmp), Path(tmp) / "t.db", "--no-auth") as server,
    ):
        agents: list[subprocess.Popen] = []
        try:
            agents = replay_fleet.start_agents(server.url, 2, 0.01, DEFAULT_TABLE, Path(tmp))
            with httpx.Client(base_url=server.url, timeout=60) as http:
                replay_fleet.wait_for_agents(http, 2, agents)
                request = {
                    "strategy": "hwnas",
                    "device_class": replay_fleet.DEVICE_CLASS,
                    "budget": {"max_evaluations": budget},
                    "population": {"initial": 4},
                    "seed": 5,
                }
                created = http.post("/api/v1/searches", json=request)
                assert created.status_code == 201, created.text
                search_id = created.json()["id"]
                info = _wait_finished(http, search_id)
                assert info["status"] == "finished", info
                rows = http.get(f"/api/v1/searches/{search_id}/candidates").json()
                listed = http.get("/api/v1/agents").json()
        finally:
            replay_fleet.stop_processes(agents)
    assert info["progress"]["measured"] == budget == len(rows)
    assert all(r["status"] == "measured" for r in rows)
    for row in rows:
        got = replay.measure(parse_spec(row["spec"]))
        assert row["measurement"]["latency_ms"] == pytest.approx(got.latency_ms, rel=1e-12)
        assert row["measurement"]["peak_memory_mb"] == pytest.approx(got.memory_mb, rel=1e-12)
    jobs = sorted(a["jobs_done"] for a in listed)
    # every job reported once: the budget's candidates and the frontier's re-measurements
    assert len(jobs) == 2 and jobs[0] >= 1
    assert sum(jobs) == budget + info["progress"]["remeasured"]


def _wait_finished(http: httpx.Client, search_id: int, timeout_s: float = 40.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        info = http.get(f"/api/v1/searches/{search_id}").json()
        if info["status"] != "running" or time.monotonic() > deadline:
            return info
        time.sleep(0.2)
