"""Request cost: server CPU per claim + result, and where it goes (issue 20, item 2).

One process holds the real application (`create_app`, a SQLite file, authentication off;
`--auth` turns it on, as deployed)
and drives it as one agent would: claim, report a synthetic measurement, again. Two ways:

- over HTTP, through Starlette's TestClient: the process CPU time (all threads) per claim +
  result is the server's work plus the test client's, and an upper bound on the server's;
- through the service functions the routes call (`server.services.jobs.claim`,
  `submit_result`, and `server.services.arrivals.settle`, which the result route runs once
  its answer has gone): the server's work without HTTP, JSON and validation, the requests
  apart from the settle, profiled with cProfile (the routes run in worker threads, out of
  the profiler's sight).

The SQL statements per cycle are counted (writes apart). Idle claims, with nothing queued,
are timed and counted the same way.

    .venv/bin/python -m bench.request_cost [--strategy lts] [--warm 200] [--cycles 300]
        [--idle 200] [--profile 25] [--json bench/results/request_cost.json]

`--store postgresql` runs the in-process cycles on a throwaway PostgreSQL cluster (its own
CPU is not counted).

`--warm N`: results told before timing starts, so that the search (and its result table)
has N candidates: the cost of a request may grow with the search. Each result carries the
agent's latest reading of the search's reference architecture, a new one every 5 results as
deployed agents send them (`--readings N`; 0: none): new readings feed the noise model.

`--remeasure N`: a search of `--warm` driven to its budget, then N results of the
re-measurements it queues: the CPU of each result and of the claim before it, and every hold
of the store's write lock from that claim to the result's settle (wall time: what others'
writes would wait).

`--replay N`: a search of N measured, then the same search created again and replayed from the
measurement cache: every hold of the write lock from that create until it finishes, and the
server functions that held it longest.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import sqlite3
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient
from sqlalchemy import event

from archvocab.wire import JobResult
from bench.machine import commit, machine, tree_cpu_s
from bench.script import command_line, served_from, write_json
from hwnas.testing import postgres
from hwnas.testing.measurements import (
    FINGERPRINT,
    reference_reading,
    synthetic_measurement,
)
from hwnas.testing.servers import RunningServer, serve
from server.app.factory import create_app
from server.services import arrivals, jobs, searches
from server.services.auth import create_token
from server.settings import Settings


def _search(strategy: str, budget: int, seed: int) -> dict[str, Any]:
    return {
        "name": "request-cost",
        "device_class": "bench-cpu",
        "strategy": strategy,
        "seed": seed,
        "budget": {"max_evaluations": budget},
    }


# Deployed agents read the search's reference architecture again every 5 jobs (the default
# `reference_every_jobs`) and send the latest reading with each result.
READINGS_EVERY = 5


def _measurement(spec: dict[str, Any], reference: str, done: int, every: int) -> dict[str, Any]:
    """A synthetic measurement, sent with the reading of `reference` an agent that has
    reported `done` results takes every `every` jobs (none when `every` is 0)."""
    measurement = synthetic_measurement(spec)
    if every:
        measurement["reference"] = reference_reading(reference, done // every)
    return measurement


class Agent:
    def __init__(
        self,
        client: Any,
        enrollment: str | None = None,
        readings: int = 0,
        claim_next: bool = False,
    ) -> None:
        self.client = client
        self.readings, self.done = readings, 0
        # Each result also claims the next job (`claim_next`), as `hwnas agent` does.
        self.claim_next, self.held = claim_next, None
        answer = client.post(
            "/api/v1/agents",
            json={"device_class": "bench-cpu", "fingerprint": FINGERPRINT},
            headers=_bearer(enrollment),
        )
        answer.raise_for_status()
        self.id = answer.json()["agent_id"]
        self.headers = _bearer(answer.json().get("credential"))

    def cycle(self, last: bool = False) -> bool:
        """One job: its claim (unless the last result brought it) and its result; False when
        there was no work. The `last` of a run claims no next job: a lease held between runs
        would keep an LTS generation from ending, and the other agent from work."""
        lease, self.held = self.held, None
        if lease is None:
            claimed = self.client.post(f"/api/v1/agents/{self.id}/claim", headers=self.headers)
            if claimed.status_code == 204:
                return False
            claimed.raise_for_status()
            lease = claimed.json()
        reference = lease["reference"]["arch_id"]
        body = {
            "agent_id": self.id,
            "lease_id": lease["lease_id"],
            "measurement": _measurement(lease["spec"], reference, self.done, self.readings),
        }
        answer = self.client.post(
            f"/api/v1/jobs/{lease['job_id']}/result",
            json=body,
            headers=self.headers,
            params={"claim_next": True} if self.claim_next and not last else None,
        )
        answer.raise_for_status()
        self.held = answer.json().get("next")
        self.done += 1
        return True


class Statements:
    """Counts the SQL statements the store runs, writes apart, and those run holding the
    store's write lock."""

    def __init__(self, store: Any) -> None:
        self.reads = self.writes = self.locked = 0
        self._store = store
        event.listen(store.db, "before_cursor_execute", self._seen)

    def _seen(self, conn, cursor, statement, parameters, context, executemany) -> None:
        verb = statement.lstrip().split(None, 1)[0].upper()
        if verb in ("SELECT", "PRAGMA", "BEGIN", "SAVEPOINT", "RELEASE"):
            self.reads += 1
        else:
            self.writes += 1
        self.locked += self._store.write_lock._is_owned()


def _timed(n: int, step) -> tuple[list[float], int]:
    """CPU ms of each of `n` calls of `step`, and how many did work."""
    cpu, worked = [], 0
    for _ in range(n):
        start = time.process_time()
        worked += bool(step())
        cpu.append((time.process_time() - start) * 1000)
    return cpu, worked


def _direct(services: Any, agent: Agent, settling: list[float] | None = None) -> bool:
    """`Agent.cycle` through the service functions, without HTTP: the claim, the result and
    then, as the route does once its answer has gone, telling the search (`settle`, for a
    strategy with slow rounds; the others are told in the result request); the CPU of that
    last step goes to `settling` as well."""
    lease = jobs.claim(services, agent.id)
    if lease is None:
        return False
    body = {
        "agent_id": agent.id,
        "lease_id": lease.lease_id,
        "measurement": _measurement(
            lease.spec, lease.reference.arch_id, agent.done, agent.readings
        ),
    }
    _, search_id = jobs.submit_result(services, lease.job_id, JobResult.model_validate(body))
    agent.done += 1
    start = time.process_time()
    if search_id is not None:  # a strategy with slow rounds: told after the answer
        arrivals.settle(services, search_id, look=False)  # as the route does
    if settling is not None:
        settling.append((time.process_time() - start) * 1000)
    return True


def _bearer(secret: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"} if secret else {}


@contextlib.contextmanager
def _database(store: str, tmp: str) -> Iterator[str]:
    """The URL of a fresh database: a SQLite file in `tmp`, or a database on a throwaway
    PostgreSQL cluster (hwnas.testing.postgres), stopped afterwards."""
    if store == "sqlite":
        yield f"sqlite:///{Path(tmp) / 'cost.db'}"
        return
    cluster = postgres.start()
    try:
        yield cluster.create_database("cost")
    finally:
        cluster.stop()


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, _database(args.store, tmp) as db:
        app = create_app(Settings(database_url=db, auth=args.auth))
        with TestClient(app) as client:
            store = app.state.store
            with store.write() as session:  # as `hwnas token create` would
                user = create_token(session, "bench-user", "user", store.now())[1]
                enrollment = create_token(session, "bench-agents", "agent", store.now())[1]
            if args.auth:
                client.headers.update(_bearer(user))
            budget = args.warm + 2 * args.cycles + args.profile
            client.post(
                "/api/v1/searches", json=_search(args.strategy, budget, args.seed)
            ).raise_for_status()
            agent = Agent(client, enrollment if args.auth else None, args.readings)
            statements = Statements(app.state.store)
            for _ in range(args.warm):
                agent.cycle()
            statements.reads = statements.writes = 0
            busy, worked = _timed(args.cycles, agent.cycle)
            per_cycle = {"reads": statements.reads / args.cycles}
            per_cycle["writes"] = statements.writes / args.cycles
            services = app.state.services
            settling: list[float] = []
            held = _HoldTimer(services.store)
            held_per_cycle: list[float] = []  # ms the cycle held the write lock, in all

            def cycle() -> bool:
                held.ms.clear()
                worked = _direct(services, agent, settling)
                held_per_cycle.append(sum(held.ms))
                return worked

            statements.locked = 0
            direct, _ = _timed(args.cycles, cycle)
            locked_per_cycle = statements.locked / args.cycles
            # (the service functions take no credential: the routes check it)
            requests = [d - t for d, t in zip(direct, settling, strict=True)]
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(args.profile):
                _direct(services, agent)
            profile.disable()
            noise = client.get("/api/v1/searches/1").json()["noise"]
            # Idle: a search that is finished leaves nothing to claim.
            client.post("/api/v1/searches/1/cancel").raise_for_status()
            statements.reads = statements.writes = 0
            idle, _ = _timed(args.idle, agent.cycle)
            idle_statements = {
                "reads": statements.reads / args.idle,
                "writes": statements.writes / args.idle,
            }
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(args.top)
    return {
        "command": command_line([".venv/bin/python", "-m", "bench.request_cost"], None),
        "commit": commit(),
        "machine": machine(),
        "store": args.store,
        "strategy": args.strategy,
        "auth": args.auth,
        "warm": args.warm,
        "readings": args.readings,
        "reference_readings": noise["reference_readings"],  # the server's count of them
        "cycles": args.cycles,
        "worked": worked,
        "cycle_cpu_ms": _summary(busy),
        "cycle_services_cpu_ms": _summary(direct),
        # the claim's and the result's requests alone, and the settle after the answer
        "cycle_requests_cpu_ms": _summary(requests),
        "cycle_settle_cpu_ms": _summary(settling),
        "cycle_statements": per_cycle,
        # the services-only cycles: wall ms holding the write lock, statements run holding it
        "cycle_write_lock_ms": _summary(held_per_cycle),
        "cycle_statements_under_lock": locked_per_cycle,
        "idle_claim_cpu_ms": _summary(idle),
        "idle_claim_statements": idle_statements,
        "profile": text.getvalue(),
    }


def run_served(args: argparse.Namespace) -> dict[str, Any]:
    """The same cycles against a real `hwnas serve` (uvicorn, authentication on, JSON log to
    a file), one agent at a time over loopback: the server process's CPU (user + system, from
    /proc) per claim + result and per idle claim. No other client is running, so every tick the
    server spent is this agent's. With `--baseline-pythonpath`, a second server runs the code
    that path finds, and its claim-next rounds are interleaved with this one's: a before and
    after on the same machine at the same time, both started on copies of one database that
    this checkout warmed (so that code must read this checkout's schema)."""
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        warmed = None
        if args.baseline_pythonpath:
            # Both servers start from one database, warmed once by this checkout (then
            # stopped), each on its own copy: the same search, history and frontier, read in
            # by both as after a restart.
            warmed = _warmed_database(tmp, args)
        here = _served_search(stack, tmp, "server", args, None, warmed)
        pid = here.server.proc.pid
        agent = Agent(here.http, here.server.procs.agent_token, args.readings)
        # The same, each result claiming the next job (`claim_next`): its rounds
        # interleaved with the plain agent's.
        chained = Agent(here.http, here.server.procs.agent_token, args.readings, claim_next=True)
        players = [(agent, pid), (chained, pid)]
        for _ in range(0 if warmed else args.warm):
            agent.cycle()
        start_results = {"this": _measured(here.http)}  # when the timed rounds begin
        if args.baseline_pythonpath:
            env = served_from(args.baseline_pythonpath)
            there = _served_search(stack, tmp, "baseline", args, env, warmed)
            baseline = Agent(
                there.http, there.server.procs.agent_token, args.readings, claim_next=True
            )
            players.append((baseline, there.server.proc.pid))
            start_results["baseline"] = _measured(there.http)
        rounds: dict[Agent, list[float]] = {player: [] for player, _ in players}
        per_round = args.served // args.rounds
        for index in range(args.rounds):  # several rounds: the spread says how far to trust one
            for player, server_pid in players if index % 2 == 0 else players[::-1]:
                start = tree_cpu_s(server_pid)
                worked = sum(player.cycle(last=i == per_round - 1) for i in range(per_round))
                rounds[player].append((tree_cpu_s(server_pid) - start) * 1000 / max(worked, 1))
        here.http.post("/api/v1/searches/1/cancel").raise_for_status()
        agent.cycle()  # the first claim after the cancel finds nothing and is remembered
        start = tree_cpu_s(pid)
        for _ in range(args.idle):
            agent.cycle()
        idle = (tree_cpu_s(pid) - start) * 1000 / args.idle
    plain, next_claimed = rounds[agent], rounds[chained]
    out = {
        "served_cycle_cpu_ms": {"median": statistics.median(plain), "rounds": plain},
        "served_claim_next_cycle_cpu_ms": {
            "median": statistics.median(next_claimed),
            "rounds": next_claimed,
        },
        "served_idle_claim_cpu_ms": idle,
        "served_start_results": start_results,
    }
    if args.baseline_pythonpath:
        before = rounds[players[2][0]]
        out["served_baseline_claim_next_cycle_cpu_ms"] = {
            "pythonpath": args.baseline_pythonpath,
            "median": statistics.median(before),
            "rounds": before,
            "median_ratio": statistics.median(a / b for a, b in zip(next_claimed, before)),
        }
    return out


@dataclass
class _Served:
    server: RunningServer
    http: httpx.Client


def _served_search(
    stack: contextlib.ExitStack,
    tmp: Path,
    name: str,
    args: argparse.Namespace,
    env: dict[str, str] | None,
    warmed: Path | None = None,
) -> _Served:
    """A real server named `name` with the benchmark's search, for the stack's life: on a
    copy of `warmed`, which holds it already, or with the search created."""
    db = tmp / f"{name}.db"
    if warmed is not None:
        with sqlite3.connect(warmed) as source, sqlite3.connect(db) as copy:
            source.backup(copy)
    server = stack.enter_context(
        serve(tmp / name, db, "--log-format", "json", lease_seconds=None, env=env)
    )
    http = stack.enter_context(server.client(timeout=60))
    if warmed is None:
        budget = args.warm + 2 * args.served + 10
        search = _search(args.strategy, budget, args.seed)
        http.post("/api/v1/searches", json=search).raise_for_status()
    return _Served(server, http)


def _measured(http: httpx.Client) -> int:
    answer = http.get("/api/v1/searches/1")
    answer.raise_for_status()
    return answer.json()["progress"]["measured"]


def _warmed_database(tmp: Path, args: argparse.Namespace) -> Path:
    """A database whose search has `--warm` results, from a server of this checkout."""
    with contextlib.ExitStack() as stack:
        warming = _served_search(stack, tmp, "warming", args, None)
        agent = Agent(warming.http, warming.server.procs.agent_token, args.readings)
        for _ in range(args.warm):
            agent.cycle()
    return tmp / "warming.db"


def run_remeasured(args: argparse.Namespace) -> dict[str, Any]:
    """A search of `--warm` candidates driven to its budget through the service functions,
    then `--remeasure` results of the re-measurements it queues at its end: CPU per result
    of each kind (the last 200 first measurements against the re-measurements)."""
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(Settings(database_url=f"sqlite:///{Path(tmp) / 'again.db'}", auth=False))
        with TestClient(app) as client:
            client.post(
                "/api/v1/searches", json=_search(args.strategy, args.warm, args.seed)
            ).raise_for_status()
            agent, services = Agent(client, readings=args.readings), app.state.services
            held = _HoldTimer(services.store)
            first: list[float] = []
            again: list[float] = []
            again_claims: list[float] = []  # the claims before each re-measurement's result
            again_settles: list[float] = []  # ... and what the result's route runs after it
            again_held: list[float] = []  # write-lock holds of those claims and results
            while len(again) < args.remeasure:
                remeasuring = len(first) >= args.warm
                held.ms.clear()
                start = time.process_time()
                lease = jobs.claim(services, agent.id)
                claimed = (time.process_time() - start) * 1000
                if lease is None:
                    break  # the search finished without (more) re-measurements
                body = {"agent_id": agent.id, "lease_id": lease.lease_id}
                body["measurement"] = _measurement(
                    lease.spec, lease.reference.arch_id, agent.done, agent.readings
                )
                agent.done += 1
                start = time.process_time()
                _, search_id = jobs.submit_result(
                    services, lease.job_id, JobResult.model_validate(body)
                )
                spent = (time.process_time() - start) * 1000
                start = time.process_time()
                if search_id is not None:  # as the route does once its answer has gone
                    arrivals.settle_after_answer(services, search_id)
                settled = (time.process_time() - start) * 1000
                (again if remeasuring else first).append(spent)
                if remeasuring:
                    again_claims.append(claimed)
                    again_settles.append(settled)
                    again_held.extend(held.ms)
    return {
        "remeasure_first_ms": _summary(first[-200:]),
        "remeasure_again_ms": _summary(again) if again else None,
        "remeasure_again_claim_ms": _summary(again_claims) if again_claims else None,
        "remeasure_again_settle_ms": _summary(again_settles) if again_settles else None,
        # wall time, not CPU: every hold of the write lock from a re-measurement's claim to its
        # result's settle, the time others' writes would wait
        "remeasure_again_write_lock_held_ms": _summary(again_held) if again_held else None,
    }


def run_replayed(args: argparse.Namespace) -> dict[str, Any]:
    """A search of `--replay` candidates measured through the service functions, then the
    same search created again: the measurement cache holds every candidate it proposes, and
    tells them to it in the create and the rounds after. Every hold of the store's write lock
    from that create until the replayed search finishes (wall time: what others' writes
    would wait), its re-measurements measured by the one agent; and where the longest was."""
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(Settings(database_url=f"sqlite:///{Path(tmp) / 'replay.db'}", auth=False))
        with TestClient(app) as client:
            request = _search(args.strategy, args.replay, args.seed)
            client.post("/api/v1/searches", json=request).raise_for_status()
            agent, services = Agent(client, readings=args.readings), app.state.services
            while _direct(services, agent):
                pass
            held = _HoldTimer(services.store, sites=True)
            commits = _CommitTimer(services.store)
            answered = _Answered()
            start = time.perf_counter()
            with answered.timing():
                created = client.post("/api/v1/searches", json=request)
            created.raise_for_status()
            url = f"/api/v1/searches/{created.json()['id']}"
            while client.get(url).json()["status"] == "running":
                if not _direct(services, agent):  # its re-measurements, if any
                    time.sleep(0.05)
            replayed = time.perf_counter() - start
            info = client.get(url).json()
    longest = max(range(len(held.ms)), key=held.ms.__getitem__)
    return {
        "replay_candidates": args.replay,
        "replay_reused": info["progress"]["reused"],
        "replay_remeasured": info["progress"]["remeasured"],
        # the create's route until its answer was made (the test client also waits for
        # what the route runs after it)
        "replay_create_answered_s": answered.s,
        "replay_finished_s": replayed,
        "replay_write_lock_held_ms": _summary(held.ms),
        "replay_longest_hold_site": held.sites[longest],
        "replay_holds_over_20ms": sorted(
            {site for ms, site in zip(held.ms, held.sites) if ms > 20}
        ),
        # each site's holds: where the long ones come from besides the longest
        "replay_holds_by_site": {
            site: _summary([ms for ms, at in zip(held.ms, held.sites) if at == site])
            for site in sorted(set(held.sites))
        },
        # every COMMIT the store's connections ran (on SQLite, a commit that found the
        # write-ahead log long also copied it into the database)
        "replay_commit_ms": _summary(commits.ms),
        "replay_commits_over_5ms": sum(ms > 5 for ms in commits.ms),
    }


class _Answered:
    """How long `server.services.searches.create_search`, which the route answers with,
    took within `timing`."""

    def __init__(self) -> None:
        self.s = 0.0

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        create = searches.create_search

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return create(*args, **kwargs)
            finally:
                self.s += time.perf_counter() - start

        searches.create_search = timed
        try:
            yield
        finally:
            searches.create_search = create


class _HoldTimer:
    """Times every hold of the store's write lock (outermost; it is re-entrant) into `ms`;
    with `sites`, also names in `sites` the server function that took it (the innermost of
    server/services/ outside the store)."""

    def __init__(self, store: Any, sites: bool = False) -> None:
        self.ms: list[float] = []
        self.sites: list[str] | None = [] if sites else None
        self._lock, self._depth, self._since = store.write_lock, 0, 0.0
        store.write_lock = self

    def __enter__(self) -> None:
        self._lock.acquire()
        self._depth += 1
        if self._depth == 1:
            self._since = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.ms.append((time.perf_counter() - self._since) * 1000)
            if self.sites is not None:
                self.sites.append(_site())
        self._lock.release()

    def _is_owned(self) -> bool:
        return self._lock._is_owned()


class _CommitTimer:
    """Times every commit of the store's connections into `ms` (the dialect's, which runs the
    driver's COMMIT)."""

    def __init__(self, store: Any) -> None:
        self.ms: list[float] = []
        dialect = store.db.dialect
        commit = dialect.do_commit

        def timed(connection: Any) -> None:
            start = time.perf_counter()
            try:
                commit(connection)
            finally:
                self.ms.append((time.perf_counter() - start) * 1000)

        dialect.do_commit = timed


def _site() -> str:
    """`module.function` of the innermost frame in server/services/ on this thread's stack."""
    for frame in reversed(traceback.extract_stack()):
        if "/server/services/" in frame.filename:
            return f"{Path(frame.filename).stem}.{frame.name}"
    return "?"


def _summary(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {
        "median": statistics.median(ms),
        "mean": statistics.fmean(ms),
        "p90": ms[int(0.9 * (len(ms) - 1))],
        "max": ms[-1],
        "n": len(ms),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategy", default="lts", choices=["lts", "hwnas", "nsga2"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warm", type=int, default=200, help="results told before timing")
    parser.add_argument("--cycles", type=int, default=300, help="timed claim + result cycles")
    parser.add_argument("--idle", type=int, default=200, help="timed claims finding no work")
    parser.add_argument("--profile", type=int, default=25, help="profiled cycles")
    parser.add_argument("--top", type=int, default=40, help="profile lines printed")
    parser.add_argument("--auth", action="store_true", help="authentication on, as deployed")
    parser.add_argument(
        "--store",
        default="sqlite",
        choices=["sqlite", "postgresql"],
        help="the database of the in-process cycles (postgresql: a throwaway cluster)",
    )
    parser.add_argument(
        "--served",
        type=int,
        default=0,
        help="claim + result cycles timed against a real `hwnas serve` as well (0: none)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds the served cycles form")
    parser.add_argument(
        "--baseline-pythonpath",
        help="with --served: also serve the code this PYTHONPATH finds (a worktree of the "
        "commit before), its claim-next rounds interleaved with this checkout's",
    )
    parser.add_argument(
        "--remeasure",
        type=int,
        default=0,
        help="re-measurement results timed at the end of a search of --warm candidates (0: none)",
    )
    parser.add_argument(
        "--replay",
        type=int,
        default=0,
        help="a search of N measured, then the same search replayed from the measurement "
        "cache: the write lock's holds until it finishes (0: none)",
    )
    parser.add_argument(
        "--readings",
        type=int,
        default=READINGS_EVERY,
        help="a new reference reading every N results, as deployed agents send (0: none)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.idle < 1 or args.cycles < 1:
        parser.error("--idle and --cycles: at least 1 (each cost is per claim timed)")
    result = run(args)
    if args.served:
        result.update(run_served(args))
    if args.remeasure:
        result.update(run_remeasured(args))
    if args.replay:
        result.update(run_replayed(args))
    c, d, i = (result[k] for k in ("cycle_cpu_ms", "cycle_services_cpu_ms", "idle_claim_cpu_ms"))
    print(result["profile"])
    print(
        f"claim + result over HTTP: CPU median {c['median']:.2f} ms, mean {c['mean']:.2f}, p90 "
        f"{c['p90']:.2f} (n={c['n']}, {result['worked']} did work); statements per cycle "
        f"{result['cycle_statements']}"
    )
    print(f"claim + result, services only: CPU median {d['median']:.2f} ms, p90 {d['p90']:.2f}")
    held = result["cycle_write_lock_ms"]
    print(
        f"  the write lock held per cycle: median {held['median']:.2f} ms, p90 "
        f"{held['p90']:.2f}, {result['cycle_statements_under_lock']:.2f} statements under it"
    )
    r, t = result["cycle_requests_cpu_ms"], result["cycle_settle_cpu_ms"]
    print(
        f"  of which the two requests: median {r['median']:.2f} ms, p90 {r['p90']:.2f}; telling "
        f"the search after the answer: median {t['median']:.2f} ms, p90 {t['p90']:.2f}"
    )
    print(
        f"idle claim: CPU median {i['median']:.2f} ms; statements {result['idle_claim_statements']}"
    )
    if args.served:
        chained = result["served_claim_next_cycle_cpu_ms"]
        print(
            f"real server, each result claiming the next job: CPU per job median "
            f"{chained['median']:.2f} ms (rounds: "
            + ", ".join(f"{r:.2f}" for r in chained["rounds"])
            + ")"
        )
        if args.baseline_pythonpath:
            base = result["served_baseline_claim_next_cycle_cpu_ms"]
            print(
                f"  the baseline ({args.baseline_pythonpath}): median {base['median']:.2f} ms "
                "(rounds: " + ", ".join(f"{r:.2f}" for r in base["rounds"]) + "); median of "
                f"the per-round ratios, this checkout / baseline: {base['median_ratio']:.3f}"
            )
        served = result["served_cycle_cpu_ms"]
        rounds = ", ".join(f"{r:.2f}" for r in served["rounds"])
        print(
            f"real server (hwnas serve, auth on): CPU per claim + result median "
            f"{served['median']:.2f} ms (rounds: {rounds}); per idle claim "
            f"{result['served_idle_claim_cpu_ms']:.2f} ms"
        )
    if args.remeasure:
        f, a = result["remeasure_first_ms"], result["remeasure_again_ms"]
        again = (
            "none queued"
            if a is None
            else (f"median {a['median']:.1f} ms, max {a['max']:.0f} (n={a['n']})")
        )
        print(
            f"a search at its budget ({args.warm}): a first measurement's result median "
            f"{f['median']:.1f} ms CPU; a re-measurement's result {again}"
        )
        held = result["remeasure_again_write_lock_held_ms"]
        if held is not None:
            print(
                f"  write lock held from a re-measurement's claim to its result's settle: "
                f"median {held['median']:.1f} ms, max {held['max']:.0f} ms (n={held['n']})"
            )
    if args.replay:
        held = result["replay_write_lock_held_ms"]
        print(
            f"a search of {args.replay} replayed from the measurement cache "
            f"({result['replay_reused']} reused, {result['replay_remeasured']} re-measured): "
            f"create answered in {result['replay_create_answered_s']:.2f} s, finished in "
            f"{result['replay_finished_s']:.1f} s; write lock held median "
            f"{held['median']:.1f} ms, p90 {held['p90']:.1f}, max {held['max']:.0f} "
            f"(n={held['n']}), "
            f"longest in {result['replay_longest_hold_site']}; holds over 20 ms in: "
            + (", ".join(result["replay_holds_over_20ms"]) or "none")
        )
        commits = result["replay_commit_ms"]
        print(
            f"  commits: median {commits['median']:.2f} ms, max {commits['max']:.0f} ms, "
            f"{result['replay_commits_over_5ms']} of {commits['n']} over 5 ms"
        )
        for site, holds in result["replay_holds_by_site"].items():
            print(
                f"  held in {site}: {holds['n']} times, median {holds['median']:.1f} ms, "
                f"p90 {holds['p90']:.1f}, max {holds['max']:.0f}"
            )
    if args.json:
        write_json(args.json, result, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
