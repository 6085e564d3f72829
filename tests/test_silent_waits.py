"""Nothing waits silently (issue 19), with a real `hwnas serve` on loopback and real agent
processes: a search whose only agent is killed mid-job gets the job back by the server's
schedule, no claim needed; a search no agent can measure says so with the command that would
start one; an agent whose token is wrong or revoked exits at once saying why; an idle agent's
polls leave no INFO lines."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hwnas.testing.agents import start_agent
from hwnas.testing.ports import free_port, loopback_url
from hwnas.testing.processes import Processes, hwnas_command
from hwnas.testing.servers import start_server
from tests.factories import search_request

pytestmark = pytest.mark.slow

API = "/api/v1"
# The schedule then runs every 0.5 s and requeues a job 1.5 s (a heartbeat period) after its
# lease ran out.
LEASE_S = 3.0
EXIT_REFUSED = 3  # agent.worker.EXIT_REFUSED


@pytest.fixture
def procs(tmp_path):
    processes = Processes(tmp_path)
    yield processes
    processes.stop_all()


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.05)
    return found


def serve(procs: Processes, tmp: Path) -> tuple[str, Path]:
    """A server with authentication and JSON logs, short leases; its URL and database."""
    port, db = free_port(), tmp / "hwnas.db"
    start_server(procs, db, port, "--log-format", "json", lease_seconds=LEASE_S)
    return loopback_url(port), db


def server_events(procs: Processes, event: str) -> list[dict[str, Any]]:
    lines = procs.log("server").splitlines()
    entries = [json.loads(line) for line in lines if line.startswith("{")]
    return [e for e in entries if e.get("event") == event]


def idle_claims(procs: Processes) -> int:
    """Claims the server answered 'no work' (204)."""
    requests = server_events(procs, "http.request")
    return sum(r["route"].endswith("/claim") and r["status"] == 204 for r in requests)


def statuses(client, search_id: int) -> dict[str, str]:
    candidates = client.get(f"{API}/searches/{search_id}/candidates").json()
    return {c["arch_id"]: c["status"] for c in candidates}


def test_a_search_whose_only_agent_died_moves_again_by_the_schedule(tmp_path, procs):
    url, _ = serve(procs, tmp_path)
    with procs.client(url) as client:
        created = client.post(f"{API}/searches", json=search_request(device_class="Test-CPU"))
        assert created.status_code == 201, created.text
        info = created.json()
        search_id = info["id"]
        # No agent yet: said at once, with the command that would start one.
        command = (
            f"HWNAS_AGENT_TOKEN=<agent enrollment token> hwnas agent --server {url} "
            "--device-class test-cpu"
        )
        assert info["device_class"] == "test-cpu" and info["agents"]["command"] == command
        [warning] = info["warnings"]
        assert "has ever registered" in warning and command in warning
        # `--device-class TEST-cpu` is the same class: this agent measures the search.
        start_agent(procs, "agent-0", url, device_class="TEST-cpu")
        running = wait_until(
            lambda: [a for a, s in statuses(client, search_id).items() if s == "running"],
            timeout=180,
            what="the agent to measure a candidate",
        )
        procs.kill("agent-0")  # mid-job: nothing reported, no other agent left to claim
        running = [a for a, s in statuses(client, search_id).items() if s == "running"]
        assert running, "the agent was killed between two jobs: nothing to requeue"
        killed_at = time.monotonic()
        wait_until(
            lambda: all(statuses(client, search_id)[a] == "queued" for a in running),
            timeout=6 * LEASE_S,
            what="the schedule to requeue the dead agent's job",
        )
        # Back within a lease, a grace and a sweep interval of the last heartbeat (<= 6.5 s
        # after the kill), not at the next claim: there was none.
        assert time.monotonic() - killed_at < 3 * LEASE_S
        assert client.get(f"{API}/searches/{search_id}").json()["progress"]["running"] == 0
        requeues = server_events(procs, "lease.expired")
        assert requeues and all(e["by"] == "schedule" for e in requeues)
        assert sum(e["requeued"] for e in requeues) == len(running)
        # Once the dead agent is no longer online, the search says what it waits for.
        waiting = wait_until(
            lambda: client.get(f"{API}/searches/{search_id}").json()["agents"]["waiting_for_agent"],
            timeout=6 * LEASE_S,
            what="the search to say it waits for an agent",
        )
        assert "no agent of device class 'test-cpu' is online (1 registered" in waiting
        assert command in waiting


def test_an_agent_with_a_wrong_token_exits_at_once_saying_why(tmp_path, procs):
    url, _ = serve(procs, tmp_path)
    started = time.monotonic()
    agent = procs.start(
        "agent-bad",
        *("agent", "--server", url, "--device-class", "test-cpu", "--poll-interval", "0.2"),
        env={"HWNAS_AGENT_TOKEN": "hwnas_e_not-a-token-this-server-issued"},
    )
    assert agent.wait(timeout=120) == EXIT_REFUSED
    took = time.monotonic() - started
    log = procs.log("agent-bad")
    [error] = [line for line in log.splitlines() if " ERROR " in line]
    assert "registering with the server was refused (401: token not recognised" in error
    assert "HWNAS_AGENT_TOKEN" in error and "hwnas token create --kind agent" in error
    assert "retrying" not in log
    assert took < 60, f"the agent took {took:.1f} s to give up"


@pytest.mark.parametrize("claim_wait", ["0", "0.3"])  # polling, and claims that wait for work
def test_an_idle_agent_is_quiet_and_exits_once_its_token_is_revoked(tmp_path, procs, claim_wait):
    url, db = serve(procs, tmp_path)
    agent = start_agent(procs, "agent-0", url, "--claim-wait", claim_wait, poll_interval=0.1)
    wait_until(lambda: idle_claims(procs) >= 20, timeout=120, what="20 idle polls")
    log = procs.log("agent-0")
    # A poll line names its path or its status; a timestamp's milliseconds may read ",204".
    assert not re.search(r"/claim|\b204 No Content|\s204\b", log), log
    assert len([line for line in log.splitlines() if " INFO " in line]) <= 5, log
    # An admin revokes the enrollment token (the one the server's first start made): the
    # agent's credential goes with it.
    revoke = hwnas_command("token", "revoke", "agents", "--db", str(db))
    revoked = subprocess.run(revoke, capture_output=True, text=True)
    assert revoked.returncode == 0, revoked.stderr
    assert agent.wait(timeout=30) == EXIT_REFUSED
    [error] = [line for line in procs.log("agent-0").splitlines() if " ERROR " in line]
    assert "refused (401: token 'agents' was revoked" in error
