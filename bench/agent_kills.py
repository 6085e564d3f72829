"""Agent kills: the next job an agent claims is interrupted by killing that agent (SIGKILL)
at a random moment of the measurement, and a replacement agent starts; measured is whether
each kill landed mid-measurement, how far into it, and how long the job took to be leased
again and measured (bench/faults.py; tests/test_fault_tolerance.py kills the same way)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Container, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.fault_cluster import Cluster, outcome
from bench.server_events import EventLog, holders

# Kill an agent this long after its claim: the replayed measurements last at least 2.2
# device-seconds, so at the agent-kill time scale (0.3) every one is still running then.
KILL_WINDOW_S = (0.05, 0.45)
KILL_PAUSE_S = (0.0, 0.3)  # a random pause after each agent kill, before looking for the next
AGENT_KILL = {"lease_s": 3.0, "time_scale": 0.3, "budget": 48, "initial": 16, "seed": 3}


@dataclass(frozen=True)
class Kill:
    name: str
    agent_id: str
    job_id: int
    claimed_at: float
    killed_at: float


def kill_mid_measurement(
    log: EventLog,
    alive: Callable[[], Mapping[str, str]],
    kill: Callable[[str], None],
    rng: random.Random,
    spare: Container[int] = (),
    timeout: float = 60,
) -> Kill:
    """Wait for the next job an alive agent claims (`alive()`: agent id -> name), other than
    the `spare` job ids, and kill that agent with `kill(name)` at a random moment
    KILL_WINDOW_S after the claim, if it still holds the job then (else wait for the next)."""
    known = set(holders(log.poll()).items())  # claims made before now are not candidates
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = alive()
        for agent, held in sorted(holders(log.poll()).items()):
            if (agent, held) in known or agent not in names or held[0] in spare:
                continue
            known.add((agent, held))
            job, claimed = held
            moment = claimed + rng.uniform(*KILL_WINDOW_S)
            if moment < time.time():
                continue  # seen too late to kill it at that moment: wait for another
            time.sleep(moment - time.time())
            if holders(log.poll()).get(agent) == held:
                kill(names[agent])
                return Kill(names[agent], agent, job, claimed, time.time())
        time.sleep(0.02)
    raise TimeoutError(f"no agent claimed a job for {timeout} s")


def agent_kills(tmp: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    """The agent-kill search with `kills` kills (0: undisturbed)."""
    settings = AGENT_KILL
    cluster = Cluster(tmp, settings["lease_s"], settings["time_scale"])
    alive = ["agent-0", "agent-1"]
    done: list[Kill] = []
    try:
        search_id = cluster.start_search(alive, settings)

        def alive_ids() -> dict[str, str]:
            if cluster.search(search_id)["status"] != "running":
                raise RuntimeError(f"the search ended after only {len(done)} kills")
            ids = cluster.agent_ids()
            return {ids[name]: name for name in alive if name in ids}

        for index in range(kills):
            time.sleep(rng.uniform(*KILL_PAUSE_S))
            spare = {k.job_id for k in done}  # each kill interrupts another job
            done.append(
                kill_mid_measurement(cluster.log, alive_ids, cluster.kill_agent, rng, spare)
            )
            alive.remove(done[-1].name)
            alive.append(f"agent-{index + 2}")
            cluster.start_agent(alive[-1])
        result = outcome(cluster, search_id)
        result["kills"] = [kill_stats(cluster, kill) for kill in done]
        return result
    finally:
        cluster.close()


def kill_stats(cluster: Cluster, kill: Kill) -> dict[str, Any]:
    """Whether the kill landed mid-measurement, where, and how long the job took to recover."""
    mine = [e for e in cluster.log.poll() if e.get("job_id") == kill.job_id]
    reported = any(e["event"] == "job.result" and e["agent_id"] == kill.agent_id for e in mine)
    after = [e for e in mine if e["t"] > kill.killed_at]
    leased = next((e["t"] for e in after if e["event"] == "job.claimed"), None)
    result = next((e["t"] for e in after if e["event"] == "job.result"), None)
    ((device_s,),) = cluster.rows(
        "SELECT json_extract(m.result, '$.total_s') FROM candidates c "
        "JOIN measurements m ON m.id = c.measurement_id WHERE c.id = ?",
        kill.job_id,
    )
    into = kill.killed_at - kill.claimed_at
    return {
        **asdict(kill),
        "landed": not reported and leased is not None,
        "into_s": round(into, 3),
        "into_share": round(into / (device_s * cluster.time_scale), 3),
        "to_leased_s": None if leased is None else round(leased - kill.killed_at, 3),
        "to_measured_s": None if result is None else round(result - kill.killed_at, 3),
    }
