"""/metrics reads the queue and the fleet from the database; /healthz checks the database."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import play_agent, register, search_request, synthetic_measurement


def scrape(client) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} from one GET /metrics."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def queued(client, search_id: int) -> int:
    url = f"/api/v1/searches/{search_id}/candidates"
    return len(client.get(url, params={"status": "queued"}).json())


def claim(client, agent_id: str) -> dict:
    response = client.post(f"/api/v1/agents/{agent_id}/claim")
    assert response.status_code == 200, response.text
    return response.json()


def test_queue_depth_and_running_jobs_follow_claims(client):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    depth = queued(client, search_id)
    assert depth > 1
    samples = scrape(client)
    assert value(samples, "hwnas_queue_depth", device_class="test-cpu") == depth
    assert value(samples, "hwnas_jobs_running", device_class="test-cpu") == 0
    assert value(samples, "hwnas_searches", status="running") == 1
    agent = register(client)
    claim(client, agent)
    claim(client, agent)
    samples = scrape(client)
    assert value(samples, "hwnas_queue_depth", device_class="test-cpu") == depth - 2
    assert value(samples, "hwnas_jobs_running", device_class="test-cpu") == 2


def test_agents_online_drop_after_a_lease_period_of_silence(client, clock):
    register(client)
    register(client)
    register(client, device_class="pi5")
    samples = scrape(client)
    assert value(samples, "hwnas_agents_online", device_class="test-cpu") == 2
    assert value(samples, "hwnas_agents_online", device_class="pi5") == 1
    assert value(samples, "hwnas_agents_registered", device_class="test-cpu") == 2
    clock.advance(30 + 1)  # the client fixture's lease_seconds is 30
    samples = scrape(client)
    assert value(samples, "hwnas_agents_online", device_class="test-cpu") == 0
    assert value(samples, "hwnas_agents_registered", device_class="test-cpu") == 2


def test_measurements_per_minute_counts_recent_results_only(client, clock):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    done = play_agent(client, register(client))
    info = client.get(f"/api/v1/searches/{search_id}").json()
    assert info["status"] == "finished" and done == 12
    samples = scrape(client)
    assert value(samples, "hwnas_measurements_per_minute", device_class="test-cpu") == done
    measured = value(samples, "hwnas_measurements_total", device_class="test-cpu", reused="false")
    assert measured == done
    assert value(samples, "hwnas_searches", status="finished") == 1
    clock.advance(61)
    samples = scrape(client)
    assert value(samples, "hwnas_measurements_per_minute", device_class="test-cpu") == 0
    measured = value(samples, "hwnas_measurements_total", device_class="test-cpu", reused="false")
    assert measured == done  # a counter: the window moved, the total did not


def test_cache_hits_are_counted_as_reused_not_as_measured_this_minute(client):
    client.post("/api/v1/searches", json=search_request())
    done = play_agent(client, register(client))
    client.post("/api/v1/searches", json=search_request())  # same space and seed: cached
    samples = scrape(client)
    assert value(samples, "hwnas_measurements_total", device_class="test-cpu", reused="true") > 0
    assert value(samples, "hwnas_measurements_per_minute", device_class="test-cpu") == done


def test_failures_are_counted_by_kind(client):
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    for kind in ("out_of_memory", "out_of_memory", "timeout"):
        lease = claim(client, agent)
        failure = {"agent_id": agent, "lease_id": lease["lease_id"], "failure": {"kind": kind}}
        assert (
            client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=failure).status_code == 200
        )
    lease = claim(client, agent)
    good = {
        "agent_id": agent,
        "lease_id": lease["lease_id"],
        "measurement": synthetic_measurement(lease["spec"]),
    }
    assert client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=good).status_code == 200
    samples = scrape(client)
    name = "hwnas_measurement_failures_total"
    assert value(samples, name, device_class="test-cpu", kind="out_of_memory") == 2
    assert value(samples, name, device_class="test-cpu", kind="timeout") == 1
    assert value(samples, "hwnas_measurements_total", device_class="test-cpu", reused="false") == 1


def test_http_requests_are_labelled_by_route_template_not_path(client):
    ids = [
        client.post("/api/v1/searches", json=search_request(seed=s)).json()["id"] for s in (1, 2)
    ]
    for search_id in ids:
        assert client.get(f"/api/v1/searches/{search_id}").status_code == 200
    assert client.get("/api/v1/searches/999").status_code == 404
    assert client.get("/no/such/page").status_code == 404
    samples = scrape(client)
    route = "/api/v1/searches/{search_id}"
    total = "hwnas_http_requests_total"
    assert value(samples, total, method="GET", route=route, status="200") == 2
    assert value(samples, total, method="GET", route=route, status="404") == 1
    assert value(samples, total, method="POST", route="/api/v1/searches", status="201") == 2
    assert value(samples, total, method="GET", route="unmatched", status="404") == 1
    assert not any(f"/{i}" in dict(labels).get("route", "") for _, labels in samples for i in ids)
    count = "hwnas_http_request_duration_seconds_count"
    assert value(samples, count, method="GET", route=route) == 3


def test_state_metrics_come_from_the_database_not_the_process(make_client):
    first = make_client()
    first.post("/api/v1/searches", json=search_request())
    depth = value(scrape(first), "hwnas_queue_depth", device_class="test-cpu")
    second = make_client()  # another server process over the same database file
    samples = scrape(second)
    assert value(samples, "hwnas_queue_depth", device_class="test-cpu") == depth
    assert (
        value(
            samples,
            "hwnas_http_requests_total",
            method="POST",
            route="/api/v1/searches",
            status="201",
        )
        is None
    )  # HTTP counters are per process


def test_scrape_stays_fast_with_twenty_thousand_candidates(client):
    store = client.app.state.store
    _bulk_candidates(store, 20_000)
    start = time.perf_counter()
    samples = scrape(client)
    elapsed = time.perf_counter() - start
    assert value(samples, "hwnas_queue_depth", device_class="bulk") == 20_000
    assert elapsed < 1.0, f"a scrape took {elapsed:.2f} s"


def _bulk_candidates(store, n: int) -> None:
    from server.store.rows import ArchitectureRow, CandidateRow, SearchRow

    with store.write() as session:
        search = SearchRow(
            status="running",
            device_class="bulk",
            request={},
            runtime="torch",
            device="cpu",
            created_at=store.now(),
        )
        session.add(search)
        session.flush()
        archs = [
            {"arch_id": f"a{i}", "spec": {}, "decoder_params": 1, "total_params": 1}
            for i in range(n)
        ]
        session.execute(ArchitectureRow.__table__.insert(), archs)
        jobs = [
            {
                "search_id": search.id,
                "arch_id": f"a{i}",
                "generation": 0,
                "status": "queued",
                "attempts": 0,
                "reused": False,
            }
            for i in range(n)
        ]
        session.execute(CandidateRow.__table__.insert(), jobs)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # ruins the file
def test_healthz_and_scrape_report_a_broken_database(client):
    body = client.get("/healthz").json()
    assert body == {"status": "ok", "version": body["version"]} and body["version"]
    assert value(scrape(client), "hwnas_database_up") == 1
    store = client.app.state.store
    store.db.dispose()  # drop pooled connections, then ruin the file under them
    path = Path(store.db.url.database)
    for leftover in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
    path.write_bytes(b"this is not a database" * 100)
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["version"]
    assert "database unreachable" in body["detail"] and "not a database" in body["detail"]
    samples = scrape(client)  # the scrape still answers, and says the database is down
    assert value(samples, "hwnas_database_up") == 0
    assert value(samples, "hwnas_queue_depth", device_class="test-cpu") is None
