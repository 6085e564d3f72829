"""A proxy that needs the model run (LTS's low-cost set) as a search objective: refused where
it does not apply, asked of the agents with each job, and taken from their results."""

from __future__ import annotations

from tests.factories import register, search_request, synthetic_measurement

LOW_COST = ["snip", "latency_ms", "memory_mb"]


def _claim(client, agent_id):
    response = client.post(f"/api/v1/agents/{agent_id}/claim")
    assert response.status_code == 200, response.text
    return response.json()


def _report(client, agent_id, lease, proxies=None, inputs_key=None):
    measurement = synthetic_measurement(lease["spec"])
    if proxies is not None:
        measurement["proxies"], measurement["proxy_inputs"] = proxies, inputs_key
    body = {"agent_id": agent_id, "lease_id": lease["lease_id"], "measurement": measurement}
    response = client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=body)
    assert response.status_code == 200, response.text


def test_a_proxy_that_does_not_apply_to_the_space_is_refused_at_creation(client):
    request = search_request(objectives=LOW_COST, space={"kind": "nasbench_nlp"})
    response = client.post("/api/v1/searches", json=request)
    assert response.status_code == 422
    assert "proxy 'snip' does not apply to space kind 'nasbench_nlp'" in response.text
    assert "it applies to: gpt2, transxl" in response.text
    assert client.get("/api/v1/searches").json() == []


def test_an_unknown_proxy_lists_every_proxy(client):
    request = search_request(objectives=["zen", "latency_ms"])
    response = client.post("/api/v1/searches", json=request)
    assert response.status_code == 422
    assert "unknown objective 'zen'; allowed: decoder_params, total_params, flops, grad_norm" in (
        response.text
    )


def test_jobs_ask_the_agent_for_the_proxy_and_its_value_becomes_the_objective(client):
    request = search_request(
        objectives=LOW_COST, proxy_inputs={"batch_size": 2, "seq_len": 8, "seed": 5}
    )
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    agent_id = register(client)
    leases = [_claim(client, agent_id) for _ in range(4)]
    for lease in leases:
        assert lease["proxies"] == {
            "names": ["snip"],
            "inputs": {"batch_size": 2, "seq_len": 8, "seed": 5},
        }
    for i, lease in enumerate(leases):
        _report(client, agent_id, lease, {"snip": float(i)}, "random:2x8:seed5")
    candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
    by_arch = {c["arch_id"]: c for c in candidates}
    for i, lease in enumerate(leases):
        assert by_arch[lease["arch_id"]]["objectives"]["snip"] == float(i)
    front = client.get(f"/api/v1/searches/{search_id}/pareto").json()
    assert front and all("snip" in p["objectives"] for p in front)


def test_a_result_without_the_proxy_fails_the_job_and_says_why(client):
    search_id = client.post("/api/v1/searches", json=search_request(objectives=LOW_COST)).json()[
        "id"
    ]
    agent_id = register(client)
    lease = _claim(client, agent_id)
    _report(client, agent_id, lease)  # an agent that computed no proxy
    wrong = _claim(client, agent_id)
    _report(client, agent_id, wrong, {"snip": 1.0}, "random:9x9:seed9")
    candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
    failed = {c["arch_id"]: c for c in candidates if c["status"] == "failed"}
    assert set(failed) == {lease["arch_id"], wrong["arch_id"]}
    assert "reported no value for proxy snip" in failed[lease["arch_id"]]["failure"]["message"]
    assert "not the search's 'random:4x32:seed0'" in failed[wrong["arch_id"]]["failure"]["message"]


def test_a_cached_measurement_is_reused_only_with_the_same_proxy_inputs(client):
    first = client.post("/api/v1/searches", json=search_request(objectives=LOW_COST)).json()
    agent_id = register(client)
    while (claimed := client.post(f"/api/v1/agents/{agent_id}/claim")).status_code == 200:
        _report(client, agent_id, claimed.json(), {"snip": 2.0}, "random:4x32:seed0")
    same = client.post("/api/v1/searches", json=search_request(objectives=LOW_COST)).json()
    assert same["progress"]["reused"] == same["progress"]["proposed"] > 0
    other_batch = search_request(objectives=LOW_COST, proxy_inputs={"seed": 1})
    other = client.post("/api/v1/searches", json=other_batch).json()
    assert other["progress"]["reused"] == 0
    # A search that needs no agent proxy reuses them too (its first generation is the same).
    plain = client.post("/api/v1/searches", json=search_request()).json()
    assert plain["progress"]["reused"] >= first["progress"]["proposed"] > 0


def test_an_analytic_proxy_other_than_the_counts_is_an_objective_too(client):
    from archvocab.registry import parse_spec
    from proxies.flops import flops

    request = search_request(objectives=["flops", "latency_ms"])
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    assert client.post(f"/api/v1/agents/{register(client)}/claim").json()["proxies"] is None
    candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
    for c in candidates:
        assert c["objectives"]["flops"] == flops(parse_spec(c["spec"])) > 0
    best = client.get(f"/api/v1/searches/{search_id}").json()["best"]
    assert best == []  # nothing measured yet: no feasible candidate to be best
