"""Users check proxies on their own trained results: `POST /api/v1/proxies/check`."""

from __future__ import annotations

import random

import pytest
from scipy import stats

from archvocab.proxy_catalog import PROXY_CATALOG
from tests.factories import play_agent, register, search_request, synthetic_measurement


def _measured_archs(client, **overrides) -> list[dict]:
    search_id = client.post("/api/v1/searches", json=search_request(**overrides)).json()["id"]
    play_agent(client, register(client))
    return client.get(f"/api/v1/searches/{search_id}/candidates").json()


def test_the_catalogue_is_listed_with_cost_and_kinds(client):
    listed = {p["name"]: p for p in client.get("/api/v1/proxies").json()}
    assert set(listed) == set(PROXY_CATALOG)
    assert listed["decoder_params"]["cost"] == "zero" and listed["decoder_params"]["kinds"] is None
    assert listed["snip"]["cost"] == "low" and listed["snip"]["kinds"] == ["gpt2", "transxl"]
    assert all(p["description"] for p in listed.values())


def test_zero_cost_proxies_are_ranked_against_the_users_results(client):
    candidates = _measured_archs(client)
    rng = random.Random(0)
    # A made-up trained metric: perplexity falling with size, plus noise.
    results = [
        {
            "arch_id": c["arch_id"],
            "value": 1e7 / c["objectives"]["decoder_params"] + rng.uniform(0, 50),
        }
        for c in candidates
    ]
    body = {"results": results, "target": "valid_ppl", "lower_is_better": True}
    response = client.post("/api/v1/proxies/check", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["models"] == len(candidates) and answer["target"] == "valid_ppl"
    by_name = {a["proxy"]: a for a in answer["proxies"]}
    assert set(by_name) == {"decoder_params", "total_params", "flops"}  # no agent values here
    params = [c["objectives"]["decoder_params"] for c in candidates]
    values = [r["value"] for r in results]
    got = by_name["decoder_params"]
    assert got["models"] == len(candidates)
    assert got["spearman"] == stats.spearmanr(params, values).statistic
    assert got["kendall"] == stats.kendalltau(params, values).statistic
    assert 0 <= got["top_k_common"] <= 1


def test_low_cost_proxies_use_what_the_agents_computed(client):
    objectives = ["snip", "latency_ms", "memory_mb"]
    search_id = client.post("/api/v1/searches", json=search_request(objectives=objectives)).json()[
        "id"
    ]
    agent_id = register(client)
    snip = {}
    while (claimed := client.post(f"/api/v1/agents/{agent_id}/claim")).status_code == 200:
        lease = claimed.json()
        measurement = synthetic_measurement(lease["spec"])
        snip[lease["arch_id"]] = float(len(snip))  # 0, 1, 2, ... in claim order
        measurement["proxies"] = {"snip": snip[lease["arch_id"]]}
        measurement["proxy_inputs"] = "random:4x32:seed0"
        body = {"agent_id": agent_id, "lease_id": lease["lease_id"], "measurement": measurement}
        client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=body)
    assert client.get(f"/api/v1/searches/{search_id}").json()["status"] == "finished"
    # Accuracy that grows exactly with the agents' snip: rho = tau = 1.
    results = [{"arch_id": a, "value": 50 + v} for a, v in snip.items()]
    body = {"results": results, "lower_is_better": False, "proxies": ["snip", "decoder_params"]}
    answer = client.post("/api/v1/proxies/check", json=body).json()
    got = {a["proxy"]: a for a in answer["proxies"]}["snip"]
    assert got["models"] == len(snip) and got["cost"] == "low"
    assert got["spearman"] == pytest.approx(1.0) and got["kendall"] == pytest.approx(1.0)
    assert got["top_k_common"] == 1.0


def test_a_low_cost_proxy_no_agent_computed_says_so(client):
    candidates = _measured_archs(client)
    results = [{"arch_id": c["arch_id"], "value": float(i)} for i, c in enumerate(candidates)]
    body = {"results": results, "lower_is_better": True, "proxies": ["grasp"]}
    (got,) = client.post("/api/v1/proxies/check", json=body).json()["proxies"]
    assert got["models"] == 0 and got["spearman"] is None
    assert "computed by agents only for searches that optimise grasp" in got["note"]


def test_bad_requests_name_the_field(client):
    candidates = _measured_archs(client)
    good = [{"arch_id": c["arch_id"], "value": float(i)} for i, c in enumerate(candidates)]
    cases = [
        ({"results": good[:2]}, "results", "at least 3"),
        ({"results": [*good, good[0]]}, "results", "appears twice"),
        ({"results": [*good, {"arch_id": "f" * 32, "value": 1.0}]}, "results", "unknown arch_id"),
        ({"proxies": ["zen"]}, "proxies", "allowed: decoder_params"),
        ({"results": [{**good[0], "value": "NaN"}, *good[1:]]}, "value", "finite"),
        ({"top_k": 0}, "top_k", "greater than 0"),
    ]
    for override, field, phrase in cases:
        body = {"results": good, "lower_is_better": True, **override}
        response = client.post("/api/v1/proxies/check", json=body)
        assert response.status_code == 422, (override, response.text)
        assert field in response.text and phrase in response.text, (override, response.text)
    missing = client.post("/api/v1/proxies/check", json={"results": good})
    assert missing.status_code == 422 and "lower_is_better" in missing.text
