"""The measurement cache: what a device measured once is reused by later searches, and the
API says so; different settings, devices or a busy machine mean measuring again."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import event, func, select

from server.app.factory import create_app
from server.services import quality, searches
from server.settings import Settings
from server.store import proposals
from server.store.rows import CandidateRow
from server.store.schema import SchemaMismatch
from tests.factories import FINGERPRINT, play_agent, register, search_request


def _run_search(client, agent, **overrides):
    created = client.post("/api/v1/searches", json=search_request(**overrides))
    assert created.status_code == 201, created.text
    search_id = created.json()["id"]
    jobs = play_agent(client, agent)
    info = client.get(f"/api/v1/searches/{search_id}").json()
    assert info["status"] == "finished", info
    candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
    return info, candidates, jobs


def test_a_repeated_search_reuses_every_measurement_and_says_so(client):
    agent = register(client)
    first, first_candidates, first_jobs = _run_search(client, agent)
    assert first_jobs == first["progress"]["measured"] > 0
    assert first["progress"]["reused"] == 0 and not any(c["reused"] for c in first_candidates)

    second, second_candidates, second_jobs = _run_search(client, agent)
    assert second_jobs == 0  # nothing went to the device
    assert second["progress"]["reused"] == second["progress"]["measured"] == first_jobs
    assert all(c["reused"] for c in second_candidates)
    by_arch = {c["arch_id"]: c for c in first_candidates}
    for c in second_candidates:
        original = by_arch[c["arch_id"]]
        assert c["measurement"]["measurement_id"] == original["measurement"]["measurement_id"]
        assert c["measurement"]["measured_for_search"] == first["id"]
        assert c["objectives"] == original["objectives"]
    pareto = client.get(f"/api/v1/searches/{second['id']}/pareto").json()
    assert [p["arch_id"] for p in pareto] == [
        p["arch_id"] for p in client.get(f"/api/v1/searches/{first['id']}/pareto").json()
    ]


def test_a_later_search_measures_only_what_the_cache_lacks(client):
    agent = register(client)
    first, _, _ = _run_search(client, agent)
    bigger, candidates, jobs = _run_search(client, agent, budget={"max_evaluations": 20})
    reused = [c for c in candidates if c["reused"]]
    assert reused and jobs > 0
    assert bigger["progress"]["reused"] == len(reused)
    assert jobs + len(reused) == bigger["progress"]["measured"] + bigger["progress"]["failed"]


@pytest.mark.parametrize(
    "change",
    [
        {"measurement": {"seq_len": 32}},
        {"measurement": {"seq_len": 16, "threads": 2}},
        {"measurement": {"seq_len": 16, "runtime": "onnxruntime"}},
    ],
)
def test_other_settings_measure_again(client, change):
    onnx_capable = {**FINGERPRINT, "runtimes": ["torch", "onnxruntime"]}
    agent = register(client, fingerprint=onnx_capable)
    _run_search(client, agent)
    info, candidates, jobs = _run_search(client, agent, **change)
    assert jobs > 0 and info["progress"]["reused"] == 0
    assert not any(c["reused"] for c in candidates)


def test_another_device_measures_again(client):
    agent = register(client)
    _run_search(client, agent)
    other_device = {**FINGERPRINT, "cpu_model": "another cpu"}
    other = register(client, device_class="other-cpu", fingerprint=other_device)
    info, _, jobs = _run_search(client, other, device_class="other-cpu")
    assert jobs > 0 and info["progress"]["reused"] == 0


def test_the_same_device_under_another_name_reuses(client):
    agent = register(client)
    first, _, first_jobs = _run_search(client, agent)
    twin = register(client, device_class="twin", fingerprint={**FINGERPRINT, "hostname": "twin"})
    info, _, jobs = _run_search(client, twin, device_class="twin")
    assert jobs == 0 and info["progress"]["reused"] == first_jobs


def test_busy_measurements_are_flagged_kept_off_the_frontier_and_not_reused(client):
    agent = register(client)
    created = client.post("/api/v1/searches", json=search_request()).json()
    play_agent(client, agent, busy=True)
    url = f"/api/v1/searches/{created['id']}"
    measured = client.get(f"{url}/candidates", params={"status": "measured"}).json()
    assert measured and all(p["busy"] and not p["on_frontier"] for p in measured)
    assert all(p["measurement"]["provenance"]["busy_reasons"] for p in measured)
    assert client.get(f"{url}/pareto").json() == []
    info = client.get(url).json()
    assert info["frontier_size"] == 0
    assert info["noise"]["busy_results"] == len(measured)
    info, _, jobs = _run_search(client, agent)
    assert jobs > 0 and info["progress"]["reused"] == 0


def test_jobs_go_only_to_agents_with_the_runtime_and_device(client):
    client.post(
        "/api/v1/searches",
        json=search_request(measurement={"seq_len": 16, "runtime": "onnxruntime"}),
    )
    torch_only = register(client)
    assert client.post(f"/api/v1/agents/{torch_only}/claim").status_code == 204
    with_ort = register(client, fingerprint={**FINGERPRINT, "runtimes": ["torch", "onnxruntime"]})
    assert client.post(f"/api/v1/agents/{with_ort}/claim").status_code == 200

    client.post(
        "/api/v1/searches",
        json=search_request(device_class="gpu", measurement={"seq_len": 16, "device": "cuda"}),
    )
    no_gpu = register(client, device_class="gpu")
    assert client.post(f"/api/v1/agents/{no_gpu}/claim").status_code == 204
    gpu = register(client, device_class="gpu", fingerprint={**FINGERPRINT, "accelerator": "H200"})
    lease = client.post(f"/api/v1/agents/{gpu}/claim")
    assert lease.status_code == 200 and lease.json()["settings"]["device"] == "cuda"


def test_the_frontier_carries_provenance_and_the_latency_protocol(client):
    agent = register(client)
    _, candidates, _ = _run_search(client, agent)
    measured = [c for c in candidates if c["status"] == "measured"]
    for c in measured:
        m = c["measurement"]
        assert m["provenance"]["cpu_model"] == FINGERPRINT["cpu_model"]
        assert m["latency"]["samples"] == len(m["latency"]["samples_ms"])
        assert m["memory"]["primary"] == "process_peak"
        assert m["latency_ms"] == c["objectives"]["latency_ms"]


@pytest.mark.parametrize(
    "measurement, field, phrase",
    [
        ({"runtime": "tvm"}, "runtime", "'torch' or 'onnxruntime'"),
        ({"runtime": "onnxruntime", "device": "cuda"}, "measurement", "device 'cpu' only"),
        ({"min_samples": 50, "max_samples": 10}, "measurement", "min_samples must be <= max"),
        ({"ci_target": 0}, "ci_target", "greater than 0"),
        ({"max_time_s": 100, "timeout_s": 50}, "measurement", "timeout_s must exceed"),
        ({"confidence": 1.5}, "confidence", "less than or equal to 0.999"),
    ],
)
def test_bad_measurement_settings_get_422_naming_the_field(client, measurement, field, phrase):
    response = client.post("/api/v1/searches", json=search_request(measurement=measurement))
    assert response.status_code == 422
    assert field in response.text and phrase in response.text, response.text


def test_a_database_from_an_older_version_is_refused_with_the_missing_columns(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # the issue-2 layout of the measurements table
        db.execute(
            "CREATE TABLE measurements (id INTEGER PRIMARY KEY, candidate_id INTEGER, "
            "agent_id VARCHAR(64), latency_ms FLOAT)"
        )
    with pytest.raises(SchemaMismatch, match="measurements.*lacks column.*result"):
        create_app(Settings(database_url=f"sqlite:///{path}"))


def test_a_search_the_cache_holds_whole_is_answered_after_its_first_round(client):
    # Told within the create's request, a search of 5,000 that the cache held whole took 16 s
    # to answer (docs/benchmarks.md, "A replayed search's table off the write lock").
    agent = register(client)
    first, first_candidates, _ = _run_search(client, agent)
    assert len({c["generation"] for c in first_candidates}) >= 3
    created = client.post("/api/v1/searches", json=search_request())
    assert created.status_code == 201, created.text
    answer = created.json()
    first_round = answer["progress"]["proposed"]
    assert answer["status"] == "running"
    assert 0 < answer["progress"]["reused"] == first_round < len(first_candidates)
    # ... and the rest told once the answer had gone (the test client waits for that)
    later = client.get(f"/api/v1/searches/{answer['id']}").json()
    assert later["status"] == "finished"
    assert later["progress"]["reused"] == later["progress"]["measured"] == len(first_candidates)


def test_a_search_the_cache_replays_whole_is_told_a_few_at_a_time(client, monkeypatch):
    # One transaction telling the whole replay held every other request up for it: 5,832
    # cached candidates in 2.2 s (docs/benchmarks.md, "Bad neighbours"); one per round still
    # took 60 ms for a generation of 200 ("Generations off the result's transaction").
    monkeypatch.setattr(searches, "REUSED_CHUNK", 2)
    agent = register(client)
    first, first_candidates, _ = _run_search(client, agent)
    generations = len({c["generation"] for c in first_candidates})
    assert generations >= 3
    commits: list[int] = []  # reused candidates each write transaction wrote
    updates: list[str] = []  # the UPDATEs of the write transaction under way, by table
    told_updates: list[list[str]] = []  # of each that told some, the normalisation fixed
    store = client.app.state.services.store

    def update(*args) -> None:  # noqa: ANN002 - the event's arguments
        if args[2].startswith("UPDATE"):
            updates.append(args[2].split()[1])

    class Counted:
        def committing(self, session) -> None:  # noqa: ANN001 - a Session
            reused = select(func.count()).select_from(CandidateRow).where(CandidateRow.reused)
            told_before = sum(commits)
            commits.append(session.scalar(reused) - told_before)  # (its flush runs first)
            if commits[-1] and told_before >= quality.FIRST_RESULTS:
                told_updates.append(sorted(updates))
            updates.clear()

        def committed(self) -> None:
            pass

        def rolled_back(self) -> None:
            updates.clear()

    store.observe(Counted())
    event.listen(store.db, "before_cursor_execute", update)
    looked_up: list[int] = []  # proposals each lookup of the cache asked for
    find_cached = proposals.find_cached

    def counted(session, search, arch_ids):  # noqa: ANN001, ANN202
        looked_up.append(len(arch_ids))
        return find_cached(session, search, arch_ids)

    monkeypatch.setattr(proposals, "find_cached", counted)
    second, second_candidates, jobs = _run_search(client, agent)
    assert jobs == 0 and second["status"] == "finished"
    # a part looks up as many as it writes while they are all cached, not the round's 50
    assert max(looked_up) == 2
    # the search's row, then each generation told (and asked for) two at a time
    assert max(commits) == 2 and sum(commits) == len(first_candidates)
    # each part numbers what it tells by one statement, and writes the search's row once
    # (twice where it finished the search), not one of each per candidate told
    assert told_updates and all(
        u.count("candidates") == 1 and u.count("searches") <= 2 for u in told_updates
    ), told_updates
    assert len(commits) >= 1 + len(first_candidates) / 2
    assert [(c["generation"], c["arch_id"]) for c in second_candidates] == [
        (c["generation"], c["arch_id"]) for c in first_candidates
    ]
    traces = [
        client.get(f"/api/v1/searches/{s['id']}/hypervolume").json()["points"]
        for s in (first, second)
    ]
    volumes = [[(p["results"], p["hypervolume"]) for p in points] for points in traces]
    assert volumes[1] == volumes[0] and len(volumes[0]) == first["progress"]["measured"]
