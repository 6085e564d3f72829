"""Load: N simulated agents claiming and reporting concurrently against one real server.

Per scenario (a store and a number of server processes) a fresh `hwnas serve` (SQLite file,
or a database of its own on a throwaway PostgreSQL cluster from tests/pg.py), authentication
on as deployed, its log in JSON. A user starts `--searches` LTS searches; then `--generators`
load-generating processes (asyncio + httpx, a pool of one connection per agent) run the
agents, each registering with the enrollment token and looping claim -> think (a sleep of
`--think-s`, 0.5x to 1.5x) -> report a synthetic measurement; on 204 it waits `--idle-s`.
The run stops after `--duration` seconds, at `--results` results or when every search has
finished; an agent holding a lease still reports it. Every request's latency and status is
recorded; a failure is a transport error or any status but 2xx (204 only on claims). Then
exactly-once is checked over the API (every accepted result is one measured candidate with
that agent's measurement, and nothing else is; agents' jobs_done add up), and the server's
log is searched for "database is locked", OperationalError, deadlocks and tracebacks.

    .venv/bin/python -m bench.load [--agents 200] [--duration 60] [--results N]
        [--stores sqlite,postgresql] [--workers 1,4] [--think-s 1] [--space JSON]
        [--json-out bench/results/load.json]

Exits 1 when any scenario had a failure, a log finding or an exactly-once violation.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib.util
import json
import math
import multiprocessing
import os
import platform
import random
import re
import resource
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # bench/proxies.py
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

DEVICE_CLASS = "load"
FINGERPRINT = {
    "os": "Linux",
    "cpu_model": "simulated cpu",
    "machine": "x86_64",
    "cores": 4,
    "ram_bytes": 2**33,
    "torch_version": "2.13.0",
    "accelerator": None,
}
# The agents only carry it (they simulate the device): small, as a fast test protocol.
MEASUREMENT = {"seq_len": 16, "warmup": 1, "min_samples": 5, "min_time_s": 0.0, "max_time_s": 0.5}
# Lines of the server's log that mean trouble under load, by what to call them.
LOG_PATTERNS = {
    "database is locked": re.compile(r"database is locked"),
    "OperationalError": re.compile(r"OperationalError"),
    "deadlock": re.compile(r"DeadlockDetected|deadlock detected", re.IGNORECASE),
    "serialization": re.compile(r"could not serialize|SerializationFailure"),
    "IntegrityError": re.compile(r"IntegrityError|UniqueViolation"),
    "pool timeout": re.compile(r"QueuePool limit"),
    "traceback": re.compile(r"Traceback \(most recent call last\)"),
}
REPORT_TRIES = 3
# 200 agents registering and claiming at once is a burst of its own; percentiles are also
# given over the requests that started this long after the agents did.
WARMUP_S = 10.0
KINDS = ("register", "claim", "result")


@dataclasses.dataclass(frozen=True)
class Load:
    """What one scenario runs; the same for every store and worker count."""

    agents: int = 200
    generators: int = 2
    duration_s: float = 60.0
    results: int | None = None
    searches: int = 4
    budget: int = 1000
    think_s: float = 1.0
    idle_s: float = 1.0
    timeout_s: float = 60.0
    lease_seconds: float = 60.0
    # How long the generators keep an idle connection. httpx's default (5 s) equals uvicorn's
    # keep-alive timeout: a request sent on a connection the server is closing that moment
    # fails with ReadError before the app sees it (a few per 30 s of 200 agents here; see
    # docs/benchmarks.md). Below the server's timeout, the client always closes first.
    keepalive_s: float = 2.0
    space: dict | None = None  # the searches' space (default: LTS's GPT-2 space)

    def search_request(self, index: int) -> dict:
        """An LTS search whose first generations keep about 1.5x the agents' jobs queued."""
        initial = max(4, math.ceil(1.5 * self.agents / self.searches))
        children = max(1, initial * 2 // 5)
        return {
            "name": f"load {index}",
            "strategy": "lts",
            "device_class": DEVICE_CLASS,
            "measurement": MEASUREMENT,
            "budget": {"max_evaluations": self.budget},
            "population": {
                "initial": initial,
                "parents": max(2, initial // 5),
                "mutations": children,
                "crossovers": children,
            },
            "seed": index,
            **({"space": self.space} if self.space else {}),
        }


# -- the simulated agents (in the generator processes) --------------------------------------
def synthetic_measurement(spec: dict) -> dict:
    """A MeasurementResult for `spec`: cost grows with the model's size, as on a device."""
    size = spec["d_model"] * sum(spec["d_inner"]) + spec["n_layer"] * spec["d_model"] ** 2
    latency, memory = 1.0 + size / 1e6, 50.0 + size / 2e5
    samples = [latency * f for f in (0.99, 1.0, 1.0, 1.01, 1.02)]
    return {
        "latency_ms": latency,
        "peak_memory_mb": memory,
        "latency": {
            "median_ms": latency,
            "p90_ms": samples[-1],
            "min_ms": samples[0],
            "iqr_ms": samples[3] - samples[1],
            "ci_low_ms": samples[0],
            "ci_high_ms": samples[-1],
            "ci_rel": 0.02,
            "confidence": 0.95,
            "samples": len(samples),
            "inner_repeats": 1,
            "samples_ms": samples,
            "stop_reason": "ci_target",
            "warmup_runs": 1,
            "warmup_s": 0.01,
            "warmup_stable": True,
            "timed_s": sum(samples) / 1000,
        },
        "memory": {
            "primary": "process_peak",
            "process_peak_mb": memory,
            "process_method": "simulated",
            "process_baseline_mb": 0.0,
            "weights_mb": memory / 2,
        },
        "build_s": 0.01,
        "total_s": 0.05,
        "provenance": {
            "runtime": "torch",
            "runtime_version": "2.13.0",
            "torch_version": "2.13.0",
            "python_version": platform.python_version(),
            "hostname": "simulated",
            "machine": "x86_64",
            "cpu_model": FINGERPRINT["cpu_model"],
            "threads": 1,
        },
    }


class Generator:
    """One process's share of the agents, on one event loop and one connection pool."""

    def __init__(self, load: Load, http: httpx.AsyncClient, enroll: str, stop) -> None:  # noqa: ANN001 - an Event
        self.load, self.http, self.stop = load, http, stop
        self.enroll = {"authorization": f"Bearer {enroll}"}
        self.requests: list[tuple] = []  # (kind, status (0: transport error), began, ms, error)
        self.accepted: list[tuple] = []  # (search_id, arch_id, job_id, agent_id, duplicate)
        self.leases: list[int] = []  # job ids, one per lease given

    async def call(self, kind: str, path: str, headers: dict, body: dict | None = None):
        began, start = time.time(), time.perf_counter()
        try:
            reply = await self.http.post(path, headers=headers, json=body)
            status = reply.status_code
            error = "" if status < 300 else reply.text[:300]
        except httpx.HTTPError as exc:
            reply, status, error = None, 0, f"{type(exc).__name__}: {exc}"[:200]
        self.requests.append((kind, status, began, 1000 * (time.perf_counter() - start), error))
        return reply

    async def agent(self, index: int) -> None:
        fingerprint = {**FINGERPRINT, "hostname": f"load-{index:04d}"}
        body = {"device_class": DEVICE_CLASS, "name": f"load-{index}", "fingerprint": fingerprint}
        reply = await self.call("register", "/api/v1/agents", self.enroll, body)
        if reply is None or reply.status_code != 201:
            return
        info = reply.json()
        agent_id, auth = info["agent_id"], {"authorization": f"Bearer {info['credential']}"}
        rng = random.Random(index)
        while not self.stop.is_set():
            reply = await self.call("claim", f"/api/v1/agents/{agent_id}/claim", auth)
            if reply is None or reply.status_code != 200:
                await asyncio.sleep(self.load.idle_s)
                continue
            lease = reply.json()
            self.leases.append(lease["job_id"])
            await asyncio.sleep(self.load.think_s * rng.uniform(0.5, 1.5))
            await self.report(agent_id, auth, lease)

    async def report(self, agent_id: str, auth: dict, lease: dict) -> None:
        """Report the lease's measurement; a transport error or a 5xx is retried, as an agent
        does (the retry is a request of its own, and the failure stays counted)."""
        path = f"/api/v1/jobs/{lease['job_id']}/result"
        body = {
            "agent_id": agent_id,
            "lease_id": lease["lease_id"],
            "measurement": synthetic_measurement(lease["spec"]),
        }
        for _ in range(REPORT_TRIES):
            reply = await self.call("result", path, auth, body)
            if reply is not None and reply.status_code == 200:
                got = reply.json()
                ids = (lease["search_id"], lease["arch_id"], lease["job_id"], agent_id)
                self.accepted.append((*ids, bool(got.get("duplicate"))))
                return
            if reply is not None and reply.status_code < 500:
                return  # refused: retrying the same body cannot help
            await asyncio.sleep(1.0)


async def _generate(load: Load, url: str, enroll: str, indices: list[int], stop, barrier):  # noqa: ANN001 - multiprocessing primitives
    limits = httpx.Limits(
        max_connections=len(indices),
        max_keepalive_connections=len(indices),
        keepalive_expiry=load.keepalive_s,
    )
    timeout = httpx.Timeout(load.timeout_s)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as http:
        generator = Generator(load, http, enroll, stop)
        barrier.wait()  # every generator starts its agents together
        await asyncio.gather(*(generator.agent(i) for i in indices))
    return generator


def generate(load: Load, url: str, enroll: str, indices: list[int], stop, barrier, out: str):  # noqa: ANN001 - multiprocessing primitives
    """A load-generating process: runs its agents, then writes what they saw to `out`."""
    generator = asyncio.run(_generate(load, url, enroll, indices, stop, barrier))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    Path(out).write_text(
        json.dumps(
            {
                "requests": generator.requests,
                "accepted": generator.accepted,
                "leases": generator.leases,
                "cpu_s": usage.ru_utime + usage.ru_stime,
            }
        )
    )


# -- the server and the machine ---------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def hwnas(*args: str) -> list[str]:
    return [sys.executable, "-m", "hwnas", *args]


def create_token(db: str, kind: str) -> str:
    """A token made straight in the database, as an admin does (`hwnas token create`)."""
    command = hwnas("token", "create", "--db", db, "--kind", kind, "--name", f"load-{kind}")
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["token"]


@contextlib.contextmanager
def serve(db: str, workers: int, load: Load, log: Path):
    """A real `hwnas serve` over `db` on a loopback port; yields (url, its process)."""
    port = free_port()
    command = hwnas("serve", "--port", str(port), "--db", db, "--workers", str(workers))
    command += ["--lease-seconds", str(load.lease_seconds), "--log-format", "json"]
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc, log)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_healthy(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"server did not start: {log.read_text()[-2000:]}")


def tree_cpu_s(root: int | None) -> float:
    """CPU seconds of process `root` and its descendants, reaped children included."""
    if root is None:
        return 0.0
    parent, cpu = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            pid = int(stat.parent.name)
            parent[pid] = int(fields[1])
            cpu[pid] = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    mine, todo = set(), [root]
    while todo:
        pid = todo.pop()
        mine.add(pid)
        todo.extend(p for p, pp in parent.items() if pp == pid and p not in mine)
    return sum(cpu.get(p, 0.0) for p in mine)


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = values[3] + values[4]
    return (sum(values) - idle) / ticks, sum(values) / ticks


def load_pg():
    """tests/pg.py: the suite's throwaway PostgreSQL cluster. Test infrastructure, but ours,
    and the one place that knows how to start PostgreSQL on this machine (root or not)."""
    spec = importlib.util.spec_from_file_location("hwnas_tests_pg", ROOT / "tests" / "pg.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def postmaster_pid(cluster) -> int | None:  # noqa: ANN001 - a tests/pg.py Cluster
    with contextlib.suppress(OSError, ValueError):
        return int((cluster.data / "postmaster.pid").read_text().split("\n", 1)[0])
    return None


# -- one scenario -----------------------------------------------------------------------------
@dataclasses.dataclass
class Seen:
    """What the generators saw, merged, and how the run went."""

    requests: list = dataclasses.field(default_factory=list)
    accepted: list = dataclasses.field(default_factory=list)
    leases: list = dataclasses.field(default_factory=list)
    generator_cpu_s: float = 0.0
    monitor_errors: list = dataclasses.field(default_factory=list)
    started: float = 0.0  # when the agents started (time.time())
    stopped: float = 0.0  # when they were told to stop
    ended: float = 0.0  # when the last generator had finished
    stopped_by: str = ""
    cpu: dict = dataclasses.field(default_factory=dict)


def run_scenario(load: Load, store: str, workers: int, workdir: Path, cluster=None) -> dict:  # noqa: ANN001 - a tests/pg.py Cluster
    """One fresh server over a fresh database, the searches, the agents, the checks."""
    name = f"{store}-w{workers}"
    database = f"load_{store}_w{workers}_{os.getpid()}"
    if store == "sqlite":
        db = str(workdir / f"{name}.db")
        for leftover in (db, f"{db}-wal", f"{db}-shm"):  # a fresh database, as on PostgreSQL
            Path(leftover).unlink(missing_ok=True)
    else:
        db = cluster.create_database(database)
    user, enroll = create_token(db, "user"), create_token(db, "agent")
    log = workdir / f"{name}.log"
    try:
        with serve(db, workers, load, log) as (url, proc), user_client(url, user) as http:
            search_ids = [start_search(http, load.search_request(i)) for i in range(load.searches)]
            pg_pid = postmaster_pid(cluster) if store == "postgresql" else None
            seen = drive(load, url, enroll, http, workdir / name, (proc.pid, pg_pid))
            once = verify(http, search_ids, seen)
    finally:
        if store == "postgresql":
            cluster.drop_database(database)
    return summarise(load, store, workers, seen, once, scan_log(log))


def start_search(http: httpx.Client, request: dict) -> int:
    reply = http.post("/api/v1/searches", json=request)
    if reply.status_code != 201:
        raise RuntimeError(f"POST /api/v1/searches: {reply.status_code} {reply.text}")
    return reply.json()["id"]


def user_client(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=120, headers={"authorization": f"Bearer {token}"})


def drive(load: Load, url: str, enroll: str, http: httpx.Client, out: Path, pids) -> Seen:  # noqa: ANN001 - (server pid, postmaster pid or None)
    """Start the generators together, stop them when the run is over, merge what they saw."""
    out.mkdir(parents=True, exist_ok=True)
    ctx = multiprocessing.get_context("spawn")
    stop, barrier = ctx.Event(), ctx.Barrier(load.generators + 1)
    files = [out / f"generator-{g}.json" for g in range(load.generators)]
    procs = [
        ctx.Process(
            target=generate,
            args=(load, url, enroll, list(range(g, load.agents, load.generators)), stop, barrier),
            kwargs={"out": str(file)},
        )
        for g, file in enumerate(files)
    ]
    for proc in procs:
        proc.start()
    seen = Seen()
    try:
        barrier.wait(timeout=120)
        before = cpu_snapshot(pids)
        seen.started = time.time()
        seen.stopped_by = monitor(load, http, procs, seen)
    finally:
        stop.set()
        seen.stopped = time.time()
        for proc in procs:
            proc.join(timeout=load.think_s * 1.5 + load.timeout_s * REPORT_TRIES + 30)
            if proc.is_alive():
                proc.kill()
    seen.ended = time.time()
    seen.cpu = cpu_used(before, cpu_snapshot(pids), seen.ended - seen.started)
    for proc, file in zip(procs, files):
        if not file.exists():
            raise RuntimeError(f"a load generator exited ({proc.exitcode}) without its records")
        part = json.loads(file.read_text())
        seen.requests += part["requests"]
        seen.accepted += part["accepted"]
        seen.leases += part["leases"]
        seen.generator_cpu_s += part["cpu_s"]
    cpu = seen.cpu
    cpu["generators_s"] = round(seen.generator_cpu_s, 2)
    # Whatever else ran on the machine meanwhile (other users' work on a shared machine).
    ours = cpu["server_s"] + cpu["postgres_s"] + cpu["generators_s"]
    cpu["others_s"] = round(max(0.0, cpu["machine_busy_s"] - ours), 2)
    return seen


def monitor(load: Load, http: httpx.Client, procs: list, seen: Seen) -> str:
    """Poll the searches once a second until the run is over; returns why it ended."""
    while True:
        time.sleep(1.0)
        if time.time() - seen.started >= load.duration_s:
            return "duration"
        if not any(proc.is_alive() for proc in procs):
            return "generators exited"
        try:
            searches = http.get("/api/v1/searches").raise_for_status().json()
        except httpx.HTTPError as exc:
            seen.monitor_errors.append(f"GET /api/v1/searches: {type(exc).__name__}: {exc}")
            continue
        if all(s["status"] != "running" for s in searches):
            return "searches finished"
        if load.results and sum(s["progress"]["measured"] for s in searches) >= load.results:
            return "results"


def cpu_snapshot(pids) -> dict:  # noqa: ANN001 - (server pid, postmaster pid or None)
    server, postgres = pids
    busy, total = machine_busy()
    return {
        "server": tree_cpu_s(server),
        "postgres": tree_cpu_s(postgres),
        "busy": busy,
        "total": total,
        "loadavg": [round(v, 2) for v in os.getloadavg()],
    }


def cpu_used(before: dict, after: dict, wall_s: float) -> dict:
    """CPU seconds each part used over the run, and how busy the whole machine was."""
    delta = {k: after[k] - before[k] for k in ("server", "postgres", "busy", "total")}
    return {
        "wall_s": round(wall_s, 2),
        "cores": os.cpu_count(),
        "server_s": round(delta["server"], 2),
        "postgres_s": round(delta["postgres"], 2),
        "machine_busy": round(delta["busy"] / delta["total"], 3) if delta["total"] else None,
        "machine_busy_s": round(delta["busy"], 2),
        "loadavg_before": before["loadavg"],
        "loadavg_after": after["loadavg"],
    }


# -- checks -------------------------------------------------------------------------------------
def verify(http: httpx.Client, search_ids: list[int], seen: Seen) -> dict:
    """Exactly-once over the API: each accepted result is one measured candidate carrying that
    agent's measurement, no measured candidate lacks an accepted result, jobs_done agree."""
    measured, statuses = {}, Counter()
    for sid in search_ids:
        for cand in http.get(f"/api/v1/searches/{sid}/candidates").raise_for_status().json():
            statuses[cand["status"]] += 1
            if cand["status"] == "measured" and not cand["reused"]:
                m = cand["measurement"]
                measured[(sid, cand["arch_id"])] = (m["agent_id"], m["measurement_id"])
    jobs_done = {a["agent_id"]: a["jobs_done"] for a in http.get("/api/v1/agents").json()}
    new = [(s, a, agent) for s, a, _, agent, duplicate in seen.accepted if not duplicate]
    per_job = Counter((s, a) for s, a, _ in new)
    per_agent = Counter(agent for *_, agent in new)
    ids = [mid for _, mid in measured.values()]
    checks = {
        "accepted": len(new),
        "duplicate_answers": len(seen.accepted) - len(new),
        "measured": len(measured),
        "jobs_done": sum(jobs_done.values()),
        "accepted_twice": sum(1 for n in per_job.values() if n > 1),
        "lost": sum(1 for s, a, agent in new if measured.get((s, a), (None,))[0] != agent),
        "unaccounted": sum(1 for key in measured if key not in per_job),
        "agents_mismatched": sum(1 for a, n in jobs_done.items() if n != per_agent.get(a, 0)),
        "measurement_ids_repeated": len(ids) - len(set(ids)),
        "leased_twice": sum(1 for n in Counter(seen.leases).values() if n > 1),
        "left_running": statuses["running"],
        "statuses": dict(statuses),
    }
    zero = ("accepted_twice", "lost", "unaccounted", "agents_mismatched")
    zero += ("measurement_ids_repeated", "left_running", "duplicate_answers")
    counts = {checks["accepted"], checks["measured"], checks["jobs_done"]}
    checks["ok"] = len(counts) == 1 and not any(checks[k] for k in zero)
    return checks


def scan_log(log: Path, keep: int = 20) -> dict:
    """The server's log: lines matching LOG_PATTERNS, error lines, 5xx answers, domain events
    by name, and the server's own time per request (its request log's duration_ms)."""
    hits, levels, statuses, events = Counter(), Counter(), Counter(), Counter()
    server_ms: dict[str, list[float]] = {kind: [] for kind in KINDS}
    excerpt = []
    for line in log.read_text(errors="replace").splitlines():
        found = [name for name, pattern in LOG_PATTERNS.items() if pattern.search(line)]
        hits.update(found)
        entry = parse_json(line)
        levels[entry.get("level", "text")] += 1
        failed = False
        if entry.get("event") == "http.request":
            statuses[entry["status"] // 100 * 100] += 1
            failed = entry["status"] >= 500
            kind = route_kind(entry.get("method"), entry.get("route", ""))
            if kind:
                server_ms[kind].append(entry["duration_ms"])
        elif entry.get("event"):
            events[entry["event"]] += 1
        if found or failed or entry.get("level") in ("error", "critical"):
            if len(excerpt) < keep:
                excerpt.append(line[:3000])
    return {
        "patterns": {name: hits[name] for name in LOG_PATTERNS},
        "error_lines": levels["error"] + levels["critical"],
        "http_5xx": statuses[500],
        "http_by_class": {f"{k // 100}xx": v for k, v in sorted(statuses.items())},
        "events": dict(sorted(events.items())),
        "server_ms": {kind: latency_stats(v) for kind, v in server_ms.items()},
        "excerpt": excerpt,
    }


def parse_json(line: str) -> dict:
    """A JSON log line's fields; {} for anything else (a line printed before logging started)."""
    try:
        entry = json.loads(line)
    except ValueError:
        return {}
    return entry if isinstance(entry, dict) else {}


def route_kind(method: str | None, route: str) -> str | None:
    if method != "POST":
        return None
    if route == "/api/v1/agents":
        return "register"
    if route.endswith("/claim"):
        return "claim"
    if route.endswith("/result"):
        return "result"
    return None


# -- numbers ------------------------------------------------------------------------------------
def percentile(ordered: list[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated between the two nearest ranks."""
    k = (len(ordered) - 1) * q
    low = math.floor(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def latency_stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    stats = {f"p{round(q * 100)}": percentile(ordered, q) for q in (0.5, 0.9, 0.99)}
    return {"n": len(ordered), **{k: round(v, 2) for k, v in stats.items()}, "max": ordered[-1]}


OK_STATUS = {"register": {201}, "claim": {200, 204}, "result": {200}}


def summarise(load: Load, store: str, workers: int, seen: Seen, once: dict, log: dict) -> dict:
    by_kind: dict[str, dict] = {}
    failures = []
    warm = seen.started + WARMUP_S
    for kind in KINDS:
        rows = [r for r in seen.requests if r[0] == kind]
        bad = [r for r in rows if r[1] not in OK_STATUS[kind]]
        failures += bad
        by_kind[kind] = {
            "count": len(rows),
            "statuses": {str(k): v for k, v in sorted(Counter(r[1] for r in rows).items())},
            "failed": len(bad),
            "ms": latency_stats([r[3] for r in rows if r[1]]),
        }
    claims = [r for r in seen.requests if r[0] == "claim" and r[1] == 200]
    by_kind["claim"]["leased_ms"] = latency_stats([r[3] for r in claims])
    for kind in ("claim", "result"):
        later = [r[3] for r in seen.requests if r[0] == kind and r[1] and r[2] >= warm]
        by_kind[kind]["after_warmup_ms"] = latency_stats(later)
    window = seen.stopped - seen.started
    in_window = [
        r
        for r in seen.requests
        if r[0] == "result" and r[1] == 200 and r[2] + r[3] / 1000 <= seen.stopped
    ]
    return {
        "store": store,
        "workers": workers,
        "agents": load.agents,
        "generators": load.generators,
        "stopped_by": seen.stopped_by,
        "window_s": round(window, 2),
        "drain_s": round(seen.ended - seen.stopped, 2),
        "results_per_s": round(len(in_window) / window, 2) if window > 0 else None,
        "requests": by_kind,
        "failed_requests": len(failures) + len(seen.monitor_errors),
        "failure_examples": [failure(r) for r in failures[:20]]
        + [{"kind": "monitor", "error": e} for e in seen.monitor_errors[:5]],
        "exactly_once": once,
        "server_log": log,
        "cpu": seen.cpu,
    }


def failure(request: tuple) -> dict:
    kind, status, _, ms, error = request
    return {"kind": kind, "status": status, "ms": round(ms, 1), "error": error}


def healthy(scenario: dict) -> bool:
    log = scenario["server_log"]
    return (
        scenario["failed_requests"] == 0
        and scenario["exactly_once"]["ok"]
        and log["http_5xx"] == 0
        and log["error_lines"] == 0
        and not any(log["patterns"].values())
    )


# -- the command --------------------------------------------------------------------------------
def run(load: Load, scenarios: list[tuple[str, int]], workdir: Path, cluster=None) -> dict:  # noqa: ANN001 - a tests/pg.py Cluster
    """Every scenario in turn; `cluster` is needed for PostgreSQL ones."""
    results, before = [], machine()
    for store, workers in scenarios:
        print(f"{store}, {workers} server process(es), {load.agents} agents ...", flush=True)
        results.append(run_scenario(load, store, workers, workdir, cluster))
        print_table(results[-1:])
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": before,
        "load": dataclasses.asdict(load),
        "scenarios": results,
        "ok": all(healthy(s) for s in results),
    }


def machine() -> dict:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    models = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return {
        "nproc": os.cpu_count(),
        "cpu": models[0] if models else platform.processor(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg_before": [round(v, 2) for v in os.getloadavg()],
    }


def commit() -> str | None:
    """HEAD, marked `+dirty` when the working tree differs (the numbers belong to the tree)."""
    git = ["git", "-C", str(ROOT)]
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        head = subprocess.check_output([*git, "rev-parse", "--short", "HEAD"], text=True)
        dirty = subprocess.run([*git, "diff", "--quiet", "HEAD"], check=False).returncode
        return head.strip() + ("+dirty" if dirty else "")
    return None


def print_table(scenarios: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="load: latency in ms (client side, loopback)")
    columns = ("store", "procs", "results", "results/s", "claim p50", "p90", "p99", "max")
    columns += (f"p99 after {WARMUP_S:g} s", "result p50", "p99", "max", "204s", "failed")
    columns += ("log", "exactly-once")
    for column in columns:
        table.add_column(column, justify="left" if column == "store" else "right")
    for s in scenarios:
        claim, result = s["requests"]["claim"], s["requests"]["result"]
        c, r = claim["ms"], result["ms"]
        log = s["server_log"]
        findings = sum(log["patterns"].values()) + log["error_lines"] + log["http_5xx"]
        table.add_row(
            s["store"],
            str(s["workers"]),
            str(s["exactly_once"]["accepted"]),
            f"{s['results_per_s']:.1f}",
            *(fmt(c.get(k)) for k in ("p50", "p90", "p99", "max")),
            fmt(claim["after_warmup_ms"].get("p99")),
            *(fmt(r.get(k)) for k in ("p50", "p99", "max")),
            str(claim["statuses"].get("204", 0)),
            str(s["failed_requests"]),
            str(findings),
            "ok" if s["exactly_once"]["ok"] else "VIOLATED",
        )
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def scenarios_from(stores: str, workers: str) -> list[tuple[str, int]]:
    return [(s, int(w)) for s in stores.split(",") for w in workers.split(",")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=Load.agents)
    parser.add_argument("--duration", type=float, default=Load.duration_s, help="seconds")
    parser.add_argument("--results", type=int, help="stop once the searches have this many")
    parser.add_argument("--stores", default="sqlite,postgresql", help="sqlite, postgresql")
    parser.add_argument("--workers", default="1,4", help="server processes, each store")
    parser.add_argument("--generators", type=int, default=Load.generators)
    parser.add_argument("--searches", type=int, default=Load.searches)
    parser.add_argument("--budget", type=int, default=Load.budget, help="per search")
    parser.add_argument("--think-s", type=float, default=Load.think_s)
    parser.add_argument("--idle-s", type=float, default=Load.idle_s, help="wait after a 204")
    parser.add_argument("--keepalive-s", type=float, default=Load.keepalive_s)
    parser.add_argument("--space", type=json.loads, help="the searches' space, as JSON")
    parser.add_argument("--workdir", type=Path, help="keep databases and logs here")
    parser.add_argument("--json-out", type=Path, default=HERE / "results" / "load.json")
    args = parser.parse_args(argv)
    load = Load(
        agents=args.agents,
        generators=args.generators,
        duration_s=args.duration,
        results=args.results,
        searches=args.searches,
        budget=args.budget,
        think_s=args.think_s,
        idle_s=args.idle_s,
        keepalive_s=args.keepalive_s,
        space=args.space,
    )
    scenarios = scenarios_from(args.stores, args.workers)
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        workdir.mkdir(parents=True, exist_ok=True)
        cluster = None
        if any(store == "postgresql" for store, _ in scenarios):
            cluster = load_pg().start()
            stack.callback(cluster.stop)
        result = run(load, scenarios, workdir, cluster)
    argv_used = sys.argv[1:] if argv is None else list(argv)
    result["command"] = shlex.join(["python", "-m", "bench.load", *argv_used])
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=1) + "\n")
    print_table(result["scenarios"])
    print(f"wrote {args.json_out}; {'all checks passed' if result['ok'] else 'CHECKS FAILED'}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
