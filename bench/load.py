"""Load: N simulated agents claiming and reporting concurrently against one real server.

Per scenario (a store and a number of server processes) a fresh `hwnas serve` (SQLite file, or
a database of its own on a throwaway PostgreSQL cluster, hwnas.testing.postgres),
authentication on as deployed, its log in JSON. A user starts `--searches` searches (LTS, or
`--strategy`); then `--generators` load-generating processes (asyncio + httpx, a pool of one
connection per agent) run the agents, each registering with the enrollment token and looping
claim -> think (a sleep of `--think-s`, 0.5x to 1.5x) -> report a synthetic measurement; on 204
it waits `--idle-s`. The run stops after `--duration` seconds, at `--results` results or when
every search has finished; an agent holding a lease still reports it. Every request's latency
and status is recorded; a failure is a transport error or any status but 2xx (204 only on
claims). Then exactly-once is checked over the API (every accepted result is one measured
candidate with that agent's measurement, and nothing else is; agents' jobs_done add up), and
the server's log is searched for "database is locked", OperationalError, deadlocks and
tracebacks.

    .venv/bin/python -m bench.load [--agents 200] [--duration 60] [--results N]
        [--stores sqlite,postgresql] [--workers 1,4] [--think-s 1] [--space JSON]
        [--strategy lts|hwnas|nsga2] [--server-pythonpath PATH]
        [--json-out bench/results/load.json]

The server's full garbage collections are timed (bench/gc_trace) and reported with the
requests: every request of a process waits out such a pause. `--server-pythonpath` serves the
code that path finds (a worktree of the commit before a change), the rest of the bench
unchanged: the same load and the same checks on both.

Exits 1 when any scenario had a failure, a log finding or an exactly-once violation.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import multiprocessing
import os
import shlex
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench.load_agents import REPORT_TRIES, Load, generate
from bench.load_checks import (
    KINDS,
    Seen,
    healthy,
    latency_stats,
    net_of_work_wait,
    scan_log,
    verify,
)
from bench.machine import commit, machine, machine_busy, tree_cpu_s, tree_peak_rss_mb
from hwnas.testing import postgres
from hwnas.testing.servers import serve

HERE = Path(__file__).resolve().parent
GC_TRACE = HERE / "gc_trace"
# 200 agents registering and claiming at once is a burst of its own; percentiles are also
# given over the requests that started this long after the agents did.
WARMUP_S = 10.0


# -- one scenario -----------------------------------------------------------------------------
def run_scenario(
    load: Load,
    store: str,
    workers: int,
    workdir: Path,
    cluster: postgres.Cluster | None = None,
    server_path: str | None = None,
) -> dict:
    """One fresh server over a fresh database, the searches, the agents, the checks; the
    server runs the code `server_path` finds, when given."""
    name = f"{store}-w{workers}"
    database = f"load_{store}_w{workers}_{os.getpid()}"
    if store == "sqlite":
        db = str(workdir / f"{name}.db")
        for leftover in (db, f"{db}-wal", f"{db}-shm"):  # a fresh database, as on PostgreSQL
            Path(leftover).unlink(missing_ok=True)
    else:
        db = cluster.create_database(database)
    args = ["--workers", str(workers), "--log-format", "json"]
    collections = workdir / f"{name}-gc"
    env = _server_env(collections, server_path)
    try:
        with (
            serve(
                workdir, db, *args, name=name, lease_seconds=load.lease_seconds, env=env
            ) as server,
            server.client(timeout=120) as http,
        ):
            search_ids = [start_search(http, load.search_request(i)) for i in range(load.searches)]
            pids = (server.proc.pid, cluster.pid if store == "postgresql" else None)
            seen = drive(load, server.url, server.procs.agent_token, http, workdir / name, pids)
            once = verify(http, search_ids, seen)
            peak_rss_mb = tree_peak_rss_mb(server.proc.pid)
    finally:
        if store == "postgresql":
            cluster.drop_database(database)
    scenario = summarise(load, store, workers, seen, once, scan_log(workdir / f"{name}.log"))
    scenario["full_collections"] = full_collections(collections, seen.started + WARMUP_S)
    scenario["server_peak_rss_mb"] = peak_rss_mb
    return scenario


def _server_env(collections: Path, server_path: str | None) -> dict[str, str]:
    """The server's environment: its full collections timed into the folder `collections`
    (bench/gc_trace), its code found on `server_path` first when given."""
    collections.mkdir(parents=True, exist_ok=True)
    for old in collections.glob("gc-*.log"):
        old.unlink()
    path = [str(GC_TRACE), *([server_path] if server_path else [])]
    if os.environ.get("PYTHONPATH"):
        path.append(os.environ["PYTHONPATH"])
    env = {"PYTHONPATH": os.pathsep.join(path), "HWNAS_GC_TRACE": str(collections)}
    if server_path:  # `python -m hwnas` would put the working directory (this checkout) first
        env["PYTHONSAFEPATH"] = "1"
    return env


def full_collections(folder: Path, warm: float) -> dict:
    """The server processes' full collections (bench/gc_trace's logs): how many, their pauses
    in ms, and those after the warm-up (`warm`, unix seconds) apart."""
    pauses = []
    for log in folder.glob("gc-*.log"):
        for line in log.read_text().splitlines():
            ended, ms = line.split()
            pauses.append((float(ended), float(ms)))
    later = [ms for ended, ms in pauses if ended >= warm]
    return {
        "ms": latency_stats([ms for _, ms in pauses]),
        "after_warmup_ms": latency_stats(later),
        "after_warmup_over_50_ms": sum(ms > 50 for ms in later),
    }


def start_search(http: httpx.Client, request: dict) -> int:
    reply = http.post("/api/v1/searches", json=request)
    if reply.status_code != 201:
        raise RuntimeError(f"POST /api/v1/searches: {reply.status_code} {reply.text}")
    return reply.json()["id"]


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
        seen.claim_leases += part["claim_leases"]
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
        if searches and all(s["status"] != "running" for s in searches):
            return "searches finished"  # (with --searches 0, an idle fleet, for the duration)
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


# -- the summary ----------------------------------------------------------------------------------
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
    # A claim that waits for work is answered when a job comes: its latency net of that wait.
    net = [(b, net_of_work_wait(b, ms, queued)) for b, ms, queued in seen.claim_leases]
    by_kind["claim"]["net_of_wait_ms"] = latency_stats([ms for _, ms in net])
    by_kind["claim"]["net_of_wait_after_warmup_ms"] = latency_stats(
        [ms for began, ms in net if began >= warm]
    )
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
        "server_cpu_ms": _cpu_per(seen.cpu, once["accepted"], len(seen.requests)),
    }


def _cpu_per(cpu: dict, results: int, requests: int) -> dict:
    """The server's CPU (its processes, PostgreSQL's apart) per accepted result and per
    request of any kind, in ms."""
    server = cpu.get("server_s", 0.0)
    return {
        "per_result": round(1000 * server / results, 2) if results else None,
        "per_request": round(1000 * server / requests, 2) if requests else None,
        "postgres_per_result": round(1000 * cpu.get("postgres_s", 0.0) / results, 2)
        if results
        else None,
    }


def failure(request: tuple) -> dict:
    kind, status, _, ms, error = request
    return {"kind": kind, "status": status, "ms": round(ms, 1), "error": error}


# -- the command --------------------------------------------------------------------------------
def run(
    load: Load,
    scenarios: list[tuple[str, int]],
    workdir: Path,
    cluster: postgres.Cluster | None = None,
    server_path: str | None = None,
) -> dict:
    """Every scenario in turn; `cluster` is needed for PostgreSQL ones."""
    results = []
    before = {**machine(), "loadavg_before": [round(v, 2) for v in os.getloadavg()]}
    for store, workers in scenarios:
        print(f"{store}, {workers} server process(es), {load.agents} agents ...", flush=True)
        results.append(run_scenario(load, store, workers, workdir, cluster, server_path))
        print_table(results[-1:])
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "machine": before,
        "server_pythonpath": server_path,
        "load": dataclasses.asdict(load),
        "scenarios": results,
        "ok": all(healthy(s) for s in results),
    }


def print_table(scenarios: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="load: latency in ms (client side, loopback)")
    columns = ("store", "procs", "results", "results/s", "claim p50", "p90", "p99", "max")
    columns += (f"p99 after {WARMUP_S:g} s", "p99 net of wait")
    columns += ("result p50", "p99", "max", "204s", "failed")
    columns += ("server CPU ms per result", f"full GC max after {WARMUP_S:g} s")
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
            fmt(claim["net_of_wait_ms"].get("p99")),
            *(fmt(r.get(k)) for k in ("p50", "p99", "max")),
            str(claim["statuses"].get("204", 0)),
            str(s["failed_requests"]),
            fmt(s["server_cpu_ms"]["per_result"]),
            fmt(s["full_collections"]["after_warmup_ms"].get("max")),
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
    parser.add_argument(
        "--claim-next",
        action="store_true",
        help="each result also claims the agent's next job, as `hwnas agent` does",
    )
    parser.add_argument(
        "--claim-wait-s",
        type=float,
        default=Load.claim_wait_s,
        help="claims wait up to this long for work (claim?wait=) instead of polling",
    )
    parser.add_argument("--keepalive-s", type=float, default=Load.keepalive_s)
    parser.add_argument("--space", type=json.loads, help="the searches' space, as JSON")
    parser.add_argument("--strategy", default=Load.strategy, choices=["lts", "hwnas", "nsga2"])
    parser.add_argument("--workdir", type=Path, help="keep databases and logs here")
    parser.add_argument(
        "--server-pythonpath", help="serve the code this path finds (a worktree of a commit)"
    )
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
        claim_next=args.claim_next,
        claim_wait_s=args.claim_wait_s,
        keepalive_s=args.keepalive_s,
        space=args.space,
        strategy=args.strategy,
    )
    scenarios = scenarios_from(args.stores, args.workers)
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        workdir.mkdir(parents=True, exist_ok=True)
        cluster = None
        if any(store == "postgresql" for store, _ in scenarios):
            cluster = postgres.start()
            stack.callback(cluster.stop)
        result = run(load, scenarios, workdir, cluster, args.server_pythonpath)
    argv_used = sys.argv[1:] if argv is None else list(argv)
    result["command"] = shlex.join(["python", "-m", "bench.load", *argv_used])
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=1) + "\n")
    print_table(result["scenarios"])
    print(f"wrote {args.json_out}; {'all checks passed' if result['ok'] else 'CHECKS FAILED'}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
