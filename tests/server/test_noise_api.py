"""Numbers that hold when measured again: intervals from the agents' reference readings,
drift-corrected values, the frontier beyond noise, and the settings' refusals."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from search.noise import PRIOR_DOF, PRIOR_EXTRA, PRIOR_EXTRA_DOF, fit, prior
from tests.factories import (
    FINGERPRINT,
    check_frontier_beyond_noise,
    register,
    search_request,
    synthetic_measurement,
)

READINGS = [10.0, 10.4, 9.7, 10.1, 9.9, 10.6, 9.8, 10.2]  # the reference's latency, ms
# A quiet device: the reference moves by about 1% over 24 readings.
QUIET = [10.0 * (1 + 0.01 * math.sin(i)) for i in range(24)]


def play_with_references(
    client, agent_id: str, readings: list[float], max_jobs: int = 10_000, day: int = 25
) -> list[dict]:
    """Claim and report jobs (all, or `max_jobs`); job i was measured next to reference
    reading i (mod n), taken one minute apart. Returns the leases."""
    leases: list[dict] = []
    start = datetime(2026, 11, day, tzinfo=UTC)
    while (
        len(leases) < max_jobs
        and (claimed := client.post(f"/api/v1/agents/{agent_id}/claim")).status_code == 200
    ):
        lease = claimed.json()
        i = len(leases) % len(readings)
        measurement = synthetic_measurement(lease["spec"])
        measurement["reference"] = {
            "arch_id": lease["reference"]["arch_id"],
            "latency_ms": readings[i],
            "peak_memory_mb": 50.0,
            "measured_at": (start + timedelta(minutes=i)).isoformat(),
        }
        result = {"agent_id": agent_id, "lease_id": lease["lease_id"], "measurement": measurement}
        assert client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=result).is_success
        leases.append(lease)
    return leases


def test_leases_name_the_reference_architecture_and_the_busy_retries(client):
    request = search_request(noise={"busy_retries": 3, "reference_every_jobs": 5})
    client.post("/api/v1/searches", json=request)
    lease = client.post(f"/api/v1/agents/{register(client)}/claim").json()
    reference = lease["reference"]
    assert lease["busy_retries"] == 3
    assert reference["every_jobs"] == 5 and reference["every_s"] == 300
    # a member of the search's space, the same one for every job
    space = client.get("/api/v1/searches").json()[0]["request"]["space"]
    checked = client.post("/api/v1/spaces/check", json={"space": space, "spec": reference["spec"]})
    assert checked.status_code == 200, checked.text
    assert checked.json()["arch_id"] == reference["arch_id"]


def test_intervals_come_from_the_reference_readings_and_narrow_with_them(client):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    leases = play_with_references(client, register(client), READINGS)
    assert len(leases) == 12
    info = client.get(f"/api/v1/searches/{search_id}").json()
    noise = info["noise"]
    assert noise["reference_readings"] == len(READINGS)  # one reading, many results: counted once
    model = fit({"latency_ms": [READINGS], "memory_mb": [[50.0] * len(READINGS)]})
    assert noise["sigma"]["latency_ms"] == model.sigma["latency_ms"]
    assert noise["reference_sigma"]["latency_ms"] == model.reference_sigma["latency_ms"]
    assert noise["reference_sigma"]["latency_ms"] < noise["sigma"]["latency_ms"]
    # evidence of a ~3% spread narrows the prior's interval
    assert model.sigma["latency_ms"] < prior("cpu").sigma["latency_ms"]
    low, high = model.interval("latency_ms", 1.0, 0.95)
    assert noise["interval_rel"]["latency_ms"] == [low, high]
    for c in client.get(f"/api/v1/searches/{search_id}/candidates").json():
        value = c["objectives"]["latency_ms"]
        assert c["intervals"]["latency_ms"] == [value * low, value * high]


def test_drift_corrected_values_put_each_result_at_the_reference_level(client):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    leases = play_with_references(client, register(client), READINGS)
    level = sorted(READINGS)[len(READINGS) // 2 - 1 : len(READINGS) // 2 + 1]
    level = sum(level) / 2  # the median of an even count
    by_arch = {
        c["arch_id"]: c for c in client.get(f"/api/v1/searches/{search_id}/candidates").json()
    }
    for i, lease in enumerate(leases):
        c = by_arch[lease["arch_id"]]
        reading = READINGS[i % len(READINGS)]
        raw = c["objectives"]["latency_ms"]
        assert math.isclose(c["corrected"]["latency_ms"], raw * level / reading)
        assert c["measurement"]["reference"]["latency_ms"] == reading


def test_a_point_is_off_the_frontier_only_when_dominated_beyond_its_interval(client):
    # Two objectives: a 2-D frontier leaves points off it (with three, all 12 are on it). At
    # 95% a candidate's prior extra spread makes every frontier point of this tiny space
    # doubtful; at 75% some are certain (and some off it, with the first 20 of the 24 readings
    # the refit ladder fits: server.services.results.evidence_used).
    request = search_request(
        objectives=["decoder_params", "latency_ms"],
        budget={"max_evaluations": 24},
        noise={"confidence": 0.75},
    )
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    play_with_references(client, register(client), QUIET)
    info = client.get(f"/api/v1/searches/{search_id}").json()
    candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
    front = client.get(f"/api/v1/searches/{search_id}/pareto").json()
    plain = check_frontier_beyond_noise(candidates, front, info["request"]["objectives"])
    assert info["noise"]["plain_frontier_size"] == len(plain)
    front_ids = {p["arch_id"] for p in front}
    assert all(c["on_frontier"] == (c["arch_id"] in front_ids) for c in candidates)
    assert front_ids - plain, "points the noise cannot separate"
    assert len(front) < len(candidates), "and points beyond the noise"
    certain = {p["arch_id"] for p in front if p["frontier_certain"]}
    assert certain and certain < plain, "some frontier points are certain, not all"
    assert info["noise"]["certain_frontier_size"] == len(certain)
    points = client.get(f"/api/v1/searches/{search_id}/points").json()
    assert set(points["certain"]) == certain
    rows = client.get(f"/api/v1/searches/{search_id}/pareto?format=csv").text.splitlines()
    header = rows[0].split(",")
    column = header.index("frontier_certain")
    by_arch = {r.split(",")[0]: r.split(",")[column] for r in rows[1:]}
    assert {a for a, v in by_arch.items() if v == "True"} == certain


def test_noise_settings_out_of_range_get_422_naming_the_field_and_range(client):
    cases = [
        ({"confidence": 1.5}, "confidence", "less than or equal to 0.999"),
        ({"busy_retries": 9}, "busy_retries", "less than or equal to 5"),
        ({"reference_every_jobs": 0}, "reference_every_jobs", "greater than or equal to 1"),
        ({"reference_every_s": 1}, "reference_every_s", "greater than or equal to 5"),
        ({"remeasure_share": 1.5}, "remeasure_share", "less than or equal to 1"),
        ({"max_measurements": 1}, "max_measurements", "greater than or equal to 2"),
        ({"remeasure": True}, "remeasure", "Extra inputs are not permitted"),
        ({"frontier_values": "raw"}, "frontier_values", "'measured' or 'corrected'"),
    ]
    for noise, field, phrase in cases:
        response = client.post("/api/v1/searches", json=search_request(noise=noise))
        assert response.status_code == 422, (noise, response.text)
        assert field in response.text and phrase in response.text, (noise, response.text)
    assert client.get("/api/v1/searches").json() == []


def remeasuring_request() -> dict:
    """A 24-candidate search that re-measures up to 6 frontier points, each at most twice."""
    return search_request(
        objectives=["decoder_params", "latency_ms"],
        budget={"max_evaluations": 24},
        noise={"remeasure_share": 0.25, "max_measurements": 3},
    )


def test_re_measurements_are_chosen_from_a_table_brought_up_to_date_off_the_write_lock(
    client, monkeypatch
):
    # Brought up to date in the transaction that queued the re-measurements, a refit of the
    # noise model rebuilt the frontier under the write lock: 250-270 ms at 20,000 results
    # (docs/benchmarks.md, "Re-measurements chosen off the write lock").
    from server.services.results import ResultTable

    search_id = client.post("/api/v1/searches", json=remeasuring_request()).json()["id"]
    store = client.app.state.services.store
    adds: list[tuple[int, bool]] = []  # (rows and re-measurements new to the table, locked)
    add = ResultTable.add

    def watched(table, new, again=()):
        fresh = len(new) + len([a for a in again if a.id not in table.seen_again])
        adds.append((fresh, store.write_lock._is_owned()))
        return add(table, new, again)

    monkeypatch.setattr(ResultTable, "add", watched)
    play_with_references(client, register(client), QUIET)
    info = client.get(f"/api/v1/searches/{search_id}").json()
    assert info["status"] == "finished" and info["progress"]["remeasured"] > 0
    assert sum(fresh for fresh, _ in adds) >= 24 + info["progress"]["remeasured"]
    assert all(fresh == 0 for fresh, locked in adds if locked)


def test_a_search_the_cache_replays_whole_builds_its_table_off_the_write_lock(client, monkeypatch):
    # Its last cached results finish the engine inside a write transaction; built there, the
    # table its re-measurements are chosen from held the write lock 154-168 ms at 1,000
    # results, and the space sample of its normalisation 21-26 ms more in the create
    # (docs/benchmarks.md, "A replayed search's table off the write lock").
    from server.services import quality
    from server.services.results import ResultTable

    request = remeasuring_request()
    client.post("/api/v1/searches", json=request)
    agent = register(client)
    play_with_references(client, agent, QUIET)
    store = client.app.state.services.store
    adds: list[tuple[int, bool]] = []  # (rows and re-measurements new to the table, locked)
    normalised: list[bool] = []  # locked
    add, initial_normalisation = ResultTable.add, quality.initial_normalisation

    def watched(table, new, again=()):
        fresh = len(new) + len([a for a in again if a.id not in table.seen_again])
        adds.append((fresh, store.write_lock._is_owned()))
        return add(table, new, again)

    def normalisation(search_request):
        normalised.append(store.write_lock._is_owned())
        return initial_normalisation(search_request)

    monkeypatch.setattr(ResultTable, "add", watched)
    monkeypatch.setattr(quality, "initial_normalisation", normalisation)
    twin = client.post("/api/v1/searches", json=request).json()["id"]
    play_with_references(client, agent, QUIET)  # its re-measurements
    info = client.get(f"/api/v1/searches/{twin}").json()
    assert info["status"] == "finished"
    assert info["progress"]["reused"] == 24 and info["progress"]["remeasured"] > 0
    assert sum(fresh for fresh, _ in adds) >= 24 + info["progress"]["remeasured"]
    assert all(fresh == 0 for fresh, locked in adds if locked)
    assert normalised == [False]


def test_points_the_noise_cannot_separate_are_measured_again_before_the_search_ends(client):
    request = remeasuring_request()
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    agent = register(client)
    leases = play_with_references(client, agent, QUIET)
    url = f"/api/v1/searches/{search_id}"
    info = client.get(url).json()
    progress = info["progress"]
    assert info["status"] == "finished"
    assert progress["measured"] == 24 and progress["remeasure_budget"] == 6
    again = leases[24:]  # the re-measurement jobs came after the budget's candidates
    assert 0 < len(again) == progress["remeasured"] <= 6 and progress["remeasuring"] == 0
    remeasured = {lease["arch_id"] for lease in again}
    candidates = {c["arch_id"]: c for c in client.get(f"{url}/candidates").json()}
    assert len(candidates) == 24  # re-measurements are not candidates of their own
    for arch_id in remeasured:
        c = candidates[arch_id]
        n = 1 + sum(lease["arch_id"] == arch_id for lease in again)
        assert c["measurements"] == n <= 3
        # the synthetic device repeats itself exactly: the mean is the value
        assert math.isclose(c["objectives"]["latency_ms"], c["measurement"]["latency_ms"])
    # The engine never saw them: the proposals are those of the same search without them.
    # (other settings, so that nothing comes from the measurement cache)
    measurement = {**request["measurement"], "min_samples": 6}
    twin_request = {**request, "noise": {"remeasure_share": 0}, "measurement": measurement}
    twin = client.post("/api/v1/searches", json=twin_request).json()["id"]
    twin_leases = play_with_references(client, agent, QUIET)
    assert [lease["arch_id"] for lease in twin_leases] == [
        lease["arch_id"] for lease in leases[:24]
    ]
    assert client.get(f"/api/v1/searches/{twin}").json()["progress"]["remeasured"] == 0


def budget_spent(client) -> tuple[str, str]:
    """A 24-candidate search whose agent measured them all: re-measurements are queued.
    (its url, the agent)"""
    request = search_request(
        objectives=["decoder_params", "latency_ms"],
        budget={"max_evaluations": 24},
        noise={"remeasure_share": 0.1},
    )
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    first = register(client)
    play_with_references(client, first, QUIET, max_jobs=24)
    url = f"/api/v1/searches/{search_id}"
    assert client.get(url).json()["progress"]["remeasuring"] >= 1
    return url, first


def test_a_re_measurement_counts_once_and_a_lost_lease_goes_back_to_the_queue(client, clock):
    url, first = budget_spent(client)
    lost = client.post(f"/api/v1/agents/{first}/claim").json()
    clock.advance(3600)  # its agent died: the lease runs out and the job is given out again
    second = register(client)
    lease = client.post(f"/api/v1/agents/{second}/claim").json()
    assert lease["job_id"] == lost["job_id"] and lease["lease_id"] != lost["lease_id"]
    result = {
        "agent_id": second,
        "lease_id": lease["lease_id"],
        "measurement": synthetic_measurement(lease["spec"]),
    }
    receipts = [
        client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=result).json() for _ in range(2)
    ]
    assert [r["duplicate"] for r in receipts] == [False, True]
    assert client.get(url).json()["progress"]["remeasured"] == 1


def test_a_later_search_on_the_device_class_starts_from_the_earlier_readings(client):
    agent = register(client)
    client.post("/api/v1/searches", json=search_request())
    play_with_references(client, agent, READINGS)
    # Other settings (nothing reused from the cache), the same device class: a new reference
    # reading or two, and the earlier search's eight to learn the noise from as well.
    later = search_request(seed=8, measurement={**search_request()["measurement"], "seq_len": 8})
    search_id = client.post("/api/v1/searches", json=later).json()["id"]
    play_with_references(client, agent, [10.1], max_jobs=3, day=26)
    noise = client.get(f"/api/v1/searches/{search_id}").json()["noise"]
    assert noise["reference_readings"] == 1 and noise["earlier_readings"] == 0  # other settings
    same = search_request(seed=9)
    search_id = client.post("/api/v1/searches", json=same).json()["id"]
    play_with_references(client, agent, [10.3], max_jobs=3, day=27)
    noise = client.get(f"/api/v1/searches/{search_id}").json()["noise"]
    # (a result reused from the cache brings its reading into the search's own)
    own, earlier = noise["reference_readings"], noise["earlier_readings"]
    assert own + earlier == len(READINGS) + 1 and earlier >= 1
    # two groups of repeated readings, this search's and the earlier one's, are the
    # reference's evidence; the candidates' extra (no candidate measured twice) its prior's
    reference_dof = PRIOR_DOF + (own - 1) + (earlier - 1)
    ref_var = noise["reference_sigma"]["latency_ms"] ** 2
    total = noise["sigma"]["latency_ms"] ** 2
    extra_var = total - ref_var
    assert extra_var == pytest.approx(PRIOR_EXTRA["cpu"]["latency_ms"] ** 2)
    expected = total**2 / (ref_var**2 / reference_dof + extra_var**2 / PRIOR_EXTRA_DOF)
    assert noise["dof"]["latency_ms"] == pytest.approx(expected)


def test_a_re_measurement_goes_to_another_agent_of_the_class_while_one_is_online(client, clock):
    url, first = budget_spent(client)
    other = register(client)  # online from now on
    # the agent that measured everything gets nothing: the re-measurement waits for the other
    assert client.post(f"/api/v1/agents/{first}/claim").status_code == 204
    lease = client.post(f"/api/v1/agents/{other}/claim").json()
    assert lease["arch_id"] in {c["arch_id"] for c in client.get(f"{url}/pareto").json()}
    # Once the other has not been seen for a lease period, the first one takes the rest.
    clock.advance(3600)
    assert play_with_references(client, first, QUIET)  # the re-queued lease and any others
    info = client.get(url).json()
    assert info["status"] == "finished" and info["progress"]["remeasuring"] == 0


def test_an_online_agent_that_cannot_run_the_job_does_not_hold_a_re_measurement_back(client):
    url, first = budget_spent(client)
    register(client, fingerprint={**FINGERPRINT, "runtimes": ["onnxruntime"]})  # torch search
    lease = client.post(f"/api/v1/agents/{first}/claim")
    assert lease.status_code == 200, "the only agent that can run it takes it"
    assert lease.json()["arch_id"] in {c["arch_id"] for c in client.get(f"{url}/pareto").json()}
