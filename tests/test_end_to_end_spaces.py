"""Every registered space kind end to end: a real server, a real agent process measuring
real models of that kind, a search through the REST API; for kinds with a layer-scaled
baseline, the baseline and the search's report against it too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
from test_end_to_end import _check_search, _wait_finished, one_agent_service, run_search

from archvocab.registry import get_kind, kind_names
from tests.factories import FAST_MEASUREMENT, TINY_SPACES, search_request

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """One server and one agent for the whole module: (base URL, processes)."""
    url, procs = one_agent_service(tmp_path_factory.mktemp("spaces"))
    yield url, procs
    procs.stop_all()


def test_every_registered_kind_has_a_tiny_test_space() -> None:
    assert set(TINY_SPACES) == set(kind_names())


@pytest.mark.parametrize("kind", kind_names())
def test_a_search_of_each_kind_runs_end_to_end(service, kind) -> None:
    url, procs = service
    request = search_request(
        space=TINY_SPACES[kind],
        budget={"max_evaluations": 4},
        population={"initial": 4, "parents": 2, "mutations": 2, "crossovers": 2},
    )
    for c in run_search(url, procs, request, budget=4):
        assert c["spec"]["kind"] == kind
        assert c["objectives"]["decoder_params"] > 0


BASELINE_KINDS = [n for n in kind_names() if hasattr(get_kind(n).space_type, "baseline")]


@pytest.mark.parametrize("kind", BASELINE_KINDS)
def test_a_baseline_of_each_kind_is_measured_and_reported_against(service, kind) -> None:
    url, procs = service
    space = {**TINY_SPACES[kind], "baseline_d_model": 64, "baseline_d_inner": 128}
    space["baseline_n_head"] = 2
    with procs.client(url) as client:
        search = search_request(space=space, budget={"max_evaluations": 6})
        search_id = client.post("/api/v1/searches", json=search).json()["id"]
        body = {
            "space": space,
            "device_class": "test-cpu",
            "layers": [1, 2],
            "measurement": FAST_MEASUREMENT,
        }
        created = client.post("/api/v1/baselines", json=body)
        assert created.status_code == 201, created.text
        baseline_id = created.json()["id"]
        _wait_finished(client, search_id, procs)
        _wait_finished(client, baseline_id, procs)
        _check_search(client, baseline_id, budget=2)
        report = client.get(f"/api/v1/searches/{search_id}/report").json()
    comparison = report["baseline"]
    assert comparison is not None, report
    assert comparison["baseline_search_id"] == baseline_id
    assert comparison["deepest"]["n_layer"] == 2 and comparison["deepest"]["latency_ms"] > 0
    if comparison["matched"] is not None:
        assert comparison["latency_speedup"] > 0 and comparison["memory_reduction"] > 0


def test_hwnas_baseline_and_report_commands(service) -> None:
    url, procs = service
    space = {**TINY_SPACES["gpt2"], "baseline_d_model": 64, "baseline_d_inner": 128}
    space["baseline_n_head"] = 2
    hwnas = [sys.executable, "-m", "hwnas"]
    baseline = subprocess.run(
        [*hwnas, "baseline", "--server", url, "--device-class", "test-cpu", "--layers", "1-2"]
        + ["--space", json.dumps(space), "--measurement", json.dumps(FAST_MEASUREMENT)]
        + ["--wait", "--poll-interval", "0.2", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **procs.user_env},
    )
    assert baseline.returncode == 0, baseline.stderr + procs.log("agent-0")[-2000:]
    measured = json.loads(baseline.stdout)
    assert sorted(c["spec"]["n_layer"] for c in measured) == [1, 2]
    assert all(c["status"] == "measured" for c in measured)
    baseline_id = httpx.get(f"{url}/api/v1/searches", timeout=30).json()[-1]["id"]

    table = subprocess.run(
        [*hwnas, "report", str(baseline_id), "--server", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert table.returncode == 0 and "is a layer-scaled baseline" in table.stdout, table.stderr
    missing = subprocess.run(
        [*hwnas, "report", "999999", "--server", url], capture_output=True, text=True, timeout=60
    )
    assert missing.returncode != 0 and "404" in missing.stderr + missing.stdout
