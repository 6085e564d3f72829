"""`hwnas search ...` as a user runs it: real processes against a real server and agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
from test_end_to_end import one_agent_service

from tests.factories import search_request

pytestmark = pytest.mark.slow

BUDGET = 6


USER_ENV: dict[str, str] = {}  # the service's user token, as $HWNAS_TOKEN


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    url, procs = one_agent_service(tmp_path_factory.mktemp("cli"))
    USER_ENV.update(procs.user_env)
    yield url, procs
    procs.stop_all()


def hwnas(
    url: str, *args: str, stdin: str | None = None, via_env: bool = False, token: bool = True
) -> subprocess.CompletedProcess:
    """`hwnas search ARGS` against `url`, given by --server or by $HWNAS_SERVER, with the
    user token in $HWNAS_TOKEN unless `token` is False."""
    env = {**os.environ, "HWNAS_SERVER": url if via_env else "http://127.0.0.1:9"}
    env.pop("HWNAS_TOKEN", None)
    if token:
        env.update(USER_ENV)
    server = [] if via_env else ["--server", url]
    return subprocess.run(
        [sys.executable, "-m", "hwnas", "search", *args, *server],
        capture_output=True,
        text=True,
        input=stdin,
        env=env,
        timeout=600,
    )


@pytest.fixture(scope="module")
def finished(service, tmp_path_factory):
    """A search started from a file and waited on with the progress bar: (url, id, wait)."""
    url, _ = service
    request = tmp_path_factory.mktemp("req") / "search.json"
    request.write_text(json.dumps(search_request(budget={"max_evaluations": BUDGET})))
    started = hwnas(url, "start", "--file", str(request), "--json")
    assert started.returncode == 0, started.stderr
    search_id = json.loads(started.stdout)["id"]
    waited = hwnas(url, "wait", str(search_id), "--poll-interval", "0.3")
    return url, search_id, waited


def test_wait_shows_progress_and_ends_when_the_search_does(finished):
    _, search_id, waited = finished
    assert waited.returncode == 0, waited.stderr
    assert f"search {search_id} finished" in waited.stdout
    assert f"{BUDGET}/{BUDGET}" in waited.stderr  # the progress bar's last state


def test_status_list_and_pareto_agree_with_the_rest_api(finished):
    url, search_id, _ = finished
    with httpx.Client(base_url=url) as api:  # reads need no token
        info = api.get(f"/api/v1/searches/{search_id}").json()
        front = api.get(f"/api/v1/searches/{search_id}/pareto").json()
    status = json.loads(hwnas(url, "status", str(search_id), "--json").stdout)
    assert status["status"] == "finished" and status["progress"] == info["progress"]
    listed = json.loads(hwnas(url, "list", "--json").stdout)
    assert search_id in [s["id"] for s in listed]
    pareto = json.loads(hwnas(url, "pareto", str(search_id), "--json").stdout)
    assert [p["arch_id"] for p in pareto] == [p["arch_id"] for p in front]
    table = hwnas(url, "pareto", str(search_id))
    assert all(p["arch_id"] in table.stdout for p in front)
    for point in front:  # each value with the interval a re-measurement should fall in
        low, high = point["intervals"]["latency_ms"]
        assert low < point["objectives"]["latency_ms"] < high
        assert point["frontier_group"] in [p["arch_id"] for p in front]
    assert "[" in table.stdout and "cannot be told apart" in table.stdout
    assert "whatever a re-measurement gives" in " ".join(table.stdout.split())  # may wrap
    text = hwnas(url, "status", str(search_id), via_env=True)
    assert f"frontier: {len(front)} architectures" in text.stdout
    readings = info["noise"]["reference_readings"]
    assert readings >= 1  # the agent measured the search's reference architecture
    assert f"from {readings} reference readings" in text.stdout
    certain = info["noise"]["certain_frontier_size"]
    assert certain == sum(p["frontier_certain"] for p in front)
    assert f"{certain} on it whatever the noise" in " ".join(text.stdout.split())
    progress = info["progress"]
    assert f"re-measured {progress['remeasured']} (+0 to go) of 0" in text.stdout  # 10% of 6


def test_export_writes_a_loadable_module_and_the_spec(finished, tmp_path):
    url, search_id, _ = finished
    arch = json.loads(hwnas(url, "pareto", str(search_id), "--json").stdout)[0]
    torch_file = hwnas(url, "export", arch["arch_id"], "--format", "torch", "-o", str(tmp_path))
    assert torch_file.returncode == 0, torch_file.stderr
    module = tmp_path / f"hwnas-{arch['arch_id']}.py"
    assert "def build_model" in module.read_text()
    spec = tmp_path / "spec.json"
    done = hwnas(url, "export", arch["arch_id"], "--format", "json", "-o", str(spec), "--json")
    assert json.loads(done.stdout)["path"] == str(spec)
    assert json.loads(spec.read_text())["spec"] == arch["spec"]


def test_start_with_wait_json_prints_only_the_finished_search(service):
    url, _ = service
    body = json.dumps(search_request(budget={"max_evaluations": 2}, seed=11))
    done = hwnas(url, "start", "--file", "-", "--wait", "--json", stdin=body)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["status"] == "finished" and info["progress"]["measured"] == 2


def test_refusals_and_unreachable_servers_are_one_line_and_exit_1(service):
    url, _ = service
    missing = hwnas(url, "status", "999")
    assert missing.returncode == 1 and "404: search 999 not found" in missing.stderr
    bad = hwnas(url, "start", "--budget", "0")
    assert bad.returncode == 1 and "budget.max_evaluations" in bad.stderr
    down = hwnas("http://127.0.0.1:9", "list")
    assert down.returncode == 1 and "cannot reach http://127.0.0.1:9" in down.stderr
    assert "Traceback" not in missing.stderr + bad.stderr + down.stderr


def test_starting_a_search_without_a_token_says_how_to_get_one(service):
    url, _ = service
    body = json.dumps(search_request(budget={"max_evaluations": 2}))
    refused = hwnas(url, "start", "--file", "-", stdin=body, token=False)
    assert refused.returncode == 1, refused.stdout
    assert "401" in refused.stderr and "hwnas token create --kind user" in refused.stderr
    forged = hwnas(url, "start", "--file", "-", "--token", "hwnas_u_forged", stdin=body)
    assert forged.returncode == 1 and "token not recognised" in forged.stderr
    assert "Traceback" not in refused.stderr + forged.stderr
