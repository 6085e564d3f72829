"""What kill -9 costs a search, measured with real processes on loopback.

Every run is a fresh, real `hwnas serve` (a temporary SQLite file, authentication on, its
tokens made with `hwnas token create` as a deployment makes them, `--log-format json`) and two
real agent processes (`python -m bench.replay_agent`: the agent's own Worker over HTTP, whose
device replays recorded real measurements and sleeps each one's device time times a time
scale). The same seeded LTS search runs once undisturbed and once under faults:

- **agent kills**: `--agent-kills` times, after a random pause, the next job an agent claims
  (one not interrupted before) is interrupted: that agent is killed (SIGKILL) at a random
  moment of the measurement
  (KILL_WINDOW_S after the claim; every replayed measurement here lasts longer) and a
  replacement agent starts. Leases last 3 s. Reported: kills that landed mid-measurement (the
  killed agent never reported the job, and the job was leased again), how far into the
  measurement they landed, the time from a kill to the job's next lease and to its accepted
  result, and the search's wall time against the undisturbed run's.
- **server kills**: `--server-kills` times, once the search has a random number of results,
  the server is SIGKILLed and restarted on the same database and port; the agents keep
  running. Reported: time from the kill to a healthy server, from there to the next accepted
  result, results that crossed a restart (measured or held by an agent through the outage),
  the wall time, and whether the proposals and the frontier equal the undisturbed run's.

Each run also checks exactly-once: every candidate measured, one measurement row each, and the
agents' jobs_done adding up to the budget. tests/test_fault_tolerance.py asserts the same
scenarios; this script measures them.

    .venv/bin/python -m bench.faults [--agent-kills 20] [--server-kills 5] [--seed 0]
        [--json bench/results/faults.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from hwnas.testing.ports import free_port
from hwnas.testing.processes import Processes
from hwnas.testing.servers import create_token, start_server

API = "/api/v1"
DEVICE_CLASS = "replay-cpu"
# Kill an agent this long after its claim: the replayed measurements last at least 2.2
# device-seconds, so at the agent-kill time scale (0.3) every one is still running then.
KILL_WINDOW_S = (0.05, 0.45)
KILL_PAUSE_S = (0.0, 0.3)  # a random pause after each agent kill, before looking for the next
AGENT_KILL = {"lease_s": 3.0, "time_scale": 0.3, "budget": 48, "initial": 16, "seed": 3}
SERVER_KILL = {"lease_s": 10.0, "time_scale": 0.1, "budget": 30, "initial": 10, "seed": 11}


# -- shared with tests/test_fault_tolerance.py --------------------------------------------------
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


def replay_agent_args(url: str, name: str, time_scale: float) -> list[str]:
    """`python -m bench.replay_agent` for `url`, polling fast."""
    return [
        sys.executable,
        "-m",
        "bench.replay_agent",
        "--server",
        url,
        "--device-class",
        DEVICE_CLASS,
        "--name",
        name,
        "--time-scale",
        str(time_scale),
        "--poll-interval",
        "0.1",
    ]


class EventLog:
    """The server's events (`--log-format json`: one JSON object per line; domain events such
    as job.claimed, and http.request for each request), read as its log file grows; restarts
    append to the same file. Each event gets `t`, its time in seconds since the epoch."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[dict[str, Any]] = []
        self._offset = 0
        self._partial = b""

    def poll(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return self.events
        with self.path.open("rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:  # the CLI's own lines before logging starts
                continue
            if isinstance(entry, dict) and "event" in entry:
                entry["t"] = datetime.fromisoformat(entry["ts"].replace("Z", "+00:00")).timestamp()
                self.events.append(entry)
        return self.events

    def named(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.poll() if e["event"] == event]


def holders(events: Iterable[dict[str, Any]]) -> dict[str, tuple[int, float]]:
    """agent id -> (job id, time of the claim) for every job claimed and not reported in
    `events` (EventLog.poll())."""
    held: dict[str, tuple[int, float]] = {}
    for event in events:
        if event["event"] == "job.claimed":
            held[event["agent_id"]] = (event["job_id"], event["t"])
        elif event["event"] == "job.result":
            job, _ = held.get(event["agent_id"], (None, None))
            if job == event["job_id"]:
                del held[event["agent_id"]]
    return held


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


# -- processes ----------------------------------------------------------------------------------
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


# -- scenarios ---------------------------------------------------------------------------------
def _time(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _create(cluster: Cluster, request: dict[str, Any]) -> int:
    created = cluster.http.post(f"{API}/searches", json=request)
    created.raise_for_status()
    return created.json()["id"]


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
    return {
        "finish_reason": info["finish_reason"],
        "wall_s": round(_time(info["finished_at"]) - _time(info["created_at"]), 2),
        "claims": len(cluster.log.named("job.claimed")),
        "remeasured": progress["remeasured"],
        "exactly_once": once and progress["remeasuring"] == 0,
        "proposed": [c["arch_id"] for c in candidates],
        "frontier": {p["arch_id"]: p["objectives"] for p in front},
    }


def agent_kills(tmp: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    """The agent-kill search with `kills` kills (0: undisturbed)."""
    settings = AGENT_KILL
    cluster = Cluster(tmp, settings["lease_s"], settings["time_scale"])
    alive = ["agent-0", "agent-1"]
    done: list[Kill] = []
    try:
        cluster.start_server()
        for name in alive:
            cluster.start_agent(name)
        cluster.wait_agents(alive)
        request = replay_request(settings["budget"], settings["initial"], settings["seed"])
        search_id = _create(cluster, request)

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
        result["kills"] = [_kill_stats(cluster, kill) for kill in done]
        return result
    finally:
        cluster.close()


def _kill_stats(cluster: Cluster, kill: Kill) -> dict[str, Any]:
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


def server_kills(tmp: Path, kills: int, rng: random.Random) -> dict[str, Any]:
    """The server-kill search with `kills` kills and restarts (0: undisturbed)."""
    settings = SERVER_KILL
    cluster = Cluster(tmp, settings["lease_s"], settings["time_scale"])
    restarts = []
    try:
        cluster.start_server()
        for name in ("agent-0", "agent-1"):
            cluster.start_agent(name)
        cluster.wait_agents(["agent-0", "agent-1"])
        request = replay_request(settings["budget"], settings["initial"], settings["seed"])
        search_id = _create(cluster, request)
        for when in sorted(rng.sample(range(2, settings["budget"] - 6), kills)):
            while (info := cluster.search(search_id))["progress"]["measured"] < when:
                if info["status"] != "running":
                    raise RuntimeError(f"the search ended after only {len(restarts)} kills")
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 0.3))
            progress = cluster.search(search_id)["progress"]
            killed_at = time.time()
            cluster.kill_server()
            time.sleep(rng.uniform(0.0, 0.5))
            cluster.start_server()
            restarts.append({"killed_at": killed_at, "healthy_at": time.time(), **progress})
        result = outcome(cluster, search_id)
        result["restarts"] = [_restart_stats(cluster.log, r) for r in restarts]
        return result
    finally:
        cluster.close()


def _restart_stats(log: EventLog, restart: dict[str, Any]) -> dict[str, Any]:
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


# -- report -------------------------------------------------------------------------------------
def _spread(values: Sequence[float | None], digits: int = 2) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "-"
    return f"{statistics.median(got):.{digits}f} ({min(got):.{digits}f}-{max(got):.{digits}f})"


def _yes(value: bool) -> str:
    return "yes" if value else "NO"


def report(runs: Mapping[str, dict[str, Any]]) -> str:
    calm, hit = runs["agents_undisturbed"], runs["agents_killed"]
    kills = hit["kills"]
    a, s = AGENT_KILL, SERVER_KILL
    lines = [
        f"Agent kills: LTS budget {a['budget']} (seed {a['seed']}), 2 replay agents, "
        f"time scale {a['time_scale']}, lease {a['lease_s']:g} s; "
        "median (min-max) over the kills.",
        "",
        "| run | wall s | leases issued | exactly once | kills mid-measurement | "
        "kill moment, share of the measurement | kill -> leased again, s | "
        "kill -> measured, s |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
        f"| undisturbed | {calm['wall_s']:.1f} | {calm['claims']} | "
        f"{_yes(calm['exactly_once'])} | - | - | - | - |",
        f"| {len(kills)} agent kills | {hit['wall_s']:.1f} | {hit['claims']} | "
        f"{_yes(hit['exactly_once'])} | {sum(k['landed'] for k in kills)}/{len(kills)} | "
        f"{_spread([k['into_share'] for k in kills])} | "
        f"{_spread([k['to_leased_s'] for k in kills], 1)} | "
        f"{_spread([k['to_measured_s'] for k in kills], 1)} |",
        "",
    ]
    calm, hit = runs["server_undisturbed"], runs["server_killed"]
    restarts = hit["restarts"]
    lines += [
        f"Server kills: LTS budget {s['budget']} (seed {s['seed']}), 2 replay agents, "
        f"time scale {s['time_scale']}, lease {s['lease_s']:g} s.",
        "",
        "| run | wall s | leases issued | exactly once | same proposals | same frontier | "
        "frontier size |",
        "|---|---:|---:|---|---|---|---:|",
        f"| undisturbed | {calm['wall_s']:.1f} | {calm['claims']} | "
        f"{_yes(calm['exactly_once'])} | - | - | {len(calm['frontier'])} |",
        f"| {len(restarts)} server kills | {hit['wall_s']:.1f} | {hit['claims']} | "
        f"{_yes(hit['exactly_once'])} | {_yes(hit['proposed'] == calm['proposed'])} | "
        f"{_yes(hit['frontier'] == calm['frontier'])} | {len(hit['frontier'])} |",
        "",
        "| restart | results at kill | running at kill | kill -> healthy, s | "
        "healthy -> next result, s | jobs in flight | reported after restart | leased again |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(restarts, 1):
        to_result = "-" if r["to_result_s"] is None else f"{r['to_result_s']:.2f}"
        lines.append(
            f"| {i} | {r['measured_at_kill']} | {r['running_at_kill']} | {r['down_s']:.2f} | "
            f"{to_result} | {r['in_flight']} | {r['carried']} | {r['re_leased']} |"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.faults", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--agent-kills", type=int, default=20)
    parser.add_argument("--server-kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0, help="seeds the kill moments")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH")
    parser.add_argument("--keep", type=Path, default=None, help="keep logs and databases here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started, load_before = time.perf_counter(), os.getloadavg()
    scenarios = {
        "agents_undisturbed": (agent_kills, 0),
        "agents_killed": (agent_kills, args.agent_kills),
        "server_undisturbed": (server_kills, 0),
        "server_killed": (server_kills, args.server_kills),
    }
    runs = {}
    with tempfile.TemporaryDirectory(prefix="hwnas-faults-") as tmp:
        for name, (scenario, kills) in scenarios.items():
            where = (args.keep or Path(tmp)) / name
            where.mkdir(parents=True)
            try:
                runs[name] = scenario(where, kills, random.Random(args.seed))
            except Exception:
                log = where / "server.log"
                print(f"--- {log} (tail)\n{log.read_text()[-3000:]}", file=sys.stderr)
                raise
            print(f"{name}: {runs[name]['wall_s']} s", file=sys.stderr, flush=True)
    load = [round(x, 2) for x in (*load_before, *os.getloadavg())]
    text = report(runs)
    print(f"{text}\n\nLoad average (1, 5, 15 min) before: {load[:3]}, after: {load[3:]}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "command": shlex.join(["python", "-m", "bench.faults", *(argv or sys.argv[1:])]),
            "settings": {"agent_kill": AGENT_KILL, "server_kill": SERVER_KILL, **vars(args)},
            "elapsed_s": round(time.perf_counter() - started, 1),
            "load_avg_before_after": [load[:3], load[3:]],
            "runs": runs,
        }
        args.json.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    return 0 if all(run["exactly_once"] for run in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
