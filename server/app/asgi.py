"""The app for `hwnas serve --workers N`: each worker process imports `server.app.asgi:app`,
built on first access from the settings the parent put in the environment (`hand_over`)."""

from __future__ import annotations

import os
from functools import cache

from fastapi import FastAPI

from server.app.factory import create_app
from server.app.logs import configure_logging
from server.settings import Settings

APP = "server.app.asgi:app"  # what uvicorn imports in each worker process
SETTINGS_ENV = "HWNAS_SERVE_SETTINGS"
LOG_FORMAT_ENV, LOG_LEVEL_ENV = "HWNAS_LOG_FORMAT", "HWNAS_LOG_LEVEL"


def hand_over(settings: Settings, log_format: str, log_level: str) -> None:
    """Put what the worker processes need in the environment they inherit."""
    os.environ[SETTINGS_ENV] = settings.to_json()
    os.environ[LOG_FORMAT_ENV], os.environ[LOG_LEVEL_ENV] = log_format, log_level


@cache
def _app() -> FastAPI:
    configure_logging(os.environ.get(LOG_FORMAT_ENV, "text"), os.environ.get(LOG_LEVEL_ENV, "info"))
    return create_app(Settings.from_json(os.environ[SETTINGS_ENV]))


def __getattr__(name: str) -> FastAPI:
    # Lazily, so that importing this module (tools walking the package) builds nothing.
    if name == "app":
        return _app()
    raise AttributeError(name)
