"""ASGI middleware of the app, one per module."""
