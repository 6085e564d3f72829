import os
import re
import sys
import uuid
from pathlib import Path

import pytest

# factories.py sits next to this file; make it importable as `factories` from any test dir.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def postgres_cluster():
    """One throwaway PostgreSQL cluster for the session (tests/pg.py).

    Skips where PostgreSQL is unavailable, saying why; fails instead under
    HWNAS_REQUIRE_POSTGRES=1 (CI installs PostgreSQL and sets it).
    """
    import pg

    cluster = pg.start_or_skip(require=os.environ.get("HWNAS_REQUIRE_POSTGRES") == "1")
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
