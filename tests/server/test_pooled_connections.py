"""PostgreSQL's pooled connections after the database dropped them (a restart): one that
rested is pinged and replaced before a request uses it; one used lately is trusted, and if it
died after all, its request fails and the pool replaces every connection it held."""

from __future__ import annotations

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from server.app.factory import create_app
from server.settings import Settings
from server.store import database
from tests.factories import register


@pytest.fixture
def served(postgres_url):
    with TestClient(
        create_app(Settings(database_url=postgres_url)), raise_server_exceptions=False
    ) as client:
        yield client


def _drop_connections(postgres_url: str) -> int:
    """End every other session on the database, as a restart of PostgreSQL does."""
    url = make_url(postgres_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as conn:
        ended = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return ended[0]


def test_a_connection_that_died_while_it_rested_is_replaced_before_a_request_uses_it(
    served, postgres_url, monkeypatch
):
    agent = register(served)
    assert served.get("/api/v1/agents").status_code == 200
    assert _drop_connections(postgres_url) >= 1
    monkeypatch.setattr(database, "PING_AFTER_REST_S", 0.0)  # every connection rested
    assert served.get("/api/v1/agents").status_code == 200
    assert served.post(f"/api/v1/agents/{agent}/claim").status_code == 204


def test_a_connection_used_lately_is_not_pinged_and_one_failed_request_replaces_the_pool(
    served, postgres_url, monkeypatch
):
    agent = register(served)
    assert served.get("/api/v1/agents").status_code == 200
    monkeypatch.setattr(database, "PING_AFTER_REST_S", 3600.0)  # every connection used lately
    assert _drop_connections(postgres_url) >= 1
    assert served.get("/api/v1/agents").status_code == 500  # its statement found it dead
    assert served.get("/api/v1/agents").status_code == 200
    assert served.post(f"/api/v1/agents/{agent}/claim").status_code == 204
    [view] = served.get("/api/v1/agents").json()
    assert view["agent_id"] == agent
