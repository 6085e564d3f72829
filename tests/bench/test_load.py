"""bench/load.py: its checks (bench/load_checks.py) catch what they are for (fabricated
answers and logs), and a small real run (50 agents against a real server on SQLite, and on
PostgreSQL with 1 and 4 server processes) has no failed request, a clean server log and
every result counted exactly once, with latencies reported. No timing is asserted."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bench import load
from bench.load_agents import Load
from bench.load_checks import Seen, latency_stats, net_of_work_wait, scan_log, verify

SMALL = Load(agents=50, duration_s=8, searches=2, budget=400, think_s=0.5, idle_s=0.5, timeout_s=30)
SCENARIOS = [("sqlite", 1), ("postgresql", 1), ("postgresql", 4)]


# -- the checks, on fabricated answers ----------------------------------------------------------
def api(candidates: list[dict], jobs_done: dict[str, int]) -> httpx.Client:
    """A client whose server answers the two reads `verify` makes."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/agents":
            agents = [{"agent_id": a, "jobs_done": n} for a, n in jobs_done.items()]
            return httpx.Response(200, json=agents)
        assert request.url.path == "/api/v1/searches/1/candidates"
        return httpx.Response(200, json=candidates)

    return httpx.Client(base_url="http://load.test", transport=httpx.MockTransport(answer))


def measured(arch: str, agent: str, measurement_id: int, measurements: int = 1) -> dict:
    m = {"agent_id": agent, "measurement_id": measurement_id}
    return {
        "arch_id": arch,
        "status": "measured",
        "reused": False,
        "measurement": m,
        "measurements": measurements,
    }


def accepted(*rows: tuple[str, str]) -> Seen:
    """Results accepted for new jobs, one job each (ids in order)."""
    return Seen(accepted=[(1, arch, i, agent, False) for i, (arch, agent) in enumerate(rows)])


def test_a_re_measurement_is_a_job_of_its_own_and_counts() -> None:
    """A search at its budget re-measures frontier points: a later job for the same
    architecture, whose result the candidate counts among its measurements."""
    with api([measured("a", "x", 1, measurements=2)], {"x": 1, "y": 1}) as http:
        checks = verify(http, [1], accepted(("a", "x"), ("a", "y")))
    assert checks["ok"], checks
    assert checks["remeasurements"] == 1 and checks["accepted"] == checks["jobs_done"] == 2
    # The candidate carries the first job's measurement, not the re-measurement's.
    with api([measured("a", "y", 1, measurements=2)], {"x": 1, "y": 1}) as http:
        assert verify(http, [1], accepted(("a", "x"), ("a", "y")))["lost"] == 1
    # A re-measurement accepted that the candidate does not count.
    with api([measured("a", "x", 1)], {"x": 1, "y": 1}) as http:
        checks = verify(http, [1], accepted(("a", "x"), ("a", "y")))
    assert checks["remeasurements_uncounted"] == 1 and not checks["ok"]


def test_verify_accepts_a_consistent_run() -> None:
    candidates = [measured("a", "x", 1), measured("b", "y", 2)]
    queued = {"arch_id": "c", "status": "queued", "reused": False, "measurement": None}
    with api([*candidates, queued], {"x": 1, "y": 1}) as http:
        checks = verify(http, [1], accepted(("a", "x"), ("b", "y")))
    assert checks["ok"], checks
    assert checks["accepted"] == checks["measured"] == checks["jobs_done"] == 2


@pytest.mark.parametrize(
    ("candidates", "jobs_done", "seen", "violated"),
    [
        # one job accepted twice (as new, not as a duplicate)
        (
            [measured("a", "x", 1)],
            {"x": 2},
            Seen(accepted=[(1, "a", 7, "x", False), (1, "a", 7, "x", False)]),
            "accepted_twice",
        ),
        # accepted, but the candidate carries another agent's measurement
        ([measured("a", "y", 1)], {"x": 1, "y": 0}, accepted(("a", "x")), "lost"),
        # measured, but no agent was told its result was accepted
        (
            [measured("a", "x", 1), measured("b", "x", 2)],
            {"x": 2},
            accepted(("a", "x")),
            "unaccounted",
        ),
        # the agent's jobs_done disagrees with what it was told
        ([measured("a", "x", 1)], {"x": 2}, accepted(("a", "x")), "agents_mismatched"),
        # one measurement serving two candidates
        (
            [measured("a", "x", 1), measured("b", "x", 1)],
            {"x": 2},
            accepted(("a", "x"), ("b", "x")),
            "measurement_ids_repeated",
        ),
    ],
)
def test_verify_catches(
    candidates: list[dict], jobs_done: dict[str, int], seen: Seen, violated: str
) -> None:
    with api(candidates, jobs_done) as http:
        checks = verify(http, [1], seen)
    assert checks[violated] > 0
    assert not checks["ok"]


def test_a_job_left_running_is_a_violation() -> None:
    running = {"arch_id": "a", "status": "running", "reused": False, "measurement": None}
    with api([running], {"x": 0}) as http:
        checks = verify(http, [1], Seen())
    assert checks["left_running"] == 1 and not checks["ok"]


def request(route: str, status: int) -> dict:
    """The server's JSON request-log line for a POST to `route` answered `status`."""
    fields = {"method": "POST", "route": route, "status": status, "duration_ms": 3.0}
    return {"level": "info", "event": "http.request", **fields}


def test_scan_log_finds_locks_deadlocks_5xx_and_tracebacks(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    entries = [
        request("/api/v1/agents/{agent_id}/claim", 200),
        request("/api/v1/jobs/{job_id}/result", 500),
        {
            "level": "error",
            "message": "Exception in ASGI application",
            "exc_info": "Traceback (most recent call last):\n"
            "sqlite3.OperationalError: database is locked",
        },
        {"level": "info", "event": "lease.expired", "requeued": 1},
    ]
    lines = [json.dumps(e) for e in entries]
    lines.append("psycopg.errors.DeadlockDetected: deadlock detected")
    log.write_text("\n".join(lines) + "\n")
    found = scan_log(log)
    assert found["patterns"]["database is locked"] == 1
    assert found["patterns"]["OperationalError"] == 1
    assert found["patterns"]["deadlock"] == 1
    assert found["patterns"]["traceback"] == 1
    assert found["http_5xx"] == 1 and found["error_lines"] == 1
    assert found["events"] == {"lease.expired": 1}
    assert found["server_ms"]["claim"]["n"] == found["server_ms"]["result"]["n"] == 1
    assert len(found["excerpt"]) == 3


def test_percentiles_interpolate_between_ranks() -> None:
    stats = latency_stats([float(v) for v in range(1, 101)])
    assert stats["n"] == 100 and stats["max"] == 100
    assert stats["p50"] == 50.5 and stats["p99"] == pytest.approx(99.01)


def test_rounded_percentiles_never_exceed_the_largest_value() -> None:
    # Three parts' times as bench/part_insert once saw them: p90 rounded up past the max.
    stats = latency_stats([0.2301, 0.2383, 0.238387])
    assert stats["p50"] <= stats["p90"] <= stats["p99"] <= stats["max"] == 0.238387


def test_a_claims_wait_for_work_is_not_its_latency() -> None:
    # Sent at 100 s, answered 2.5 s later; its job was queued at 102.4 s: 100 ms its own.
    assert net_of_work_wait(100.0, 2500.0, 102.4) == pytest.approx(100.0)
    # A job queued before the claim was sent: the whole latency.
    assert net_of_work_wait(100.0, 40.0, 90.0) == pytest.approx(40.0)
    assert net_of_work_wait(100.0, 40.0, None) == 40.0
    # Clocks read a little apart never make it negative.
    assert net_of_work_wait(100.0, 40.0, 100.05) == 0.0
    # At real epochs, adding ms to `began` and taking it away again rounded above ms (CI, 5041435).
    began = 1_764_300_000.123456
    for ms in (655.5527550008264, 0.1, 3.3, 1234.567891):
        assert net_of_work_wait(began, ms, began - 1.0) == ms
        assert net_of_work_wait(began, ms, began + 1e-7) <= ms


def _collect(folder: Path | None, cwd: Path) -> None:
    """A Python process in `cwd` with bench/gc_trace on its path, told to trace into `folder`
    (None: not told): one full collection, one of generation 1, and no others (collection by
    allocation is off)."""
    env = {k: v for k, v in os.environ.items() if k != "HWNAS_GC_TRACE"}
    env["PYTHONPATH"] = str(load.GC_TRACE)
    if folder is not None:
        env["HWNAS_GC_TRACE"] = str(folder)
    code = "import gc; gc.disable(); gc.collect(); gc.collect(1)"
    subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, check=True)


def test_full_collections_of_a_process_told_to_are_timed(tmp_path: Path) -> None:
    traced, untold = tmp_path / "traced", tmp_path / "untold"
    traced.mkdir()
    untold.mkdir()
    _collect(traced, cwd=untold)
    (log,) = traced.glob("gc-*.log")
    lines = log.read_text().splitlines()
    assert len(lines) == 1, lines  # the full collection, not generation 1's
    ended, ms = map(float, lines[0].split())
    assert ended > 1e9 and ms >= 0
    _collect(None, cwd=untold)  # not told: nothing written, in its folder or anywhere else
    assert list(untold.iterdir()) == [] and list(traced.iterdir()) == [log]


def test_full_collections_are_read_with_those_after_the_warm_up_apart(tmp_path: Path) -> None:
    (tmp_path / "gc-1.log").write_text("100.0 12.5\n110.0 80.0\n")
    (tmp_path / "gc-2.log").write_text("120.0 3.0\n")
    read = load.full_collections(tmp_path, warm=105.0)
    assert read["ms"]["n"] == 3 and read["ms"]["max"] == 80.0
    assert read["after_warmup_ms"]["n"] == 2 and read["after_warmup_ms"]["max"] == 80.0
    assert read["after_warmup_over_50_ms"] == 1


# -- a small real run -------------------------------------------------------------------------
@pytest.fixture(scope="module", params=SCENARIOS, ids=[f"{s}-w{w}" for s, w in SCENARIOS])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    store, workers = request.param
    cluster = request.getfixturevalue("postgres_cluster") if store == "postgresql" else None
    workdir = tmp_path_factory.mktemp(f"load-{store}-{workers}")
    return load.run_scenario(SMALL, store, workers, workdir, cluster)


@pytest.mark.slow
def test_no_request_fails(run: dict) -> None:
    assert run["failed_requests"] == 0, run["failure_examples"]
    requests = run["requests"]
    assert requests["register"]["statuses"] == {"201": SMALL.agents}
    assert set(requests["claim"]["statuses"]) <= {"200", "204"}
    assert requests["claim"]["statuses"]["200"] > 0
    assert set(requests["result"]["statuses"]) == {"200"}


@pytest.mark.slow
def test_the_server_log_is_clean(run: dict) -> None:
    log = run["server_log"]
    assert log["patterns"]["database is locked"] == 0, log["excerpt"]
    assert not any(log["patterns"].values()), log["excerpt"]
    assert log["error_lines"] == log["http_5xx"] == 0, log["excerpt"]
    assert log["events"]["job.result"] == run["exactly_once"]["accepted"]


@pytest.mark.slow
def test_every_result_is_counted_exactly_once(run: dict) -> None:
    once = run["exactly_once"]
    assert once["ok"], once
    assert once["accepted"] == once["measured"] == once["jobs_done"] > 0
    assert once["left_running"] == 0


@pytest.mark.slow
def test_latencies_are_reported(run: dict) -> None:
    assert run["results_per_s"] > 0
    for kind in ("claim", "result"):
        for side in (run["requests"][kind]["ms"], run["server_log"]["server_ms"][kind]):
            figures = [side[k] for k in ("p50", "p90", "p99", "max")]
            assert side["n"] > 0
            assert all(math.isfinite(v) and v >= 0 for v in figures)
            assert figures == sorted(figures)
    claim = run["requests"]["claim"]
    assert claim["net_of_wait_ms"]["n"] == claim["statuses"]["200"]
    assert claim["net_of_wait_ms"]["max"] <= claim["leased_ms"]["max"]
    assert run["cpu"]["server_s"] > 0 and run["cpu"]["generators_s"] > 0
    assert run["full_collections"]["ms"]["n"] > 0  # at least the server's start has some
    assert run["server_peak_rss_mb"] > 10
    per = run["server_cpu_ms"]
    results = run["exactly_once"]["accepted"]
    assert per["per_result"] == pytest.approx(1000 * run["cpu"]["server_s"] / results, abs=0.01)
    assert 0 < per["per_request"] < per["per_result"]  # a result comes with at least its claim
    if run["store"] == "postgresql":
        assert run["cpu"]["postgres_s"] > 0
