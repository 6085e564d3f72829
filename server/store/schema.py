"""Schema migrations: every database, SQLite or PostgreSQL, is brought to the newest revision
of `server/store/migrations` (Alembic) when a server opens it.

A database made by hwnas 0.1, before migrations existed, has the tables of revision 0001 and
no `alembic_version`: it is stamped 0001 and upgraded, so nobody starts over. Several server
processes may open one PostgreSQL database at once: an advisory lock lets one migrate while
the others wait, then find nothing left to do.
"""

from __future__ import annotations

import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Connection, Engine

from archvocab.errors import HwnasError
from server.store.rows import Base

MIGRATIONS = Path(__file__).parent / "migrations"
logger = logging.getLogger(__name__)

PRE_MIGRATIONS_REVISION = "0001"  # the schema hwnas 0.1 made with create_all
_LOCK_KEY = 0x68776E6173  # "hwnas": the advisory lock PostgreSQL migrations run under


class SchemaMismatch(HwnasError):
    """The database was written by another version of hwnas."""


def check_schema(engine: Engine) -> None:
    """Refuse, naming the gap, a database whose tables lack columns this version needs."""
    inspector = inspect(engine)
    for table in Base.metadata.sorted_tables:
        present = {c["name"] for c in inspector.get_columns(table.name)}
        missing = [c.name for c in table.columns if c.name not in present]
        if missing:
            raise SchemaMismatch(
                f"database {engine.url!r} was created by an older hwnas: table {table.name!r} "
                f"lacks column(s) {', '.join(missing)}; start with a new database file"
            )


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def migrate(engine: Engine, revision: str = "head") -> None:
    """Upgrade the database to `revision` (default: the newest), in one transaction."""
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
        config = alembic_config(connection)
        before = current_revision(connection)
        if before is None and inspect(connection).get_table_names():
            _check_pre_migrations(connection)
            command.stamp(config, PRE_MIGRATIONS_REVISION)
            before = PRE_MIGRATIONS_REVISION
        command.upgrade(config, revision)
        after = current_revision(connection)
        if after != before:
            how = "created" if before is None else f"upgraded from {before}"
            logger.info("database schema %s at revision %s", how, after)


def _columns(connection: Connection) -> dict[str, set[str]]:
    inspector = inspect(connection)
    return {t: {c["name"] for c in inspector.get_columns(t)} for t in inspector.get_table_names()}


def _check_pre_migrations(connection: Connection) -> None:
    """Refuse, naming the gap, tables that are not those of revision 0001: a database from
    before the last create_all layout, or not hwnas's at all."""
    reference = create_engine("sqlite://")
    with reference.begin() as ref:
        command.upgrade(alembic_config(ref), PRE_MIGRATIONS_REVISION)
        expected = _columns(ref)
    expected.pop("alembic_version", None)
    present = _columns(connection)
    # Tables that are there but short of columns first: they say the most about the version.
    gaps = [
        f"table {table!r} lacks column(s) {', '.join(sorted(columns - present[table]))}"
        for table, columns in sorted(expected.items())
        if table in present and columns - present[table]
    ] + [f"table {table!r} is missing" for table in sorted(expected) if table not in present]
    if gaps:
        raise SchemaMismatch(
            f"database {connection.engine.url!r} was created by an older hwnas or another "
            f"program: {gaps[0]}; start with a new database file"
        )
