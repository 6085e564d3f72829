"""Choosing one architecture: /pareto under bounds, in an order, cut to a limit, and /pick,
each checked against a brute-force computation over /candidates; the refusals name the
parameter and the allowed values."""

from __future__ import annotations

import csv
import io
import statistics
from typing import Any

import pytest
from test_noise_api import QUIET, play_with_references

from tests.factories import play_agent, register, search_request

OPS = {"min": lambda v, b: v >= b, "max": lambda v, b: v <= b}
MINIMISED = ("latency_ms", "memory_mb")


def measured_search(client, **overrides: Any) -> tuple[int, list[dict]]:
    """A search of 24 synthetic results: its id and its candidates."""
    request = search_request(budget={"max_evaluations": 24}, **overrides)
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    play_agent(client, register(client))
    return search_id, client.get(f"/api/v1/searches/{search_id}/candidates").json()


def value(point: dict, objective: str, side: str, bounds_on: str) -> float:
    if bounds_on == "interval" and objective in point["intervals"]:
        return point["intervals"][objective][1 if side == "max" else 0]
    return point["objectives"][objective]


def brute_force(candidates: list[dict], params: dict[str, Any]) -> list[str]:
    """The frontier's arch ids under `params`, computed from /candidates alone."""
    on = params.get("bounds_on", "value")
    kept = [c for c in candidates if c["on_frontier"]]
    for name, bound in params.items():
        side, _, objective = name.partition("_")
        if side in OPS and objective:
            kept = [c for c in kept if OPS[side](value(c, objective, side, on), bound)]
    order = params.get("order_by")
    if order:
        desc = params.get("desc", order not in MINIMISED)
        kept.sort(key=lambda c: ((-1 if desc else 1) * c["objectives"][order], c["arch_id"]))
    start = params.get("offset", 0)
    end = None if params.get("limit") is None else start + params["limit"]
    return [c["arch_id"] for c in kept][start:end]


def spot(candidates: list[dict], what: str) -> float:
    """A bound from the frontier's values: 'latency_ms' its median, 'latency_ms:max' its
    largest."""
    objective, _, how = what.partition(":")
    values = [c["objectives"][objective] for c in candidates if c["on_frontier"]]
    return max(values) if how == "max" else statistics.median(values)


QUERIES = [
    {"order_by": "latency_ms"},
    {"order_by": "decoder_params", "limit": 3},
    {"order_by": "latency_ms", "desc": True, "limit": 4},
    {"max_latency_ms": "latency_ms"},
    {"min_decoder_params": "decoder_params", "order_by": "memory_mb"},
    {
        "min_decoder_params": "decoder_params",
        "max_latency_ms": "latency_ms",
        "order_by": "latency_ms",
    },
    {"max_latency_ms": "latency_ms:max", "bounds_on": "interval", "order_by": "total_params"},
    {"min_latency_ms": "latency_ms", "max_memory_mb": "memory_mb", "limit": 2},
    {"order_by": "latency_ms", "offset": 2, "limit": 3},
    {"order_by": "memory_mb", "offset": 1},
]


@pytest.mark.parametrize("query", QUERIES)
def test_bounds_order_and_limit_match_a_brute_force_over_the_candidates(client, query):
    search_id, candidates = measured_search(client)
    # A bound is set from the frontier's values (`spot`): it cuts.
    bound = ("min_", "max_")
    params = {k: spot(candidates, v) if k.startswith(bound) else v for k, v in query.items()}
    expected = brute_force(candidates, params)
    frontier = [c for c in candidates if c["on_frontier"]]
    assert expected, "the query keeps some points"
    if any(k.startswith(bound) for k in params) or "limit" in params or "offset" in params:
        assert len(expected) < len(frontier), "and leaves some out"

    got = client.get(f"/api/v1/searches/{search_id}/pareto", params=params)

    assert got.status_code == 200, got.text
    assert [p["arch_id"] for p in got.json()] == expected
    as_csv = client.get(f"/api/v1/searches/{search_id}/pareto", params={**params, "format": "csv"})
    assert [row["arch_id"] for row in csv.DictReader(io.StringIO(as_csv.text))] == expected


def test_an_order_read_while_the_search_runs_follows_its_frontier(client):
    """The ranking is kept per state of the frontier: pages read before and after more
    results each match the frontier of their time."""
    request = search_request(budget={"max_evaluations": 24})
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    agent = register(client)
    params = {"order_by": "latency_ms", "offset": 1, "limit": 3}
    for jobs in (8, 16):  # 8 results, then all 24
        play_agent(client, agent, max_jobs=jobs)
        candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
        for _ in range(2):  # the second read is answered from the kept ranking
            got = client.get(f"/api/v1/searches/{search_id}/pareto", params=params)
            assert [p["arch_id"] for p in got.json()] == brute_force(candidates, params)
        order = {"order_by": "latency_ms"}
        pick = client.get(f"/api/v1/searches/{search_id}/pick", params=order)
        assert pick.json()["pick"]["arch_id"] == brute_force(candidates, order)[0]


def test_interval_bounds_keep_fewer_points_than_value_bounds(client):
    search_id, candidates = measured_search(client)
    bound = {"max_latency_ms": spot(candidates, "latency_ms:max")}
    url = f"/api/v1/searches/{search_id}/pareto"
    by_value = client.get(url, params=bound).json()
    by_interval = client.get(url, params={**bound, "bounds_on": "interval"}).json()
    assert len(by_value) == sum(c["on_frontier"] for c in candidates)
    assert by_interval and {p["arch_id"] for p in by_interval} < {p["arch_id"] for p in by_value}
    assert all(p["intervals"]["latency_ms"][1] <= bound["max_latency_ms"] for p in by_interval)


def test_pick_is_the_best_point_under_the_bounds_with_its_neighbours(client):
    search_id, candidates = measured_search(client)
    floor = spot(candidates, "decoder_params")
    params = {"min_decoder_params": floor, "order_by": "latency_ms"}
    ranked = brute_force(candidates, {"order_by": "latency_ms"})  # the whole frontier, in order
    meeting = brute_force(candidates, params)

    got = client.get(f"/api/v1/searches/{search_id}/pick", params=params)

    assert got.status_code == 200, got.text
    pick = got.json()
    assert pick["pick"]["arch_id"] == meeting[0]
    assert (pick["order_by"], pick["descending"]) == ("latency_ms", False)
    assert pick["bounds"] == {"min_decoder_params": floor}
    assert (pick["meeting"], pick["frontier_size"]) == (len(meeting), len(ranked))
    at = ranked.index(meeting[0])
    assert at > 0, "faster points fail the bound: the pick has neighbours before it"
    near = [i for i in range(max(0, at - 2), min(len(ranked), at + 3)) if i != at]
    assert [n["offset"] for n in pick["neighbours"]] == [i - at for i in near]
    assert [n["point"]["arch_id"] for n in pick["neighbours"]] == [ranked[i] for i in near]
    by_id = {c["arch_id"]: c for c in candidates}
    for n in pick["neighbours"]:
        low = by_id[n["point"]["arch_id"]]["objectives"]["decoder_params"] < floor
        assert n["fails"] == (["min_decoder_params"] if low else [])
        assert n["point"]["intervals"]["latency_ms"] and n["point"]["frontier_certain"] is not None
    assert all(n["fails"] for n in pick["neighbours"] if n["offset"] < 0)


def test_a_maximised_order_is_descending_unless_told_otherwise(client):
    search_id, candidates = measured_search(client)
    url = f"/api/v1/searches/{search_id}/pick"
    most = client.get(url, params={"order_by": "decoder_params", "neighbours": 0}).json()
    least = client.get(url, params={"order_by": "decoder_params", "desc": False}).json()
    assert most["descending"] and most["neighbours"] == []
    assert most["pick"]["arch_id"] == brute_force(candidates, {"order_by": "decoder_params"})[0]
    expected = brute_force(candidates, {"order_by": "decoder_params", "desc": False})[0]
    assert least["pick"]["arch_id"] == expected


def test_pick_lists_the_points_of_its_frontier_group(client):
    # As tests/server/test_noise_api.py: two objectives at 80% leave points in shared groups.
    request = search_request(
        objectives=["decoder_params", "latency_ms"],
        budget={"max_evaluations": 24},
        noise={"confidence": 0.8},
    )
    search_id = client.post("/api/v1/searches", json=request).json()["id"]
    play_with_references(client, register(client), QUIET)
    front = client.get(f"/api/v1/searches/{search_id}/pareto").json()
    groups: dict[str, list[str]] = {}
    for p in front:
        groups.setdefault(p["frontier_group"], []).append(p["arch_id"])
    group = max(groups.values(), key=len)
    assert len(group) > 1, "some points cannot be told apart"
    member = next(p for p in front if p["arch_id"] == group[-1])
    latency = member["objectives"]["latency_ms"]  # a bound to exactly it picks it
    params = {"order_by": "latency_ms", "min_latency_ms": latency, "max_latency_ms": latency}

    pick = client.get(f"/api/v1/searches/{search_id}/pick", params=params).json()

    assert pick["pick"]["arch_id"] == member["arch_id"]
    assert sorted(g["point"]["arch_id"] for g in pick["group"]) == sorted(group[:-1])
    for g in pick["group"]:
        assert g["point"]["frontier_group"] == member["frontier_group"]
        assert isinstance(g["point"]["frontier_certain"], bool)


def test_nothing_meeting_the_bounds_names_the_bound_and_the_closest_point(client):
    search_id, candidates = measured_search(client)
    front = [c for c in candidates if c["on_frontier"]]
    fastest = min(front, key=lambda c: c["objectives"]["latency_ms"])
    url = f"/api/v1/searches/{search_id}/pick"

    alone = client.get(url, params={"order_by": "latency_ms", "max_latency_ms": 0.01})

    assert alone.status_code == 404
    detail = alone.json()["detail"]
    assert detail.startswith("max_latency_ms: no frontier point has latency_ms <= 0.01;")
    lowest = f"{fastest['objectives']['latency_ms']:.6g}"
    assert f"the lowest latency_ms on the frontier is {lowest} ({fastest['arch_id']})" in detail

    # Each bound alone keeps some points, together none: the second is named, with the
    # closest point among those the first keeps.
    big = max(front, key=lambda c: c["objectives"]["decoder_params"])
    both = {
        "order_by": "latency_ms",
        "min_decoder_params": big["objectives"]["decoder_params"],
        "max_latency_ms": fastest["objectives"]["latency_ms"],
    }
    together = client.get(url, params=both)
    assert together.status_code == 404
    detail = together.json()["detail"]
    assert detail.startswith("max_latency_ms: no frontier point has latency_ms <=")
    kept = [c for c in front if c["objectives"]["decoder_params"] >= both["min_decoder_params"]]
    closest = min(kept, key=lambda c: c["objectives"]["latency_ms"])
    assert f"of the {len(kept)} with decoder_params >=" in detail and closest["arch_id"] in detail
    # /pareto answers an empty list instead
    assert client.get(f"/api/v1/searches/{search_id}/pareto", params=both).json() == []


def test_a_search_with_no_frontier_yet_has_no_pick(client):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    got = client.get(f"/api/v1/searches/{search_id}/pick", params={"order_by": "latency_ms"})
    assert got.status_code == 404 and "nothing measured" in got.json()["detail"]


@pytest.mark.parametrize(
    ("route", "params", "field", "says"),
    [
        ("pareto", {"max_latency": 3}, "max_latency", "'latency' is not an objective"),
        ("pareto", {"sort": "latency_ms"}, "sort", "unknown query parameter; allowed: order_by"),
        ("pick", {"order_by": "latency_ms", "limit": 1}, "limit", "allowed: order_by, desc"),
        ("pick", {"order_by": "latency_ms", "offset": 1}, "offset", "allowed: order_by, desc"),
        ("pareto", {"min_snip": 0}, "min_snip", "this search has no snip values"),
        ("pareto", {"order_by": "snip"}, "order_by", "not an objective of this search"),
        ("pick", {}, "order_by", "a pick needs an order: one of decoder_params"),
        ("pareto", {"min_memory_mb": 9, "max_memory_mb": 3}, "max_memory_mb", "below min_"),
    ],
)
def test_refusals_name_the_parameter_and_the_allowed_values(client, route, params, field, says):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    got = client.get(f"/api/v1/searches/{search_id}/{route}", params=params)
    assert got.status_code == 422, got.text
    assert got.json()["field"] == field and says in got.json()["detail"]
    if "allowed" in says or "objective" in says:
        assert "decoder_params, total_params, latency_ms, memory_mb" in got.json()["detail"]


@pytest.mark.parametrize(
    ("params", "field", "says"),
    [
        ({"max_latency_ms": "nan"}, "max_latency_ms", "finite number"),
        ({"max_latency_ms": "fast"}, "max_latency_ms", "valid number"),
        ({"bounds_on": "ends"}, "bounds_on", "'value' or 'interval'"),
        ({"format": "xml"}, "format", "'json' or 'csv'"),
        ({"limit": 0}, "limit", "greater than or equal to 1"),
        ({"offset": -1}, "offset", "greater than or equal to 0"),
        ({"desc": "maybe"}, "desc", "boolean"),
    ],
)
def test_malformed_values_are_422_naming_the_field(client, params, field, says):
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    got = client.get(f"/api/v1/searches/{search_id}/pareto", params=params)
    assert got.status_code == 422
    assert got.json()["message"].startswith(f"query.{field}:") and says in got.json()["message"]
