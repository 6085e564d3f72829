"""What the server does, over the store: one module per concept. Imports the store layer,
never the api, app or cli (see server/__init__.py)."""
