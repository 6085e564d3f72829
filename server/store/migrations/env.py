"""Alembic's environment: migrations run on the connection that
`server.store.schema.migrate` hands in."""

from __future__ import annotations

from alembic import context

from server.store.rows import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    # SQLite cannot ALTER most things: batch mode recreates the table instead.
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
