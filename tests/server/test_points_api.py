"""The compact results table behind the dashboard: rows, frontier, incremental reads."""

from __future__ import annotations

import pytest
from test_noise_api import QUIET, play_with_references, remeasuring_request

from archvocab.summary import spec_summary
from server.services import points
from tests.factories import play_agent, register, search_request, synthetic_measurement


def _finished(client, **overrides):
    search = client.post("/api/v1/searches", json=search_request(**overrides)).json()
    agent = register(client)
    play_agent(client, agent)
    return search["id"]


def test_points_hold_every_result_and_the_frontier_the_pareto_endpoint_gives(client):
    search_id = _finished(client, constraints={"max_latency_ms": 2.5})
    table = client.get(f"/api/v1/searches/{search_id}/points").json()
    candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
    told = [c for c in candidates if c["status"] in ("measured", "failed")]
    assert len(table["rows"]) == len(told) == table["last"] > 0
    cols = table["columns"]
    rows = [dict(zip(cols, r)) for r in table["rows"]]
    assert [r["result"] for r in rows] == list(range(1, len(rows) + 1))
    by_id = {c["arch_id"]: c for c in candidates}
    for row in rows:
        c = by_id[row["arch_id"]]
        assert row["latency_ms"] == c["objectives"]["latency_ms"]
        assert row["memory_mb"] == c["objectives"]["memory_mb"]
        assert row["decoder_params"] == c["objectives"]["decoder_params"]
        assert row["feasible"] == c["feasible"]
        assert row["spec"] == c["spec"]
    pareto = client.get(f"/api/v1/searches/{search_id}/pareto").json()
    assert sorted(table["frontier"]) == sorted(p["arch_id"] for p in pareto)
    # The latency bound keeps someone off the frontier here, or the test proves nothing.
    assert any(r["feasible"] is False for r in rows)


def test_after_returns_only_newer_results_but_the_whole_frontier(client):
    search_id = _finished(client)
    full = client.get(f"/api/v1/searches/{search_id}/points").json()
    part = client.get(f"/api/v1/searches/{search_id}/points", params={"after": 5}).json()
    assert part["after"] == 5 and part["last"] == full["last"]
    assert part["rows"] == full["rows"][5:]
    assert part["frontier"] == full["frontier"]
    none = client.get(f"/api/v1/searches/{search_id}/points", params={"after": full["last"]})
    assert none.json()["rows"] == []


def test_a_running_search_counts_its_queue_and_has_no_rows_yet(client):
    search = client.post("/api/v1/searches", json=search_request()).json()
    table = client.get(f"/api/v1/searches/{search['id']}/points").json()
    assert table["rows"] == [] and table["frontier"] == [] and table["last"] == 0
    assert table["queued"] == search["progress"]["queued"] > 0


def test_a_zero_cost_proxy_outside_the_base_columns_gets_its_own_column(client):
    search_id = _finished(client, objectives=["flops", "latency_ms"])
    table = client.get(f"/api/v1/searches/{search_id}/points").json()
    assert table["columns"][-2:] == ["flops", "spec"]
    candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
    flops = {c["arch_id"]: c["objectives"]["flops"] for c in candidates}
    assert {r[0]: r[-2] for r in table["rows"]} == flops


def test_spec_summary_gives_each_row_its_spec_in_one_line_and_nothing_else_changes(client):
    search_id = _finished(client)
    url = f"/api/v1/searches/{search_id}/points"
    full = client.get(url).json()
    short = client.get(url, params={"spec": "summary"}).json()
    assert full["columns"][-1] == "spec" and short["columns"][:-1] == full["columns"][:-1]
    assert short["columns"][-1] == "summary"
    assert [r[:-1] for r in short["rows"]] == [r[:-1] for r in full["rows"]]
    assert [r[-1] for r in short["rows"]] == [spec_summary(r[-1]) for r in full["rows"]]
    assert all(r[-1].startswith("n_layer=") for r in short["rows"])
    rest = ("rows", "columns")
    assert {k: v for k, v in short.items() if k not in rest} == {
        k: v for k, v in full.items() if k not in rest
    }


def test_bad_cursors_and_unknown_searches_are_refused(client):
    assert client.get("/api/v1/searches/99/points").status_code == 404
    bad = client.get("/api/v1/searches/1/points", params={"after": -1})
    assert bad.status_code == 422 and "after" in bad.json()["message"]
    form = client.get("/api/v1/searches/1/points", params={"spec": "short"})
    assert form.status_code == 422
    assert "spec" in form.json()["message"] and "'summary'" in form.json()["message"]


def test_the_epoch_changes_when_the_normalisation_backfills_earlier_hypervolumes(client):
    # No constraint bounds: the hardware references are fixed from the first 10 results.
    search = client.post("/api/v1/searches", json=search_request()).json()
    agent = register(client)
    play_agent(client, agent, max_jobs=4)
    early = client.get(f"/api/v1/searches/{search['id']}/points").json()
    hv = early["columns"].index("hypervolume")
    assert [r[hv] for r in early["rows"]] == [None] * 4
    play_agent(client, agent)
    late = client.get(f"/api/v1/searches/{search['id']}/points").json()
    assert late["epoch"] != early["epoch"]
    assert all(r[hv] is not None for r in late["rows"])
    again = client.get(f"/api/v1/searches/{search['id']}/points", params={"after": 12}).json()
    assert again["epoch"] == late["epoch"]


def test_tables_of_many_searches_are_evicted_and_rebuilt_the_same(client):
    services = client.app.state.services
    services.results = type(services.results)(keep=1)
    first, second = _finished(client), _finished(client)
    before = client.get(f"/api/v1/searches/{first}/points").json()
    client.get(f"/api/v1/searches/{second}/points")  # evicts the first search's table
    assert len(services.results) == 1
    after = client.get(f"/api/v1/searches/{first}/points").json()
    assert after.pop("frontier_token") != before.pop("frontier_token")  # another table
    assert after == before


def _frontier_state(points: dict) -> dict:
    return {
        "frontier": set(points["frontier"]),
        **{key: points[key] for key in ("intervals", "groups", "estimates")},
        "certain": set(points["certain"]),
    }


def _apply(state: dict, delta: dict) -> None:
    """What a reader does with an answer to `frontier_since`: each changed arch id's entries
    are replaced by the answer's."""
    for arch in (*delta["frontier"], *delta["left"]):
        state["frontier"].discard(arch)
        state["certain"].discard(arch)
        for key in ("intervals", "groups", "estimates"):
            state[key].pop(arch, None)
    state["frontier"].update(delta["frontier"])
    state["certain"].update(delta["certain"])
    for key in ("intervals", "groups", "estimates"):
        state[key].update(delta[key])


def test_a_reader_following_the_frontier_by_its_changes_holds_the_whole_of_it(client):
    request = search_request(budget={"max_evaluations": 40})
    search = client.post("/api/v1/searches", json=request).json()
    url = f"/api/v1/searches/{search['id']}/points"
    agent = register(client)
    first = client.get(url).json()
    state, token, last = _frontier_state(first), first["frontier_token"], first["last"]
    deltas = sent = held = 0
    while play_agent(client, agent, max_jobs=1):
        answer = client.get(url, params={"after": last, "frontier_since": token}).json()
        if answer["frontier_since"] is None:
            state = _frontier_state(answer)
        else:
            assert answer["frontier_since"] == token
            deltas += 1
            sent += len(answer["frontier"]) + len(answer["left"])
            _apply(state, answer)
        token, last = answer["frontier_token"], answer["last"]
        whole = client.get(url).json()
        assert state == _frontier_state(whole)
        held += len(whole["frontier"])
    # (Results that push others off: tests/server/test_result_table.py.)
    assert state["frontier"] and deltas >= 30
    assert sent < held / 2  # what changed, not the whole frontier each time
    unchanged = client.get(url, params={"after": last, "frontier_since": token}).json()
    assert unchanged["frontier_since"] == token and unchanged["frontier"] == []
    assert unchanged["frontier_token"] == token and unchanged["rows"] == []


def test_a_frontier_token_this_table_did_not_give_reads_the_whole_frontier(client):
    search_id = _finished(client)
    url = f"/api/v1/searches/{search_id}/points"
    whole = client.get(url).json()
    for token in ("elsewhere.3", "nonsense", whole["frontier_token"].split(".")[0] + ".999"):
        answer = client.get(url, params={"frontier_since": token}).json()
        assert answer["frontier_since"] is None and answer["frontier"] == whole["frontier"]
    too_long = client.get(url, params={"frontier_since": "x" * 65})
    assert too_long.status_code == 422 and "frontier_since" in too_long.json()["message"]


def test_nominal_intervals_describe_only_the_nominal_frontier_points(client):
    request = search_request(budget={"max_evaluations": 40})
    search = client.post("/api/v1/searches", json=request).json()
    url = f"/api/v1/searches/{search['id']}/points"
    agent = register(client)
    first = client.get(url, params={"intervals": "nominal"}).json()
    state, token, deltas = _frontier_state(first), first["frontier_token"], 0
    while play_agent(client, agent, max_jobs=1):
        answer = client.get(url, params={"intervals": "nominal", "frontier_since": token}).json()
        if answer["frontier_since"] is None:
            state = _frontier_state(answer)
        else:
            deltas += 1
            _apply(state, answer)
        token = answer["frontier_token"]
    whole = client.get(url).json()
    nominal = client.get(url, params={"intervals": "nominal"}).json()
    # A reader following the frontier by its changes holds what a whole read gives.
    assert state == _frontier_state(nominal)
    kept = {a for a, group in whole["groups"].items() if group == a}
    assert 0 < len(kept) < len(whole["frontier"]), "members within noise of another, or no test"
    assert nominal["frontier"] == whole["frontier"] and nominal["certain"] == whole["certain"]
    assert nominal["groups"] == {a: a for a in kept}
    assert nominal["intervals"] == {a: v for a, v in whole["intervals"].items() if a in kept}
    assert nominal["rows"] == whole["rows"] and deltas > 0
    bad = client.get(url, params={"intervals": "some"})
    assert bad.status_code == 422
    assert "intervals" in bad.json()["message"] and "'nominal'" in bad.json()["message"]


def test_rows_read_from_kept_blocks_are_the_rows(client, monkeypatch):
    search_id = _finished(client, budget={"max_evaluations": 14})
    url = f"/api/v1/searches/{search_id}/points"
    monkeypatch.setattr(points, "ROW_BLOCK", 10**6)  # no whole block: every row encoded anew
    plain = client.get(url, params={"spec": "summary"}).json()
    assert len(plain["rows"]) >= 10
    monkeypatch.setattr(points, "ROW_BLOCK", 3)
    for _ in range(2):  # the blocks made, then the blocks kept
        for after in range(plain["last"] + 1):
            answer = client.get(url, params={"spec": "summary", "after": after}).json()
            assert answer["rows"] == [r for r in plain["rows"] if r[1] > after]
    assert client.get(url, params={"spec": "summary"}).json() == plain
    full = client.get(url).json()  # the other form is kept apart
    assert [r[-1] for r in plain["rows"]] == [spec_summary(r[-1]) for r in full["rows"]]


def _slower(measurement: dict, factor: float) -> dict:
    """`measurement` with every latency figure `factor` times larger."""
    latency = measurement["latency"]
    for key in ("median_ms", "p90_ms", "min_ms", "iqr_ms", "ci_low_ms", "ci_high_ms", "timed_s"):
        latency[key] *= factor
    latency["samples_ms"] = [s * factor for s in latency["samples_ms"]]
    measurement["latency_ms"] *= factor
    return measurement


def test_the_points_give_each_re_measured_result_the_estimate_the_candidates_give(client):
    """The dashboard's table and plots show a re-measured result at its best estimate, as
    /candidates does (off the frontier too: tests/server/test_result_table.py)."""
    search_id = client.post("/api/v1/searches", json=remeasuring_request()).json()["id"]
    agent = register(client)
    play_with_references(client, agent, QUIET, max_jobs=24)
    url = f"/api/v1/searches/{search_id}"
    first = client.get(f"{url}/points").json()
    state, token = _frontier_state(first), first["frontier_token"]
    again: list[str] = []
    while (claimed := client.post(f"/api/v1/agents/{agent}/claim")).status_code == 200:
        lease = claimed.json()
        again.append(lease["arch_id"])
        # The device turns out slower the second time: the mean is not the first value.
        measurement = _slower(synthetic_measurement(lease["spec"]), 1.2)
        result = {"agent_id": agent, "lease_id": lease["lease_id"], "measurement": measurement}
        assert client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=result).is_success
        # A reader following the changes holds what a whole read gives.
        answer = client.get(f"{url}/points", params={"frontier_since": token}).json()
        if answer["frontier_since"] is None:
            state = _frontier_state(answer)
        else:
            _apply(state, answer)
        token = answer["frontier_token"]
        assert state == _frontier_state(client.get(f"{url}/points").json())
    assert client.get(url).json()["status"] == "finished" and again
    points = client.get(f"{url}/points").json()
    candidates = {c["arch_id"]: c for c in client.get(f"{url}/candidates").json()}
    assert set(points["estimates"]) == set(again)
    for arch_id, estimate in points["estimates"].items():
        c = candidates[arch_id]
        assert estimate["latency_ms"] == pytest.approx(c["objectives"]["latency_ms"])
        assert estimate["memory_mb"] == pytest.approx(c["objectives"]["memory_mb"])
        assert estimate["latency_ms"] > c["measurement"]["latency_ms"] * 1.05  # the mean


def test_points_come_gzipped_to_a_client_that_takes_gzip_and_plain_to_one_that_does_not(client):
    search_id = _finished(client, budget={"max_evaluations": 14})
    url = f"/api/v1/searches/{search_id}/points"
    plain = client.get(url, headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers and len(plain.content) > 4096
    assert plain.headers["vary"] == "Accept-Encoding"
    for _ in range(2):  # the pieces made, then the pieces kept
        zipped = client.get(url, headers={"accept-encoding": "gzip"})
        assert zipped.headers["content-encoding"] == "gzip"
        assert zipped.headers["vary"] == "Accept-Encoding"
        assert zipped.num_bytes_downloaded < len(plain.content) / 2
        assert zipped.json() == plain.json()
    small = client.get(url, params={"after": 10**6}, headers={"accept-encoding": "gzip"})
    assert "content-encoding" not in small.headers and small.json()["rows"] == []
