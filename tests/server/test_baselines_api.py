"""Layer-scaled baselines (LTS) through the API, and a search's report against one."""

from __future__ import annotations

import pytest

from archvocab.spaces.gpt2.space import GPT2Space
from tests.factories import FAST_MEASUREMENT, TINY_SPACE, play_agent, register, search_request

# A small baseline so that synthetic measurements scale like the tiny space's models.
BASELINE_SPACE = {
    **TINY_SPACE,
    "baseline_d_model": 64,
    "baseline_d_inner": 256,
    "baseline_n_head": 2,
}


def _baseline(client, **overrides):
    body = {
        "space": BASELINE_SPACE,
        "device_class": "test-cpu",
        "layers": [1, 2, 3, 4],
        "measurement": FAST_MEASUREMENT,  # the searches' protocol: comparable measurements
    }
    body.update(overrides)
    return client.post("/api/v1/baselines", json=body)


def test_a_baseline_measures_each_depth_once_and_finishes(client):
    created = _baseline(client)
    assert created.status_code == 201, created.text
    info = created.json()
    assert info["request"]["strategy"] == "layer_scaled" and info["progress"]["budget"] == 4
    play_agent(client, register(client))
    info = client.get(f"/api/v1/searches/{info['id']}").json()
    assert info["status"] == "finished" and info["finish_reason"] == "budget"
    candidates = client.get(f"/api/v1/searches/{info['id']}/candidates").json()
    space = GPT2Space.from_dict(BASELINE_SPACE)
    expected = {space.baseline(n).arch_id: n for n in (1, 2, 3, 4)}
    assert {c["arch_id"]: c["spec"]["n_layer"] for c in candidates} == expected
    for c in candidates:  # homogeneous layers of the baseline widths
        assert set(c["spec"]["d_inner"]) == {256} and set(c["spec"]["n_head"]) == {2}
        assert c["status"] == "measured"
    params = [c["objectives"]["decoder_params"] for c in candidates]
    assert params == sorted(params)  # deeper is bigger


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"layers": [0, 1]}, "layers", "distinct depths in 1..256"),
        ({"layers": [2, 2]}, "layers", "distinct depths in 1..256"),
        ({"space": {"kind": "nope"}}, "space", "unknown space kind 'nope'; allowed: gpt2"),
        ({"space": {**BASELINE_SPACE, "baseline_n_head": 3}}, "space", "must divide"),
    ],
)
def test_bad_baseline_requests_get_422_naming_the_field(client, body, field, message):
    response = _baseline(client, **body)
    assert response.status_code == 422, response.text
    assert field in response.text and message in response.text


def test_layers_belong_to_layer_scaled_searches_only(client):
    response = client.post("/api/v1/searches", json=search_request(layers=[1, 2]))
    assert response.status_code == 422
    assert "layers: only for strategy 'layer_scaled'" in response.text


def _finished_search(client, agent, **overrides):
    request = search_request(space=BASELINE_SPACE, budget={"max_evaluations": 30}, **overrides)
    created = client.post("/api/v1/searches", json=request)
    assert created.status_code == 201, created.text
    play_agent(client, agent)
    return created.json()["id"]


def test_the_report_compares_the_frontier_with_the_deepest_baseline(client):
    agent = register(client)
    search_id = _finished_search(client, agent)
    before = client.get(f"/api/v1/searches/{search_id}/report").json()
    assert before["baseline"] is None and "no finished layer-scaled baseline" in before["note"]

    baseline_id = _baseline(client).json()["id"]
    play_agent(client, agent)
    report = client.get(f"/api/v1/searches/{search_id}/report").json()
    comparison = report["baseline"]
    assert comparison is not None, report
    assert comparison["baseline_search_id"] == baseline_id
    assert comparison["deepest"]["n_layer"] == 4
    front = client.get(f"/api/v1/searches/{search_id}/pareto").json()
    at_least = [
        p
        for p in front
        if p["objectives"]["decoder_params"] >= comparison["deepest"]["decoder_params"]
    ]
    assert at_least, "the tiny space's largest models exceed the 4-layer baseline"
    matched = min(at_least, key=lambda p: p["objectives"]["decoder_params"])
    assert comparison["matched"]["arch_id"] == matched["arch_id"]
    deepest = comparison["deepest"]
    assert comparison["latency_speedup"] == pytest.approx(
        deepest["latency_ms"] / matched["objectives"]["latency_ms"]
    )
    assert comparison["memory_reduction"] == pytest.approx(
        deepest["memory_mb"] / matched["objectives"]["memory_mb"]
    )
    fastest = min(at_least, key=lambda p: p["objectives"]["latency_ms"])
    assert comparison["fastest"]["arch_id"] == fastest["arch_id"]


def test_a_baseline_on_another_device_class_or_protocol_is_not_used(client):
    agent = register(client)
    search_id = _finished_search(client, agent)
    _baseline(client, device_class="other-cpu")
    _baseline(client, measurement={**FAST_MEASUREMENT, "seq_len": 8})
    play_agent(client, agent)
    play_agent(client, register(client, device_class="other-cpu"))
    report = client.get(f"/api/v1/searches/{search_id}/report").json()
    assert report["baseline"] is None and "no finished layer-scaled baseline" in report["note"]


def test_no_frontier_point_as_large_as_the_deepest_baseline_is_said_so(client):
    agent = register(client)
    search_id = _finished_search(client, agent)
    _baseline(client, layers=[1, 40])
    play_agent(client, agent)
    comparison = client.get(f"/api/v1/searches/{search_id}/report").json()["baseline"]
    assert comparison["deepest"]["n_layer"] == 40 and comparison["matched"] is None
    assert "no frontier point has as many decoder parameters" in comparison["note"]


def test_a_baseline_report_says_it_is_one(client):
    baseline_id = _baseline(client).json()["id"]
    report = client.get(f"/api/v1/searches/{baseline_id}/report").json()
    assert report["baseline"] is None and "is a layer-scaled baseline" in report["note"]


def test_a_baseline_interrupted_by_a_restart_finishes_with_each_depth_once(make_client):
    first = make_client("baseline.db")
    baseline_id = _baseline(first).json()["id"]
    play_agent(first, register(first), max_jobs=2)  # stop halfway
    second = make_client("baseline.db")  # a new app, its engine rebuilt from the rows
    play_agent(second, register(second))
    info = second.get(f"/api/v1/searches/{baseline_id}").json()
    assert info["status"] == "finished" and info["progress"]["measured"] == 4
    candidates = second.get(f"/api/v1/searches/{baseline_id}/candidates").json()
    assert sorted(c["spec"]["n_layer"] for c in candidates) == [1, 2, 3, 4]
