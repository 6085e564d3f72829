"""`hwnas demo` as a user runs it: its own server, agent process and search, JSON out."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from server.cli.demo import loopback_socket, start_server


@pytest.mark.slow
def test_demo_json_prints_a_finished_search_and_its_frontier(tmp_path):
    db = tmp_path / "demo.db"
    done = subprocess.run(
        [sys.executable, "-m", "hwnas", "demo", "--json", "--budget", "4", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)  # stdout holds only the JSON; progress goes to stderr
    assert out["search"]["status"] == "finished"
    assert out["search"]["progress"]["measured"] + out["search"]["progress"]["failed"] == 4
    assert out["pareto"] and all(p["measurement"]["latency_ms"] > 0 for p in out["pareto"])
    assert db.exists() and str(db) in done.stderr


def test_the_demo_server_has_shut_down_when_stop_returns(tmp_path):
    """The demo's process exits after `stop`: a server thread still shutting the app down
    then crashed the interpreter at exit, in about one demo in a dozen."""
    served = start_server(tmp_path / "demo.db", loopback_socket(0))
    port = served.server.config.port
    assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    served.stop()
    assert not served.thread.is_alive()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
