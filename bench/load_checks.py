"""bench/load.py's checks: exactly-once over the API, the server's log searched for trouble,
and latency percentiles. Pure functions of what the run saw (`Seen`), testable on fabricated
answers (tests/bench/test_load.py)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import Counter
from pathlib import Path

import httpx

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
KINDS = ("register", "claim", "result")


@dataclasses.dataclass
class Seen:
    """What the generators saw, merged, and how the run went."""

    requests: list = dataclasses.field(default_factory=list)
    accepted: list = dataclasses.field(default_factory=list)
    leases: list = dataclasses.field(default_factory=list)
    claim_leases: list = dataclasses.field(default_factory=list)  # (began, ms, queued)
    generator_cpu_s: float = 0.0
    monitor_errors: list = dataclasses.field(default_factory=list)
    started: float = 0.0  # when the agents started (time.time())
    stopped: float = 0.0  # when they were told to stop
    ended: float = 0.0  # when the last generator had finished
    stopped_by: str = ""
    cpu: dict = dataclasses.field(default_factory=dict)


def verify(http: httpx.Client, search_ids: list[int], seen: Seen) -> dict:
    """Exactly-once over the API: each accepted result is one job's, no job's result was
    accepted twice, each measured candidate carries the measurement of the first accepted
    result for its architecture (a search that reached its budget re-measures frontier
    points: jobs of their own, later, for the same architecture, and the candidate counts
    their quiet measurements), no measured candidate lacks an accepted result, jobs_done
    agree."""
    measured, statuses, counted = {}, Counter(), {}
    for sid in search_ids:
        for cand in http.get(f"/api/v1/searches/{sid}/candidates").raise_for_status().json():
            statuses[cand["status"]] += 1
            if cand["status"] == "measured" and not cand["reused"]:
                m = cand["measurement"]
                measured[(sid, cand["arch_id"])] = (m["agent_id"], m["measurement_id"])
                counted[(sid, cand["arch_id"])] = cand["measurements"]
    jobs_done = {a["agent_id"]: a["jobs_done"] for a in http.get("/api/v1/agents").json()}
    new = [(s, a, job, agent) for s, a, job, agent, duplicate in seen.accepted if not duplicate]
    per_job = Counter(job for _, _, job, _ in new)
    per_agent = Counter(agent for *_, agent in new)
    by_arch: dict[tuple, list[tuple[int, str]]] = {}
    for s, a, job, agent in new:
        by_arch.setdefault((s, a), []).append((job, agent))
    # An architecture's first job is its candidate; later ones are re-measurements of it.
    first = {key: min(jobs)[1] for key, jobs in by_arch.items()}
    remeasured = {key: len(jobs) - 1 for key, jobs in by_arch.items() if len(jobs) > 1}
    ids = [mid for _, mid in measured.values()]
    checks = {
        "accepted": len(new),
        "duplicate_answers": len(seen.accepted) - len(new),
        "measured": len(measured),
        "remeasurements": sum(remeasured.values()),
        "jobs_done": sum(jobs_done.values()),
        "accepted_twice": sum(1 for n in per_job.values() if n > 1),
        "lost": sum(1 for key, agent in first.items() if measured.get(key, (None,))[0] != agent),
        "unaccounted": sum(1 for key in measured if key not in by_arch),
        # Every synthetic measurement is quiet, so each one accepted is counted.
        "remeasurements_uncounted": sum(
            1 for key, n in remeasured.items() if counted.get(key) != n + 1
        ),
        "agents_mismatched": sum(1 for a, n in jobs_done.items() if n != per_agent.get(a, 0)),
        "measurement_ids_repeated": len(ids) - len(set(ids)),
        "leased_twice": sum(1 for n in Counter(seen.leases).values() if n > 1),
        "left_running": statuses["running"],
        "statuses": dict(statuses),
    }
    zero = ("accepted_twice", "lost", "unaccounted", "agents_mismatched")
    zero += ("measurement_ids_repeated", "left_running", "duplicate_answers")
    zero += ("remeasurements_uncounted",)
    counts = {checks["accepted"], checks["measured"] + checks["remeasurements"]}
    counts.add(checks["jobs_done"])
    checks["ok"] = len(counts) == 1 and not any(checks[k] for k in zero)
    return checks


def _shortened(line: str, head: int = 1000, tail: int = 6000) -> str:
    """A log line short enough to keep: its start, and its end, where a traceback names
    the frame that raised."""
    if len(line) <= head + tail:
        return line
    return f"{line[:head]} [...] {line[-tail:]}"


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
                excerpt.append(_shortened(line))
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


def net_of_work_wait(began: float, ms: float, queued: float | None) -> float:
    """A leasing claim's latency in ms, less any time it waited for its job to be queued:
    from when it was sent or its job queued, whichever came later, to its answer (`began`,
    `queued`: time.time(); `queued` None: the whole latency)."""
    if queued is None or queued <= began:
        return ms
    # Subtract the wait from ms rather than re-adding epochs, so the result never rounds above ms.
    return max(0.0, ms - (queued - began) * 1000)


def latency_stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    stats = {f"p{round(q * 100)}": percentile(ordered, q) for q in (0.5, 0.9, 0.99)}
    # Rounded to 0.01 ms, but never above the largest value (0.2384 is not "0.24" there).
    rounded = {k: min(round(v, 2), ordered[-1]) for k, v in stats.items()}
    return {"n": len(ordered), **rounded, "max": ordered[-1]}


def healthy(scenario: dict) -> bool:
    log = scenario["server_log"]
    return (
        scenario["failed_requests"] == 0
        and scenario["exactly_once"]["ok"]
        and log["http_5xx"] == 0
        and log["error_lines"] == 0
        and not any(log["patterns"].values())
    )
