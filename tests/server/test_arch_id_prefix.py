"""Any unique prefix of an architecture id (8 characters or more: what the demo and the
dashboard show) names it on every route that takes one (server.services.arch_ids)."""

from __future__ import annotations

import pytest

from server.store.rows import ArchitectureRow
from tests.factories import play_agent, register, search_request

ROUTES = ["/api/v1/architectures/{}", "/api/v1/architectures/{}/export"]


def measured_arch(client) -> str:
    client.post("/api/v1/searches", json=search_request())
    play_agent(client, register(client))
    return client.get("/api/v1/searches/1/pareto").json()[0]["arch_id"]


def twins(client, arch_id: str, prefix: str) -> list[str]:
    """Two stored architectures whose ids start with `prefix` (copies of `arch_id`'s row)."""
    ids = [prefix + "0" * (16 - len(prefix)), prefix + "1" * (16 - len(prefix))]
    with client.app.state.store.write() as session:
        row = session.get(ArchitectureRow, arch_id)
        for twin in ids:
            session.add(
                ArchitectureRow(
                    arch_id=twin,
                    spec=row.spec,
                    decoder_params=row.decoder_params,
                    total_params=row.total_params,
                )
            )
    return ids


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("length", [8, 12, 16])  # the demo shows 8, the dashboard 12
def test_a_unique_prefix_names_the_architecture(client, route, length):
    arch_id = measured_arch(client)
    got = client.get(route.format(arch_id[:length]))
    assert got.status_code == 200, got.text
    assert got.json()["arch_id"] == arch_id


def test_an_exported_file_is_named_by_the_full_id(client):
    arch_id = measured_arch(client)
    got = client.get(ROUTES[1].format(arch_id[:8]), params={"format": "torch"})
    assert got.status_code == 200
    assert got.headers["content-disposition"] == f'attachment; filename="hwnas-{arch_id}.py"'
    assert arch_id in got.text


@pytest.mark.parametrize("route", ROUTES)
def test_an_ambiguous_prefix_is_409_listing_the_candidates(client, route):
    arch_id = measured_arch(client)
    ids = twins(client, arch_id, "abcdef01")
    got = client.get(route.format("abcdef01"))
    assert got.status_code == 409
    detail = got.json()["detail"]
    assert "ambiguous: 2 architectures start with it" in detail
    assert all(i in detail for i in ids) and "give more characters" in detail
    # one more character tells them apart
    assert client.get(route.format(ids[1][:9])).json()["arch_id"] == ids[1]


@pytest.mark.parametrize("route", ROUTES)
def test_a_prefix_shorter_than_8_is_422(client, route):
    arch_id = measured_arch(client)
    got = client.get(route.format(arch_id[:7]))
    assert got.status_code == 422
    assert got.json()["field"] == "arch_id"
    assert "7 characters: give the full id or a prefix of at least 8" in got.json()["detail"]


@pytest.mark.parametrize("route", ROUTES)
def test_a_prefix_nothing_starts_with_is_404(client, route):
    measured_arch(client)
    got = client.get(route.format("ffffffffffff"))
    assert got.status_code == 404 and got.json()["resource"] == "architecture"


ALLOWED = ["none", "format, seq_len, batch_size"]  # query parameters of ROUTES


@pytest.mark.parametrize(("route", "allowed"), list(zip(ROUTES, ALLOWED, strict=True)))
def test_an_unknown_query_parameter_is_422_listing_the_allowed_ones(client, route, allowed):
    arch_id = measured_arch(client)
    got = client.get(route.format(arch_id), params={"seqlen": 32})
    assert got.status_code == 422
    assert got.json() == {
        "detail": f"seqlen: unknown query parameter; allowed: {allowed}",
        "field": "seqlen",
    }
