"""The database layer: rows, schema and migrations, the Store, the measurement cache.
Imports no other layer of the server (see server/__init__.py)."""
