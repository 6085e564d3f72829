import os
import re
import uuid

import pytest

from hwnas.testing import postgres


@pytest.fixture(scope="session")
def postgres_cluster():
    """One throwaway PostgreSQL cluster for the session (hwnas.testing.postgres).

    Skips where PostgreSQL is unavailable, saying why; fails instead under
    HWNAS_REQUIRE_POSTGRES=1 (CI installs PostgreSQL and sets it).
    """
    cluster = postgres.start_or_skip(require=os.environ.get("HWNAS_REQUIRE_POSTGRES") == "1")
    yield cluster
    cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster, request) -> str:
    """SQLAlchemy URL of a fresh, empty database of its own for this test; dropped after it."""
    # Named after the test, for a reader of the server's log; the suffix keeps it unique.
    stem = re.sub(r"[^a-z0-9_]+", "_", request.node.name.lower())[:40]
    name = f"t_{stem}_{uuid.uuid4().hex[:8]}"
    url = postgres_cluster.create_database(name)
    yield url
    postgres_cluster.drop_database(name)
