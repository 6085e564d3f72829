"""Server kills: once the search has a random number of results, the server is SIGKILLed and
restarted on the same database and port while the agents keep running; measured is the
outage, the time to the next accepted result, and what became of the jobs in flight
(bench/faults.py)."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from bench.fault_cluster import Cluster, outcome
from bench.server_events import EventLog, holders

SERVER_KILL = {"lease_s": 10.0, "time_scale": 0.1, "budget": 30, "initial": 10, "seed": 11}


def server_kills(tmp: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    """The server-kill search with `kills` kills and restarts (0: undisturbed)."""
    settings = SERVER_KILL
    cluster = Cluster(tmp, settings["lease_s"], settings["time_scale"])
    restarts: list[dict[str, Any]] = []
    try:
        search_id = cluster.start_search(["agent-0", "agent-1"], settings)
        for when in sorted(rng.sample(range(2, settings["budget"] - 6), kills)):
            while (info := cluster.search(search_id))["progress"]["measured"] < when:
                if info["status"] != "running":
                    raise RuntimeError(f"the search ended after only {len(restarts)} kills")
                time.sleep(0.05)
            restarts.append(kill_and_restart(cluster, search_id, rng))
        result = outcome(cluster, search_id)
        result["restarts"] = [restart_stats(cluster.log, r) for r in restarts]
        return result
    finally:
        cluster.close()


def kill_and_restart(cluster: Cluster, search_id: int, rng: random.Random) -> dict[str, Any]:
    """After a random pause, kill the server and start it again after another: the search's
    progress at the kill, and when the server was killed and healthy again."""
    time.sleep(rng.uniform(0.0, 0.3))
    progress = cluster.search(search_id)["progress"]
    killed_at = time.time()
    cluster.kill_server()
    time.sleep(rng.uniform(0.0, 0.5))
    cluster.start_server()
    return {"killed_at": killed_at, "healthy_at": time.time(), **progress}


def restart_stats(log: EventLog, restart: dict[str, Any]) -> dict[str, Any]:
    """The outage, the time to the next accepted result, and what became of the jobs in
    flight at the kill: reported after the restart under the same lease (carried), or leased
    again first (re-leased: the agent gave its result up, or its lease ran out)."""
    killed, healthy = restart["killed_at"], restart["healthy_at"]
    events = log.poll()
    in_flight = {job for job, _ in holders(e for e in events if e["t"] <= killed).values()}
    first_after: dict[int, str] = {}
    for e in events:
        if e["t"] > healthy and e.get("job_id") in in_flight:
            first_after.setdefault(e["job_id"], e["event"])
    result = next((e["t"] for e in events if e["event"] == "job.result" and e["t"] > healthy), None)
    return {
        "measured_at_kill": restart["measured"],
        "running_at_kill": restart["running"],
        "down_s": round(healthy - killed, 3),
        "to_result_s": None if result is None else round(result - healthy, 3),
        "in_flight": len(in_flight),
        "carried": sum(v == "job.result" for v in first_after.values()),
        "re_leased": sum(v == "job.claimed" for v in first_after.values()),
    }
