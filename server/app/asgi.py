"""The app for `hwnas serve --workers N`: each worker process imports `server.asgi:app`,
built on first access from the settings the parent put in the environment."""

from __future__ import annotations

import os
from functools import cache

from fastapi import FastAPI

from server.app import create_app
from server.cli import SETTINGS_ENV
from server.logs import configure_logging
from server.settings import Settings


@cache
def _app() -> FastAPI:
    configure_logging(
        os.environ.get("HWNAS_LOG_FORMAT", "text"), os.environ.get("HWNAS_LOG_LEVEL", "info")
    )
    return create_app(Settings.from_json(os.environ[SETTINGS_ENV]))


def __getattr__(name: str) -> FastAPI:
    # Lazily, so that importing this module (tools walking the package) builds nothing.
    if name == "app":
        return _app()
    raise AttributeError(name)
