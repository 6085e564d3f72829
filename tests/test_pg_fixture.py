"""The PostgreSQL test fixtures (hwnas.testing.postgres, tests/conftest.py) and the claim mechanism.

A real cluster, started once per session: each test gets an empty database of its own, and
`FOR UPDATE SKIP LOCKED` hands one waiting row to each of several concurrent claimers, which is
how the server claims jobs on PostgreSQL.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from hwnas.testing import postgres as pg

CLAIM = sa.text(
    "UPDATE jobs SET state = 'running', owner = :owner WHERE id = ("
    " SELECT id FROM jobs WHERE state = 'waiting' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
    ") RETURNING id"
)


@pytest.fixture
def engine(postgres_url: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(postgres_url)
    yield engine
    engine.dispose()


def add_jobs(engine: sa.Engine, n: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            sa.text("CREATE TABLE jobs (id int PRIMARY KEY, state text NOT NULL, owner text)")
        )
        conn.execute(
            sa.text("INSERT INTO jobs (id, state) VALUES (:id, 'waiting')"),
            [{"id": i} for i in range(1, n + 1)],
        )


def test_url_is_a_psycopg_url_on_loopback(postgres_url: str) -> None:
    url = sa.make_url(postgres_url)
    assert (url.drivername, url.host, url.username) == (
        "postgresql+psycopg",
        "127.0.0.1",
        "postgres",
    )
    assert url.database.startswith("t_test_url_is_a_psycopg_url")


def test_connects_to_postgresql_and_creates_a_table(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        assert conn.execute(sa.text("SELECT version()")).scalar().startswith("PostgreSQL ")
        conn.execute(sa.text("CREATE TABLE t (id serial PRIMARY KEY, name text)"))
        conn.execute(sa.text("INSERT INTO t (name) VALUES ('a'), ('b')"))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT name FROM t ORDER BY id")).scalars().all() == ["a", "b"]
        assert conn.execute(sa.text("SHOW server_encoding")).scalar() == "UTF8"
        assert int(conn.execute(sa.text("SHOW max_connections")).scalar()) >= 400


@pytest.mark.parametrize("run", [1, 2])
def test_each_test_gets_an_empty_database(engine: sa.Engine, run: int) -> None:
    # Both runs create the same table: the second would fail on a reused database.
    with engine.begin() as conn:
        tables = sa.inspect(conn).get_table_names()
        assert tables == [], f"run {run} found {tables} left by another test"
        conn.execute(sa.text("CREATE TABLE leftover (id int)"))


def test_two_databases_are_isolated(postgres_cluster: pg.Cluster, postgres_url: str) -> None:
    other_url = postgres_cluster.create_database("t_isolation_other")
    assert other_url != postgres_url
    first, other = sa.create_engine(postgres_url), sa.create_engine(other_url)
    try:
        with first.begin() as conn:
            conn.execute(sa.text("CREATE TABLE only_here (id int)"))
        assert sa.inspect(first).get_table_names() == ["only_here"]
        assert sa.inspect(other).get_table_names() == []
    finally:
        first.dispose()
        other.dispose()
        postgres_cluster.drop_database("t_isolation_other")


def test_create_database_replaces_one_of_the_same_name(postgres_cluster: pg.Cluster) -> None:
    url = postgres_cluster.create_database("t_replaced")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE old (id int)"))
        engine.dispose()
        assert postgres_cluster.create_database("t_replaced") == url
        assert sa.inspect(engine).get_table_names() == []
    finally:
        engine.dispose()
        postgres_cluster.drop_database("t_replaced")


def test_skip_locked_hands_each_claimer_a_different_row(engine: sa.Engine) -> None:
    add_jobs(engine, 3)
    with engine.connect() as a, engine.connect() as b:
        # A claimer that waited for the other's lock would fail here instead of hanging.
        b.execute(sa.text("SET lock_timeout = '200ms'"))
        assert a.execute(CLAIM, {"owner": "a"}).scalar() == 1  # row 1 stays locked: no commit
        assert b.execute(CLAIM, {"owner": "b"}).scalar() == 2  # skips it instead of waiting
        a.commit()
        b.commit()
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, state, owner FROM jobs ORDER BY id")).all()
    assert [tuple(r) for r in rows] == [
        (1, "running", "a"),
        (2, "running", "b"),
        (3, "waiting", None),
    ]


def test_without_skip_locked_a_claimer_waits_for_the_lock(engine: sa.Engine) -> None:
    # The control for the test above: the row really is locked while A's claim is open.
    add_jobs(engine, 1)
    with engine.connect() as a, engine.connect() as b:
        a.execute(CLAIM, {"owner": "a"})
        b.execute(sa.text("SET lock_timeout = '200ms'"))
        with pytest.raises(sa.exc.OperationalError, match="lock timeout"):
            b.execute(sa.text("SELECT id FROM jobs WHERE id = 1 FOR UPDATE"))
        b.rollback()
        a.rollback()


def test_concurrent_claimers_take_every_job_exactly_once(engine: sa.Engine) -> None:
    jobs, workers = 60, 8
    add_jobs(engine, jobs)
    claimed: dict[str, list[int]] = {f"w{i}": [] for i in range(workers)}

    def claim_until_empty(owner: str) -> None:
        with engine.connect() as conn:
            while (job := conn.execute(CLAIM, {"owner": owner}).scalar()) is not None:
                conn.commit()
                claimed[owner].append(job)
            conn.commit()

    threads = [threading.Thread(target=claim_until_empty, args=(w,)) for w in claimed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    every = sorted(job for jobs_of in claimed.values() for job in jobs_of)
    assert every == list(range(1, jobs + 1))
    with engine.connect() as conn:
        owners = dict(conn.execute(sa.text("SELECT id, owner FROM jobs")).all())
    assert all(owners[job] == owner for owner, mine in claimed.items() for job in mine)


def test_stop_removes_the_cluster_and_is_idempotent(postgres_cluster: pg.Cluster) -> None:
    cluster = pg.start()  # a second cluster beside the session's, on a port of its own
    assert cluster.port != postgres_cluster.port
    assert cluster.start_seconds < 30
    with cluster.connect() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    cluster.stop()
    cluster.stop()
    assert not cluster.root.exists()


def test_missing_binaries_give_a_reason_that_says_how_to_install(tmp_path: Path) -> None:
    (tmp_path / "15" / "bin").mkdir(parents=True)  # a bin dir without the server in it
    with pytest.raises(pg.PostgresUnavailable, match="initdb.*apt-get install postgresql"):
        pg.find_bindir(roots=(str(tmp_path),), pg_config=None, path="")


def test_unavailable_postgres_skips_or_fails_when_required(monkeypatch) -> None:
    def unavailable() -> pg.Cluster:
        raise pg.PostgresUnavailable("no initdb")

    monkeypatch.setattr(pg, "start", unavailable)
    with pytest.raises(pytest.skip.Exception, match="no initdb"):
        pg.start_or_skip(require=False)
    with pytest.raises(pytest.fail.Exception, match="HWNAS_REQUIRE_POSTGRES=1.*no initdb"):
        pg.start_or_skip(require=True)


def test_highest_version_is_preferred(tmp_path: Path) -> None:
    for version in ("9.6", "15", "16"):
        bindir = tmp_path / version / "bin"
        bindir.mkdir(parents=True)
        for tool in ("initdb", "pg_ctl", "postgres"):
            (bindir / tool).touch(mode=0o755)
    assert (
        pg.find_bindir(roots=(str(tmp_path),), pg_config=None, path="") == tmp_path / "16" / "bin"
    )
