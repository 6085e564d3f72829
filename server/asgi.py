"""The app for `hwnas serve --workers N`: each worker process imports `server.asgi:app`
and builds it from the settings the parent put in the environment."""

from __future__ import annotations

import os

from server.app import create_app
from server.cli import SETTINGS_ENV
from server.logs import configure_logging
from server.settings import Settings

configure_logging(
    os.environ.get("HWNAS_LOG_FORMAT", "text"), os.environ.get("HWNAS_LOG_LEVEL", "info")
)
app = create_app(Settings.from_json(os.environ[SETTINGS_ENV]))
