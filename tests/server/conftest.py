from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from server.app import create_app
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


@pytest.fixture
def make_client(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., TestClient]]:
    """A TestClient on a fresh app over a SQLite file; calling again reopens the same file."""
    clients: list[TestClient] = []

    def make(db_name: str = "hwnas.db", lease_seconds: float = 30.0) -> TestClient:
        settings = Settings(
            database_url=f"sqlite:///{tmp_path / db_name}", lease_seconds=lease_seconds, clock=clock
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
