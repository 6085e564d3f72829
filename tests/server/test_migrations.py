"""Schema migrations (Alembic) on SQLite and PostgreSQL: the models and the migrations agree,
a hwnas 0.1 database is upgraded in place with its data, and every step can be undone."""

from __future__ import annotations

import json

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, inspect, text

from server.app.factory import create_app
from server.settings import Settings
from server.store.rows import Base
from server.store.schema import alembic_config, current_revision, head_revision, migrate
from tests.factories import play_agent, register, search_request


def test_the_migrations_build_exactly_the_models(database_url):
    engine = create_engine(database_url("models.db"))
    migrate(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
        assert current_revision(connection) == head_revision()
    engine.dispose()


def test_a_database_from_hwnas_0_1_is_upgraded_with_its_data(database_url, clock):
    url = database_url("old.db")
    # What 0.1 made: the tables of revision 0001, by create_all, so no alembic_version.
    old = create_engine(url)
    migrate(old, "0001")
    with old.begin() as connection:
        connection.execute(text("DROP TABLE alembic_version"))
    old.dispose()
    with TestClient(create_app(Settings(database_url=url, clock=clock))) as client:
        created = client.post("/api/v1/searches", json=search_request()).json()
        assert play_agent(client, register(client)) == 12
    # Written by the new version on the upgraded schema, read back by another process.
    with TestClient(create_app(Settings(database_url=url, clock=clock))) as again:
        info = again.get(f"/api/v1/searches/{created['id']}").json()
        assert info["status"] == "finished" and info["progress"]["measured"] == 12
    engine = create_engine(url)
    with engine.connect() as connection:
        assert current_revision(connection) == head_revision()
        assert {"tokens", "leases"} <= set(inspect(connection).get_table_names())
    engine.dispose()


def test_every_migration_can_be_undone_and_redone(database_url, clock):
    url = database_url("roundtrip.db")
    with TestClient(create_app(Settings(database_url=url, clock=clock))) as client:
        client.post("/api/v1/searches", json=search_request())
        play_agent(client, register(client), max_jobs=3)
    engine = create_engine(url)
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0001")
        assert "tokens" not in inspect(connection).get_table_names()
    migrate(engine)
    with engine.connect() as connection:
        assert current_revision(connection) == head_revision()
        measured = connection.execute(
            text("SELECT count(*) FROM candidates WHERE status = 'measured'")
        ).scalar()
    engine.dispose()
    assert measured == 3


def test_hwnas_searches_from_before_the_initial_design_setting_resume_as_they_ran(
    database_url, clock
):
    url = database_url("designs.db")
    with TestClient(create_app(Settings(database_url=url, clock=clock))) as client:
        hwnas = client.post("/api/v1/searches", json=search_request(strategy="hwnas")).json()
        lts = client.post("/api/v1/searches", json=search_request()).json()
        assert hwnas["request"]["initial_design"] == "analytic_front"
    engine = create_engine(url)
    with engine.begin() as connection:  # what 0007 stored: no such setting
        command.downgrade(alembic_config(connection), "0007")
    with engine.connect() as connection:
        stored = [
            json.loads(r) if isinstance(r, str) else r
            for (r,) in connection.execute(text("SELECT request FROM searches ORDER BY id"))
        ]
    assert all("initial_design" not in request for request in stored)
    migrate(engine)
    engine.dispose()
    with TestClient(create_app(Settings(database_url=url, clock=clock))) as again:
        resumed = again.get(f"/api/v1/searches/{hwnas['id']}").json()
        other = again.get(f"/api/v1/searches/{lts['id']}").json()
    assert resumed["request"]["initial_design"] == "random"  # they drew theirs at random
    assert "initial_design" not in other["request"] or other["request"]["initial_design"] is None
