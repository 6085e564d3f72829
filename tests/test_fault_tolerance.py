"""Fault tolerance with real processes on loopback: a real `hwnas serve` on a SQLite file,
real agent processes (`bench/replay_agent.py`: the agent's own Worker, measuring by replaying
recorded real measurements, so a measurement takes real time and gives the same values for
the same architecture), and kill -9.

- agents killed mid-measurement 20 times: every job ends measured exactly once, the search
  completes;
- the server killed mid-search 5 times and restarted on its database: the search resumes,
  completes, and with a fixed seed ends with the frontier of an uninterrupted run;
- duplicate result submissions, retries after client timeouts and agents that come back after
  their lease expired neither duplicate nor lose a measurement.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.agent_kills import AGENT_KILL, KILL_PAUSE_S, kill_mid_measurement
from bench.fault_cluster import replay_request
from bench.replay_fleet import replay_agent_args
from bench.server_events import EventLog
from bench.server_kills import SERVER_KILL
from hwnas.testing.ports import free_port
from hwnas.testing.processes import Processes
from hwnas.testing.servers import api_client, start_server
from tests.factories import FINGERPRINT, search_request, synthetic_measurement

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
API = "/api/v1"


@pytest.fixture
def procs(tmp_path):
    processes = Processes(tmp_path)
    yield processes
    processes.stop_all()


# -- helpers ------------------------------------------------------------------------------------
def start_replay_agent(procs: Processes, name: str, url: str, time_scale: float) -> None:
    """A `bench.replay_agent` process (a real agent whose device is the replayed table),
    tracked by `procs` like its other children (log, kill, stop_all)."""
    procs.spawn(name, replay_agent_args(url, name, time_scale), env=procs.agent_env)


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def agent_ids(client: httpx.Client) -> dict[str, str]:
    """Registered agents: name -> agent id."""
    return {a["name"]: a["agent_id"] for a in client.get(f"{API}/agents").json()}


def wait_finished(client: httpx.Client, search_id: int, procs: Processes, timeout: float) -> dict:
    def done() -> dict | None:
        info = client.get(f"{API}/searches/{search_id}").json()
        return info if info["status"] != "running" else None

    try:
        return wait_until(done, timeout, f"search {search_id} to finish", interval=0.3)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{procs.log('server')[-4000:]}") from None


def database_rows(db: Path, query: str, *args: Any) -> list[tuple]:
    """Rows straight from the server's SQLite file (WAL: readable while the server runs)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute(query, args).fetchall()


def assert_measured_exactly_once(
    client: httpx.Client, db: Path, search_id: int, budget: int
) -> list[dict]:
    """The search finished on its budget; every candidate measured, each by one accepted
    result (one measurement row each, none extra, agents' counts add up). Its candidates."""
    info = client.get(f"{API}/searches/{search_id}").json()
    assert info["status"] == "finished" and info["finish_reason"] == "budget", info
    candidates = client.get(f"{API}/searches/{search_id}/candidates").json()
    assert len(candidates) == budget == info["progress"]["measured"]
    assert len({c["arch_id"] for c in candidates}) == budget, "an architecture was proposed twice"
    assert [c for c in candidates if c["status"] != "measured"] == []
    assert all(c["measurement"] and not c["reused"] for c in candidates)
    # Every job (the budget's candidates, then the re-measurements of frontier points the
    # noise could not separate) has its own measurement row, and each counts once.
    jobs = budget + info["progress"]["remeasured"]
    rows = database_rows(
        db,
        "SELECT c.arch_id, m.arch_id, m.id, c.round FROM candidates c "
        "LEFT JOIN measurements m ON m.id = c.measurement_id WHERE c.search_id = ?",
        search_id,
    )
    assert all(arch == measured for arch, measured, *_ in rows), rows
    assert len(rows) == jobs and info["progress"]["remeasuring"] == 0
    assert len({m for _, _, m, _ in rows}) == jobs, "two jobs share a measurement row"
    stored = database_rows(db, "SELECT arch_id FROM measurements WHERE search_id = ?", search_id)
    assert sorted(a for (a,) in stored) == sorted(arch for arch, *_ in rows), (
        "a result was stored twice, or a measurement row belongs to no job"
    )
    done = sum(a["jobs_done"] for a in client.get(f"{API}/agents").json())
    assert done == jobs, f"agents' jobs_done add up to {done}, not {jobs}: counted twice"
    return candidates


# -- 1. agents killed mid-measurement ----------------------------------------------------------
AGENT_KILLS = 20


def test_agents_killed_mid_measurement_20_times(tmp_path, procs):
    """kill -9 an agent in the middle of a measurement 20 times, at random moments
    (bench.agent_kills.kill_mid_measurement), each time on another job; a replacement agent starts
    each time. The killed jobs come back when their 3 s leases run out."""
    db, port = tmp_path / "agent-kills.db", free_port()
    url = f"http://127.0.0.1:{port}"
    lease_s, scale, budget = AGENT_KILL["lease_s"], AGENT_KILL["time_scale"], AGENT_KILL["budget"]
    start_server(procs, db, port, "--log-format", "json", lease_seconds=lease_s)
    log = EventLog(tmp_path / "server.log")
    alive = ["agent-0", "agent-1"]
    for name in alive:
        start_replay_agent(procs, name, url, scale)
    rng = random.Random(20)
    kills = []
    with procs.client(url) as client:
        wait_until(lambda: set(alive) <= set(agent_ids(client)), 60, "agents to register")
        request = replay_request(budget, AGENT_KILL["initial"], AGENT_KILL["seed"])
        created = client.post(f"{API}/searches", json=request)
        assert created.status_code == 201, created.text
        search_id = created.json()["id"]

        def alive_ids() -> dict[str, str]:
            info = client.get(f"{API}/searches/{search_id}").json()
            assert info["status"] == "running", f"search ended after {len(kills)} kills: {info}"
            ids = agent_ids(client)
            return {ids[name]: name for name in alive if name in ids}

        for index in range(AGENT_KILLS):
            time.sleep(rng.uniform(*KILL_PAUSE_S))  # then the next claim's agent is killed
            spare = {k.job_id for k in kills}  # each kill interrupts another job
            kills.append(kill_mid_measurement(log, alive_ids, procs.kill, rng, spare))
            alive.remove(kills[-1].name)
            alive.append(f"agent-{index + 2}")
            start_replay_agent(procs, alive[-1], url, scale)
        wait_finished(client, search_id, procs, timeout=180)
        assert_measured_exactly_once(client, db, search_id, budget)

    # Every kill interrupted a measurement: the killed agent never reported that job, and the
    # job was leased again (the lease ran out and it was requeued) and measured by another.
    results = {(e["agent_id"], e["job_id"]) for e in log.named("job.result")}
    claims = log.named("job.claimed")
    for kill in kills:
        assert (kill.agent_id, kill.job_id) not in results, f"{kill}: the job was reported"
        later = [c for c in claims if c["job_id"] == kill.job_id and c["t"] > kill.killed_at]
        assert later, f"{kill}: the job was never leased again"
    requeued = sum(e["requeued"] for e in log.named("lease.expired"))
    assert requeued >= AGENT_KILLS, f"only {requeued} expired leases were requeued"
    attempts = database_rows(
        db, "SELECT id FROM candidates WHERE search_id = ? AND attempts > 1", search_id
    )
    assert {k.job_id for k in kills} <= {job for (job,) in attempts}
    assert len({k.job_id for k in kills}) == AGENT_KILLS


# -- 2. the server killed mid-search -----------------------------------------------------------
SERVER_KILLS = 5


def replay_search(tmp: Path, server_kills: int, rng: random.Random) -> dict[str, Any]:
    """A seeded LTS search measured by two replay agents on a fresh server and database; the
    server is SIGKILLed `server_kills` times at random moments of the search and restarted
    on the same database file and port, while the agents keep running. What it ended with,
    and the search's progress just before each kill."""
    tmp.mkdir()
    procs = Processes(tmp)
    db, port = tmp / "search.db", free_port()
    url = f"http://127.0.0.1:{port}"
    at_kills = []
    lease_s, budget = SERVER_KILL["lease_s"], SERVER_KILL["budget"]
    try:
        start_server(procs, db, port, "--log-format", "json", lease_seconds=lease_s)
        for name in ("agent-0", "agent-1"):
            start_replay_agent(procs, name, url, SERVER_KILL["time_scale"])
        with procs.client(url) as client:
            wait_until(lambda: len(agent_ids(client)) == 2, 60, "agents to register")
            request = replay_request(budget, SERVER_KILL["initial"], SERVER_KILL["seed"])
            search_id = client.post(f"{API}/searches", json=request).json()["id"]
            for when in sorted(rng.sample(range(2, budget - 6), server_kills)):
                wait_measured(client, search_id, when)
                time.sleep(rng.uniform(0.0, 0.3))
                at_kills.append(progress(client, search_id))
                procs.kill("server")
                time.sleep(rng.uniform(0.0, 0.5))  # agents meet connection errors meanwhile
                start_server(procs, db, port, "--log-format", "json", lease_seconds=lease_s)
            wait_finished(client, search_id, procs, timeout=120)
            candidates = assert_measured_exactly_once(client, db, search_id, budget)
            front = client.get(f"{API}/searches/{search_id}/pareto").json()
    finally:
        procs.stop_all()
    return {
        "proposed": [(c["arch_id"], c["generation"]) for c in candidates],
        "frontier": {p["arch_id"]: p["objectives"] for p in front},
        "at_kills": at_kills,
    }


def progress(client: httpx.Client, search_id: int) -> dict[str, int]:
    info = client.get(f"{API}/searches/{search_id}").json()
    assert info["status"] == "running", f"the search ended before the kills: {info}"
    return info["progress"]


def wait_measured(client: httpx.Client, search_id: int, count: int) -> None:
    def reached() -> bool:
        return progress(client, search_id)["measured"] >= count

    wait_until(reached, 60, f"{count} results")


def test_server_killed_5_times_mid_search_ends_with_the_uninterrupted_frontier(tmp_path):
    """LTS has a generation barrier: a generation is bred only once the previous one is fully
    measured, from a generator seeded by (seed, generation), out of the frontier in proposal
    order, and the replayed measurements depend only on the architecture. So neither the
    order results arrive in, nor the outages, nor the engine being rebuilt from the database
    after each restart may change a single proposal: the same candidates, in the same order,
    and the same frontier with the same values."""
    calm = replay_search(tmp_path / "uninterrupted", 0, random.Random(0))
    killed = replay_search(tmp_path / "killed", SERVER_KILLS, random.Random(5))
    assert len(killed["at_kills"]) == SERVER_KILLS
    assert any(p["running"] > 0 for p in killed["at_kills"]), "no kill caught a job in flight"
    assert killed["proposed"] == calm["proposed"]
    assert killed["frontier"] == calm["frontier"]
    assert len(calm["frontier"]) >= 3


# -- 3. duplicates, timeouts, late agents ------------------------------------------------------
SHORT_LEASE_S = 2.0
MANUAL_CLASS = "manual"


class HttpAgent:
    """An agent spoken by hand over real HTTP: register with the enrollment token, then
    claim, heartbeat and report with the credential the server issued."""

    def __init__(self, url: str, enrollment_token: str | None, name: str) -> None:
        with api_client(url, enrollment_token) as http:
            registered = http.post(
                f"{API}/agents",
                json={"device_class": MANUAL_CLASS, "name": name, "fingerprint": FINGERPRINT},
            )
        assert registered.status_code == 201, registered.text
        info = registered.json()
        self.id = info["agent_id"]
        self.http = api_client(url, info["credential"])

    def close(self) -> None:
        self.http.close()

    def claim(self) -> dict[str, Any]:
        claimed = self.http.post(f"{API}/agents/{self.id}/claim")
        assert claimed.status_code == 200, claimed.text
        return claimed.json()

    def heartbeat(self, lease: dict[str, Any]) -> int:
        ref = {"agent_id": self.id, "lease_id": lease["lease_id"]}
        return self.http.post(f"{API}/jobs/{lease['job_id']}/heartbeat", json=ref).status_code

    def report(
        self, lease: dict[str, Any], failed: bool = False, timeout: float | None = None
    ) -> httpx.Response:
        body: dict[str, Any] = {"agent_id": self.id, "lease_id": lease["lease_id"]}
        if failed:
            body["failure"] = {"kind": "error", "message": "the device fell over"}
        else:
            body["measurement"] = synthetic_measurement(lease["spec"])
        path = f"{API}/jobs/{lease['job_id']}/result"
        return self.http.post(path, json=body, timeout=timeout or self.http.timeout)


def receipt(response: httpx.Response) -> tuple[int, bool | None]:
    """(status, duplicate) of a result submission."""
    return response.status_code, response.json().get("duplicate")


def jobs_done(client: httpx.Client) -> dict[str, tuple[int, int]]:
    """agent id -> (jobs_done, failures)."""
    return {
        a["agent_id"]: (a["jobs_done"], a["failures"]) for a in client.get(f"{API}/agents").json()
    }


def test_duplicates_timeouts_and_late_agents_count_each_measurement_once(tmp_path, procs):
    db, port = tmp_path / "exactly-once.db", free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(procs, db, port, "--log-format", "json", lease_seconds=SHORT_LEASE_S)
    agents = [HttpAgent(url, procs.agent_token, name) for name in "abcdefg"]
    try:
        check_exactly_once(procs, server, url, db, *agents)
    finally:
        for agent in agents:
            agent.close()


def check_exactly_once(
    procs: Processes, server: subprocess.Popen, url: str, db: Path, *agents: HttpAgent
) -> None:
    a, b, c, d, e, f, g = agents
    log = EventLog(procs.log_path("server"))
    population = {"initial": 6, "parents": 2, "mutations": 2, "crossovers": 2}
    request = search_request(
        device_class=MANUAL_CLASS, budget={"max_evaluations": 6}, population=population
    )
    with procs.client(url) as client:
        search_id = client.post(f"{API}/searches", json=request).json()["id"]

        # The same result twice: the second is a duplicate and changes nothing.
        first = a.claim()
        assert receipt(a.report(first)) == (200, False)
        assert receipt(a.report(first)) == (200, True)
        assert jobs_done(client)[a.id] == (1, 0)

        # Retries after timeouts: the server stops answering (SIGSTOP) while it holds the
        # result; the client gives up three times; the server resumes, records the result
        # from an attempt whose client had given up, and the next retry is a duplicate.
        second = a.claim()
        server.send_signal(signal.SIGSTOP)
        try:
            for _ in range(3):
                with pytest.raises(httpx.TimeoutException):
                    a.report(second, timeout=0.5)
        finally:
            server.send_signal(signal.SIGCONT)
        job = second["job_id"]

        def recorded() -> list[dict]:
            return [x for x in log.named("job.result") if x["job_id"] == job]

        wait_until(recorded, 10, "a timed-out attempt to be recorded")
        assert receipt(a.report(second)) == (200, True)
        assert len(recorded()) == 1 and jobs_done(client)[a.id] == (2, 0)
        path = f"{API}/jobs/{job}/result"
        answers = [x["status"] for x in log.named("http.request") if x["path"] == path]
        assert set(answers) == {200}, answers  # every attempt that reached it: accepted once

        # An agent that went silent past its lease comes back with its measurement after the
        # job went to another agent: it is accepted once; the other agent's lease is void.
        third = a.claim()
        time.sleep(SHORT_LEASE_S + 0.5)
        again = b.claim()
        assert again["job_id"] == third["job_id"], "the expired job should be leased again"
        assert (a.heartbeat(third), b.heartbeat(again)) == (409, 200)
        assert receipt(a.report(third)) == (200, False)
        assert receipt(a.report(third)) == (200, True)
        assert b.heartbeat(again) == 409
        assert b.report(again).status_code == 409
        late = log.named("job.late_result")
        assert [(x["job_id"], x["agent_id"], x["other_agent"]) for x in late] == [
            (third["job_id"], a.id, b.id)
        ]

        # A late failure is dropped (the job is being tried again), the new lease's
        # measurement counts.
        fourth = c.claim()
        time.sleep(SHORT_LEASE_S + 0.5)
        retried = d.claim()
        assert retried["job_id"] == fourth["job_id"]
        assert c.report(fourth, failed=True).status_code == 409
        assert receipt(d.report(retried)) == (200, False)

        # Back after its lease expired, but the job was measured under the next lease
        # meanwhile: the late measurement is refused, the job keeps the one it has.
        fifth = f.claim()
        time.sleep(SHORT_LEASE_S + 0.5)
        taken = g.claim()
        assert taken["job_id"] == fifth["job_id"]
        assert receipt(g.report(taken)) == (200, False)
        assert (f.heartbeat(fifth), f.report(fifth).status_code) == (409, 409)

        # Silent past its lease, but nobody took the job: the lease is renewed, the result
        # counts as an ordinary one.
        sixth = e.claim()
        time.sleep(SHORT_LEASE_S + 0.5)
        assert e.heartbeat(sixth) == 200
        assert receipt(e.report(sixth)) == (200, False)

        wait_finished(client, search_id, procs, timeout=30)
        candidates = assert_measured_exactly_once(client, db, search_id, 6)
        done = {a.id: (3, 0), d.id: (1, 0), e.id: (1, 0), g.id: (1, 0)}  # (jobs, failures)
        assert jobs_done(client) == {x.id: done.get(x.id, (0, 0)) for x in agents}
        by_agent = {row["arch_id"]: row["measurement"]["agent_id"] for row in candidates}
        assert [by_agent[lease["arch_id"]] for lease in (third, fourth, fifth)] == [
            a.id,
            d.id,
            g.id,
        ]
