from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from server.app.factory import create_app
from server.settings import Settings, utcnow


class ManualClock:
    """A clock the test moves by hand, for lease expiry."""

    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """db name -> URL of that database, on the store the test is parametrised with: a SQLite
    file, or a database in the session's throwaway PostgreSQL cluster. The same name gives
    the same database, so a test can reopen it (a restart). A PostgreSQL database is dropped
    after the test: a few hundred left to the cluster's stop cost its deletion 30-40 s."""
    if request.param == "sqlite":
        yield lambda name: f"sqlite:///{tmp_path / name}"
        return
    cluster = request.getfixturevalue("postgres_cluster")
    made: dict[str, str] = {}  # name asked -> the database made for it

    def url(name: str) -> str:
        if name not in made:
            stem = re.sub(r"[^a-z0-9_]+", "_", f"{request.node.name}_{name}".lower())[-40:]
            made[name] = f"t_{uuid.uuid4().hex[:8]}_{stem}"
            cluster.create_database(made[name])
        return cluster.url(made[name])

    yield url
    # Fixtures that opened these databases (make_client's apps) depend on this one and are
    # torn down first; FORCE closes what a test left open.
    for database in made.values():
        cluster.drop_database(database)


@pytest.fixture
def make_client(
    database_url: Callable[[str], str], clock: ManualClock
) -> Iterator[Callable[..., TestClient]]:
    """A TestClient on a fresh app over a fresh database (SQLite, then PostgreSQL: every test
    that uses it runs on both stores); calling again with a name reopens that database."""
    clients: list[TestClient] = []

    def make(db_name: str = "hwnas.db", lease_seconds: float = 30.0, **settings: Any) -> TestClient:
        settings = Settings(
            database_url=database_url(db_name), lease_seconds=lease_seconds, clock=clock, **settings
        )
        client = TestClient(create_app(settings))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client) -> TestClient:
    return make_client()
