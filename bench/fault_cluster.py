"""The cluster bench/faults.py (and tests/test_fault_tolerance.py) kills parts of: a real
`hwnas serve` over a SQLite file (authentication on, its tokens made with `hwnas token create`
as a deployment makes them, `--log-format json`) and replay agent processes, on loopback; the
seeded LTS search they run; and how that search ended."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.replay_fleet import API, DEVICE_CLASS, replay_agent_args
from bench.server_events import EventLog, server_time
from hwnas.testing.ports import free_port
from hwnas.testing.processes import Processes
from hwnas.testing.servers import create_token, start_server


def replay_request(budget: int, initial: int, seed: int) -> dict[str, Any]:
    """An LTS search (a generation barrier: its proposals do not depend on timing) over the
    space the replayed device table was measured in, with the table's measurement settings."""
    children = (budget - initial) // 4
    return {
        "name": f"fault tolerance seed {seed}",
        "strategy": "lts",
        "device_class": DEVICE_CLASS,
        "space": {},
        "objectives": ["decoder_params", "latency_ms", "memory_mb"],
        "budget": {"max_evaluations": budget},
        "population": {
            "initial": initial,
            "parents": max(2, initial // 2),
            "mutations": children,
            "crossovers": children,
        },
        "seed": seed,
    }


class Cluster:
    """A real `hwnas serve` over a SQLite file in `tmp` and replay agents, logs in `tmp`."""

    def __init__(self, tmp: Path, lease_s: float, time_scale: float) -> None:
        self.tmp, self.lease_s, self.time_scale = tmp, lease_s, time_scale
        self.db = tmp / "faults.db"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs = Processes(tmp)
        # Made before the server's first start, which then keeps them (as on its restarts).
        self.procs.user_token = create_token(self.db, "user", "bench-user")
        self.procs.agent_token = create_token(self.db, "agent", "bench-agent")
        self.http = self.procs.client(self.url)
        self.log = EventLog(self.procs.log_path("server"))

    def start_search(self, agents: Sequence[str], settings: Mapping[str, Any]) -> int:
        """Start the server and the named agents, wait until they have registered, and
        create the replay search of `settings` (budget, initial, seed); its id."""
        self.start_server()
        for name in agents:
            self.start_agent(name)
        self.wait_agents(agents)
        request = replay_request(settings["budget"], settings["initial"], settings["seed"])
        created = self.http.post(f"{API}/searches", json=request)
        created.raise_for_status()
        return created.json()["id"]

    def start_server(self) -> None:
        """Start `hwnas serve` (again, after a kill: same database, port, tokens and log) and
        return once it answers /healthz."""
        args = ("--log-format", "json")
        start_server(self.procs, self.db, self.port, *args, lease_seconds=self.lease_s)

    def kill_server(self) -> None:
        self.procs.kill("server")

    def start_agent(self, name: str) -> None:
        args = replay_agent_args(self.url, name, self.time_scale)
        self.procs.spawn(name, args, env=self.procs.agent_env)

    def kill_agent(self, name: str) -> None:
        self.procs.kill(name)

    def agent_ids(self) -> dict[str, str]:
        """Registered agents: name -> agent id."""
        return {a["name"]: a["agent_id"] for a in self.http.get(f"{API}/agents").json()}

    def wait_agents(self, names: Sequence[str]) -> None:
        deadline = time.monotonic() + 60
        while not set(names) <= set(self.agent_ids()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"agents {names} did not register within 60 s")
            time.sleep(0.1)

    def search(self, search_id: int) -> dict[str, Any]:
        return self.http.get(f"{API}/searches/{search_id}").json()

    def wait_finished(self, search_id: int, timeout: float = 300) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while (info := self.search(search_id))["status"] == "running":
            if time.monotonic() > deadline:
                raise RuntimeError(f"search {search_id} did not finish within {timeout} s")
            time.sleep(0.2)
        return info

    def rows(self, query: str, *args: Any) -> list[tuple]:
        """Rows straight from the server's SQLite file."""
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as conn:
            return conn.execute(query, args).fetchall()

    def close(self) -> None:
        self.http.close()
        self.procs.stop_all(grace_s=30)


def outcome(cluster: Cluster, search_id: int) -> dict[str, Any]:
    """How the search ended, and whether every candidate counted exactly once."""
    info = cluster.wait_finished(search_id)
    candidates = cluster.http.get(f"{API}/searches/{search_id}/candidates").json()
    front = cluster.http.get(f"{API}/searches/{search_id}/pareto").json()
    ((rows, archs),) = cluster.rows(
        "SELECT COUNT(*), COUNT(DISTINCT arch_id) FROM measurements WHERE search_id = ?", search_id
    )
    jobs_done = sum(a["jobs_done"] for a in cluster.http.get(f"{API}/agents").json())
    progress = info["progress"]
    budget = progress["budget"]
    # Every job has one measurement row: the budget's candidates, then the re-measurements of
    # frontier points the noise could not separate (tests/test_fault_tolerance.py alike).
    jobs = budget + progress["remeasured"]
    measured = sum(c["status"] == "measured" for c in candidates)
    once = measured == len(candidates) == archs == budget and rows == jobs_done == jobs
    wall_s = (
        server_time(info["finished_at"]).timestamp() - server_time(info["created_at"]).timestamp()
    )
    return {
        "finish_reason": info["finish_reason"],
        "wall_s": round(wall_s, 2),
        "claims": len(cluster.log.named("job.claimed")),
        "remeasured": progress["remeasured"],
        "exactly_once": once and progress["remeasuring"] == 0,
        "proposed": [c["arch_id"] for c in candidates],
        "frontier": {p["arch_id"]: p["objectives"] for p in front},
    }
