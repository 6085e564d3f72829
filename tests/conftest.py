import os
import re
import uuid

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from hwnas.testing import postgres
from server.store.database import READ


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


_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def _refuse_writes_in_reads(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001, ARG001 - SQLAlchemy's event signature
    (read,) = READ
    if conn.get_execution_options().get(read) and statement.lstrip().upper().startswith(_WRITES):
        _WRITTEN_IN_READS.append(statement[:200])  # seen at the end, should a server swallow it
        raise AssertionError(f"a write in a read-only session (Store.read): {statement[:200]}")


_WRITTEN_IN_READS: list[str] = []


@pytest.fixture(autouse=True, scope="session")
def reads_do_not_write():
    """Every in-process store of the suite refuses a write in a session of `Store.read`: on
    SQLite it works alone but fails with "database is locked" whenever another connection
    wrote since the read began (server.store.database.READ)."""
    event.listen(Engine, "before_cursor_execute", _refuse_writes_in_reads)
    yield
    event.remove(Engine, "before_cursor_execute", _refuse_writes_in_reads)
    assert not _WRITTEN_IN_READS, f"writes in read-only sessions: {_WRITTEN_IN_READS[:5]}"
