"""HTTP routes, one module per resource (router.py assembles /api/v1): thin, they parse, call a
service and shape the answer. Imports services and store, never app or cli."""
