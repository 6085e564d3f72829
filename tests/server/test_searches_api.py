"""The user API: create, read, validate, cancel, frontier, CSV."""

from __future__ import annotations

import csv
import io

from server.services import views
from tests.factories import dominates, minimised, play_agent, register, search_request


def test_create_returns_201_and_the_first_generation_is_queued(client):
    response = client.post("/api/v1/searches", json=search_request())
    assert response.status_code == 201, response.text
    info = response.json()
    assert info["status"] == "running"
    assert info["progress"]["proposed"] == 4 == info["progress"]["queued"]
    listed = client.get("/api/v1/searches").json()
    assert [s["id"] for s in listed] == [info["id"]]


def test_invalid_requests_get_422_naming_the_field_and_the_allowed_values(client):
    cases = [
        (
            {"space": {**search_request()["space"], "n_layer": {"min": 5, "max": 3}}},
            "n_layer.min",
            "<= max",
        ),
        ({"objectives": ["decoder_params", "speed"]}, "objectives", "allowed: decoder_params"),
        ({"budget": {"max_evaluations": 0}}, "max_evaluations", "greater than or equal to 1"),
        ({"measurement": {"batch_size": 1, "seq_len": 128}}, "seq_len", "models take (64)"),
        ({"device_class": "no spaces allowed"}, "device_class", "pattern"),
        ({"space": {"d_model": {"min": 64, "max": 128, "stride": 2}}}, "space", "min, max, step"),
        ({"colour": "blue"}, "colour", "Extra inputs are not permitted"),
        ({"space": {"n_layer": {"min": 2, "max": 100_000}}}, "n_layer.max", "<= 256"),
        ({"space": {"vocab_size": 10**12}}, "vocab_size", "<= 10000000"),
    ]
    for override, field, phrase in cases:
        response = client.post("/api/v1/searches", json=search_request(**override))
        assert response.status_code == 422, (override, response.text)
        text = response.text
        assert field in text and phrase in text, (override, text)
    assert client.get("/api/v1/searches").json() == []


def test_unknown_ids_get_404(client):
    for method, path in [
        ("get", "/api/v1/searches/99"),
        ("get", "/api/v1/searches/99/pareto"),
        ("get", "/api/v1/searches/99/candidates"),
        ("post", "/api/v1/searches/99/cancel"),
    ]:
        response = getattr(client, method)(path)
        assert response.status_code == 404
        assert response.json()["detail"] == "search 99 not found"


def test_ids_beyond_64_bits_get_422_not_a_store_error(client):
    huge = 2**64
    for method, path in [
        ("get", f"/api/v1/searches/{huge}"),
        ("get", f"/api/v1/searches/{huge}/pareto"),
        ("post", f"/api/v1/searches/{huge}/cancel"),
    ]:
        response = getattr(client, method)(path)
        assert response.status_code == 422, path
        assert response.json()["message"].startswith("path.search_id"), response.text
    body = {"agent_id": "a", "lease_id": "b"}
    assert client.post(f"/api/v1/jobs/{huge}/heartbeat", json=body).status_code == 422


def test_a_search_runs_to_its_budget_and_its_frontier_is_exact(client):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    agent = register(client)
    assert play_agent(client, agent) == 12
    info = client.get(f"/api/v1/searches/{search_id}").json()
    assert info["status"] == "finished" and info["finish_reason"] == "budget"
    assert info["progress"]["measured"] == 12
    candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
    assert len({c["arch_id"] for c in candidates}) == len(candidates) == 12
    objectives = info["request"]["objectives"]
    points = {c["arch_id"]: minimised(c, objectives) for c in candidates}
    front = {p["arch_id"] for p in client.get(f"/api/v1/searches/{search_id}/pareto").json()}
    assert front and info["frontier_size"] == len(front)
    for arch_id, point in points.items():
        dominated = any(dominates(other, point) for other in points.values())
        assert dominated == (arch_id not in front), arch_id
    best_params = max(c["objectives"]["decoder_params"] for c in candidates)
    best = next(b for b in info["best"] if b["objective"] == "decoder_params")
    assert best["sense"] == "max" and best["value"] == best_params


def test_pareto_csv_has_one_row_per_frontier_point(client):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    play_agent(client, register(client))
    points = client.get(f"/api/v1/searches/{search_id}/pareto").json()
    response = client.get(f"/api/v1/searches/{search_id}/pareto", params={"format": "csv"})
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert sorted(r["arch_id"] for r in rows) == sorted(p["arch_id"] for p in points)
    by_id = {p["arch_id"]: p for p in points}
    for row in rows:
        assert float(row["latency_ms"]) == by_id[row["arch_id"]]["measurement"]["latency_ms"]


def test_cancel_stops_the_search_and_its_queued_jobs(client):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    info = client.post(f"/api/v1/searches/{search_id}/cancel").json()
    assert info["status"] == "cancelled" and info["finish_reason"] == "cancelled"
    agent = register(client)
    assert client.post(f"/api/v1/agents/{agent}/claim").status_code == 204
    statuses = {c["status"] for c in client.get(f"/api/v1/searches/{search_id}/candidates").json()}
    assert statuses == {"cancelled"}


def test_parameter_bounds_are_respected_before_anything_is_measured(client):
    request = search_request(
        constraints={"min_decoder_params": 150_000, "max_decoder_params": 400_000}
    )
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    play_agent(client, register(client))
    candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
    assert candidates
    assert all(150_000 <= c["objectives"]["decoder_params"] <= 400_000 for c in candidates)


def test_latency_bound_excludes_slow_points_from_the_frontier(client):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    play_agent(client, register(client))
    latencies = sorted(
        c["objectives"]["latency_ms"]
        for c in client.get(f"/api/v1/searches/{search_id}/candidates").json()
    )
    bound = latencies[len(latencies) // 2]
    bounded = client.post(
        "/api/v1/searches", json=search_request(constraints={"max_latency_ms": bound})
    ).json()
    play_agent(client, register(client))
    front = client.get(f"/api/v1/searches/{bounded['id']}/pareto").json()
    assert front and all(p["objectives"]["latency_ms"] <= bound for p in front)
    infeasible = [
        c
        for c in client.get(f"/api/v1/searches/{bounded['id']}/candidates").json()
        if c["feasible"] is False
    ]
    assert infeasible and not any(c["on_frontier"] for c in infeasible)


def test_candidates_come_in_pages_in_proposal_order(client):
    search = client.post("/api/v1/searches", json=search_request()).json()
    play_agent(client, register(client))
    url = f"/api/v1/searches/{search['id']}/candidates"
    everything = [c["arch_id"] for c in client.get(url).json()]
    pages = [client.get(url, params={"limit": 5, "offset": k}).json() for k in (0, 5, 10)]
    assert [c["arch_id"] for page in pages for c in page] == everything
    failed = client.get(url, params={"status": "failed", "limit": 3}).json()
    assert failed == []
    bad = client.get(url, params={"limit": 0})
    assert bad.status_code == 422 and "limit" in bad.json()["message"]


def test_the_best_so_far_follows_every_result_as_it_comes(client, monkeypatch):
    monkeypatch.setattr(views, "BEST_BLOCK", 3)  # kept blocks and the rows after them
    request = search_request(constraints={"max_latency_ms": 2.5})
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    agent = register(client)
    url = f"/api/v1/searches/{search_id}"
    infeasible = 0
    while play_agent(client, agent, max_jobs=1):  # read after every result: kept, then extended
        info = client.get(url).json()
        told = [
            c
            for c in client.get(f"{url}/candidates").json()
            if c["status"] == "measured" and c["feasible"]
        ]
        infeasible += info["progress"]["measured"] - len(told)
        for best in info["best"]:
            values = [c["objectives"][best["objective"]] for c in told]
            assert best["value"] == (max if best["sense"] == "max" else min)(values)
            by_id = next(c for c in told if c["arch_id"] == best["arch_id"])
            assert by_id["objectives"][best["objective"]] == best["value"]
        assert {b["objective"] for b in info["best"]} == (
            set(info["request"]["objectives"]) if told else set()
        )
    assert infeasible > 0  # the bound kept some out, or the test proves less
