"""Strategies through the API: each runs to its budget; hypervolume after every result; the
hwnas strategy's surrogate error; one measurement slot per live agent; restart safety."""

from __future__ import annotations

import pytest

from search.hypervolume import Normaliser, hypervolume
from tests.factories import play_agent, register, search_request, synthetic_measurement

SMALL_SPACE = {
    "kind": "gpt2",
    "n_layer": {"min": 2, "max": 4},
    "d_model": {"min": 128, "max": 256, "step": 64},
    "d_inner": {"min": 256, "max": 768, "step": 64},
    "n_head": [2, 4],
    "d_embed": [128],
    "div_val": [1],
}


def start(client, **overrides) -> dict:
    body = search_request(space=SMALL_SPACE, budget={"max_evaluations": 40}, **overrides)
    response = client.post("/api/v1/searches", json=body)
    assert response.status_code == 201, response.text
    return response.json()


@pytest.mark.parametrize("strategy", ["lts", "nsga2", "hwnas"])
def test_every_strategy_spends_its_budget_and_records_hypervolume(client, strategy) -> None:
    population = {"initial": 10, "parents": 4, "mutations": 5, "crossovers": 5}
    search = start(client, strategy=strategy, population=population)
    agent = register(client)
    jobs = play_agent(client, agent)
    info = client.get(f"/api/v1/searches/{search['id']}").json()
    assert info["status"] == "finished" and info["finish_reason"] == "budget"
    assert jobs == 40 + info["progress"]["remeasured"]  # and the frontier's re-measurements
    trace = client.get(f"/api/v1/searches/{search['id']}/hypervolume").json()
    points = trace["points"]
    assert [p["results"] for p in points] == list(range(1, 41))
    assert [p["measured"] for p in points] == list(range(1, 41))
    values = [p["hypervolume"] for p in points]
    assert all(b >= a for a, b in zip(values, values[1:])), "a frontier never loses volume"
    assert values[-1] > 0 and info["progress"]["hypervolume"] == values[-1]
    device = [p["device_s"] for p in points]
    assert device == pytest.approx([0.05 * (i + 1) for i in range(40)])  # total_s per result

    # The final value is the hypervolume of the pareto endpoint's points, normalised as stated.
    norm = Normaliser(trace["objectives"], trace["ideal"], trace["reference"])
    front = client.get(f"/api/v1/searches/{search['id']}/pareto").json()
    assert values[-1] == pytest.approx(hypervolume(norm.points([p["objectives"] for p in front])))


def test_reference_sources_request_space_and_first_measurements(client) -> None:
    search = start(
        client,
        strategy="hwnas",
        hypervolume={"reference": {"memory_mb": 500.0}},
        constraints={"max_latency_ms": 400.0},
    )
    trace = client.get(f"/api/v1/searches/{search['id']}/hypervolume").json()
    assert trace["source"]["memory_mb"] == "request"
    assert trace["source"]["latency_ms"] == "constraint"
    assert trace["source"]["decoder_params"].startswith("space sample")
    assert trace["reference"] == {
        "decoder_params": trace["reference"]["decoder_params"],
        "latency_ms": 400.0,
        "memory_mb": 500.0,
    }

    client.post(f"/api/v1/searches/{search['id']}/cancel")
    open_ref = start(client, strategy="lts", seed=1)
    empty = client.get(f"/api/v1/searches/{open_ref['id']}/hypervolume").json()
    assert empty["reference"] is None and empty["points"] == []
    play_agent(client, register(client), max_jobs=12)
    trace = client.get(f"/api/v1/searches/{open_ref['id']}/hypervolume").json()
    assert trace["source"]["latency_ms"] == "first 10 measurements"
    # Results before the reference was fixed got their values when it was.
    assert [p["results"] for p in trace["points"]] == list(range(1, 13))
    first = client.get(f"/api/v1/searches/{open_ref['id']}/candidates").json()
    told = [c for c in first if c["status"] == "measured"]
    first_ten = sorted(told, key=lambda c: c["measurement"]["measured_at"])[:10]
    assert trace["reference"]["latency_ms"] == pytest.approx(
        2 * max(c["objectives"]["latency_ms"] for c in first_ten)
    )


def test_hypervolume_settings_are_validated(client) -> None:
    bad = [
        ({"reference": {"flops": 1.0}}, "'flops' is not an objective"),
        ({"ideal": {"latency_ms": 10.0}, "reference": {"latency_ms": 5.0}}, "must be worse"),
    ]
    for settings, message in bad:
        response = client.post(
            "/api/v1/searches", json=search_request(strategy="hwnas", hypervolume=settings)
        )
        assert response.status_code == 422
        assert message in response.text


# hwnas's settings: (field, a value outside the allowed ones, the allowed ones as the error
# names them, its default, another allowed value).
HWNAS_SETTINGS = [
    ("surrogate", "forest", "'cost_model' or 'residual_gp'", "cost_model", "residual_gp"),
    ("value_per", "hour", "'measurement' or 'device_second'", "measurement", "device_second"),
    ("initial_design", "sobol", "'random' or 'analytic_front'", "analytic_front", "random"),
]


@pytest.mark.parametrize(("field", "bad", "allowed", "default", "other"), HWNAS_SETTINGS)
def test_an_hwnas_setting_is_validated_and_kept(client, field, bad, allowed, default, other):
    refused = [
        ({"strategy": "hwnas", field: bad}, allowed),
        ({"strategy": "lts", field: other}, f"{field}: only for strategy 'hwnas'"),
    ]
    for settings, message in refused:
        response = client.post("/api/v1/searches", json=search_request(**settings))
        assert response.status_code == 422
        assert field in response.text and message in response.text
    for asked, kept in ((None, default), (other, other)):
        settings = {"strategy": "hwnas"} | ({} if asked is None else {field: asked})
        created = client.post("/api/v1/searches", json=search_request(**settings))
        assert created.status_code == 201, created.text
        assert created.json()["request"][field] == kept


def test_hwnas_reports_its_models_error(client) -> None:
    search = start(client, strategy="hwnas", population={"initial": 10})
    play_agent(client, register(client))
    info = client.get(f"/api/v1/searches/{search['id']}").json()
    errors = {e["objective"]: e for e in info["surrogate"]}
    assert set(errors) == {"latency_ms", "memory_mb"}
    screened = [
        c
        for c in client.get(f"/api/v1/searches/{search['id']}/candidates").json()
        if c["generation"] >= 10
    ]
    assert errors["latency_ms"]["predictions"] == len(screened) == 30
    # The synthetic device is a smooth function of the shape: its costs are learnable.
    assert errors["latency_ms"]["median_abs_pct"] < 25
    lts = start(client, strategy="lts", seed=3)
    play_agent(client, register(client))
    assert client.get(f"/api/v1/searches/{lts['id']}").json()["surrogate"] == []


def test_hwnas_keeps_one_job_per_live_agent_and_tops_up_for_new_ones(client) -> None:
    search = start(client, strategy="hwnas", population={"initial": 10})
    candidates = f"/api/v1/searches/{search['id']}/candidates?status=queued"
    assert len(client.get(candidates).json()) == 1  # no agent yet: one slot
    agents = [register(client) for _ in range(3)]
    leases = []
    for agent in agents:
        claimed = client.post(f"/api/v1/agents/{agent}/claim")
        assert claimed.status_code == 200, "every free agent gets a job at once"
        leases.append((agent, claimed.json()))
    running = client.get(f"/api/v1/searches/{search['id']}/candidates?status=running").json()
    assert len(running) == 3
    agent, lease = leases[0]
    result = {
        "agent_id": agent,
        "lease_id": lease["lease_id"],
        "measurement": synthetic_measurement(lease["spec"]),
    }
    assert client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=result).status_code == 200
    # One result frees one slot: one new job, not a generation.
    assert len(client.get(candidates).json()) == 1


def test_a_restarted_server_continues_each_strategy(make_client) -> None:
    for strategy in ("nsga2", "hwnas"):
        db = f"{strategy}.db"
        client = make_client(db)
        search = start(
            client, strategy=strategy, population={"initial": 8, "mutations": 4, "crossovers": 4}
        )
        agent = register(client)
        play_agent(client, agent, max_jobs=17)
        restarted = make_client(db)
        jobs = play_agent(restarted, agent)
        info = restarted.get(f"/api/v1/searches/{search['id']}").json()
        assert info["status"] == "finished" and info["progress"]["measured"] == 40
        assert jobs == 23 + info["progress"]["remeasured"]
