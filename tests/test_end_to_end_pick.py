"""`hwnas search pick | pareto | export` as a user runs them: real processes against a real
server (`hwnas serve`), whose search was measured by a synthetic agent over HTTP so that the
frontier is the same on every machine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hwnas.testing.servers import api_client, serve
from tests.factories import play_agent, register, search_request

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """(url, search id, its frontier in latency order) on a live server."""
    tmp = tmp_path_factory.mktemp("pick")
    with serve(tmp, tmp / "pick.db", "--no-auth") as server, api_client(server.url) as api:
        body = search_request(budget={"max_evaluations": 24})
        search_id = api.post("/api/v1/searches", json=body).json()["id"]
        play_agent(api, register(api))
        front = api.get(
            f"/api/v1/searches/{search_id}/pareto", params={"order_by": "latency_ms"}
        ).json()
        yield server.url, search_id, front


def hwnas(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hwnas", "search", *args, "--server", url],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_pick_prints_the_fastest_point_with_enough_parameters(measured):
    url, search_id, front = measured
    floor = sorted(p["objectives"]["decoder_params"] for p in front)[len(front) // 2]
    ceiling = max(p["objectives"]["latency_ms"] for p in front)
    expected = next(
        p
        for p in front
        if p["objectives"]["decoder_params"] >= floor and p["objectives"]["latency_ms"] <= ceiling
    )
    flags = ["--max-latency-ms", str(ceiling), "--min-decoder-params", str(floor)]

    shown = hwnas(url, "pick", str(search_id), *flags, "--order-by", "latency_ms")
    as_json = hwnas(url, "pick", str(search_id), *flags, "--order-by", "latency_ms", "--json")

    assert shown.returncode == 0, shown.stderr
    assert f"export it: hwnas search export {expected['arch_id']}" in shown.stdout
    assert "best by latency_ms (ascending)" in " ".join(shown.stdout.split())
    pick = json.loads(as_json.stdout)
    assert pick["pick"]["arch_id"] == expected["arch_id"]
    assert pick["bounds"] == {"min_decoder_params": floor, "max_latency_ms": ceiling}
    ids = [p["arch_id"] for p in front]
    at = ids.index(expected["arch_id"])
    near = [ids[i] for i in range(max(0, at - 2), min(len(ids), at + 3)) if i != at]
    assert [n["point"]["arch_id"] for n in pick["neighbours"]] == near
    for n in pick["neighbours"]:
        assert n["point"]["intervals"]["latency_ms"]
        assert n["point"]["frontier_certain"] in (True, False)


def test_pick_refuses_on_one_line_naming_the_bound(measured):
    url, search_id, front = measured
    fastest = front[0]
    flags = ["--max-latency-ms", "0.01", "--order-by", "latency_ms"]
    done = hwnas(url, "pick", str(search_id), *flags)
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1
    assert "404: max_latency_ms: no frontier point has latency_ms <= 0.01" in done.stderr
    assert fastest["arch_id"] in done.stderr
    unknown = hwnas(url, "pick", str(search_id), "--order-by", "speed")
    assert unknown.returncode == 1 and "order_by: 'speed' is not an objective" in unknown.stderr


def test_pareto_and_export_take_what_pick_prints(measured, tmp_path):
    url, search_id, front = measured
    limited = hwnas(url, "pareto", str(search_id), "--order-by", "latency_ms", "--limit", "2")
    assert limited.returncode == 0, limited.stderr
    assert all(p["arch_id"] in limited.stdout for p in front[:2])
    assert front[2]["arch_id"] not in limited.stdout
    prefix = front[0]["arch_id"][:8]  # as the demo shows it
    done = hwnas(url, "export", prefix, "--format", "torch", "-o", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "def build_model" in (tmp_path / f"hwnas-{front[0]['arch_id']}.py").read_text()
