"""The hwnas server: the only package that wires the vocabulary, the search and proxy libraries,
the database and HTTP together, in layers (bottom to top):

    store/     the database: tables (rows), opening it (database), the schema and its Alembic
               migrations, the Store (sessions, the write lock), proposals, the measurement cache
    services/  what the server does: searches, agents, jobs, re-measurements, quality, reports,
               exports, tokens; the caches a process keeps of the rows (engines, result tables)
    api/       HTTP routes under /api/v1, one module per resource; their dependencies (deps)
               and documented error answers; the dashboard's pages
    app/       the application: create_app, error translation, middleware (one per module),
               the agents' claims and results answered in front of FastAPI (agent_path),
               /healthz, /metrics, logging setup, the ASGI entry for worker processes
    cli/       `hwnas serve`, `hwnas token`, `hwnas demo`: entry points, imported only by name
               from hwnas.cli

The rule: a module imports only its own layer and the layers below it (cli -> app -> api ->
services -> store); nothing imports upward. `settings` (Settings, created by entry points and
passed inward) and `errors` (the domain errors every layer raises) sit beside the layers and
import none of them. tests/server/test_layers.py checks this on every import statement.
"""
