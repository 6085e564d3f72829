"""Structured logging for the server process: one JSON object per line, or readable text.

Only entry points call `configure_logging`; services just log with `extra={...}` on the
"hwnas.http" and "hwnas.events" loggers (server.services.events), and libraries never touch
logging setup.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Literal, TextIO

LogFormat = Literal["json", "text"]

# Everything a LogRecord carries by itself; any other attribute came in through `extra`.
# uvicorn's color_message is its message again with ANSI colours: noise in a log file.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}


def extra_fields(record: logging.LogRecord) -> dict:
    """The fields a call site passed with `extra={...}`."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, then the extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        # An extra field never overwrites the envelope: a log line must stay parseable by keys.
        entry.update({k: v for k, v in extra_fields(record).items() if k not in entry})
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        # default=str: a datetime or a path in `extra` must not turn a log call into a crash.
        return json.dumps(entry, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """`ts LEVEL logger message key=value ...`: the same fields, for a human at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        extras = extra_fields(record)
        if extras.get("event") == message:  # a domain event's message is already its name
            del extras["event"]
        fields = " ".join(f"{k}={v}" for k, v in extras.items())
        line = f"{_timestamp(record)} {record.levelname:<7} {record.name} {message}"
        line = f"{line} {fields}" if fields else line
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


class _HwnasHandler(logging.StreamHandler):
    """Marks the handler we installed, so a second configure_logging replaces only it."""


def configure_logging(
    fmt: LogFormat = "text", level: str | int = "info", stream: TextIO | None = None
) -> logging.Handler:
    """Send every logger's records (ours and uvicorn's) to `stream` in one format."""
    if fmt not in ("json", "text"):
        raise ValueError(f"log format {fmt!r}: choose 'json' or 'text'")
    handler = _HwnasHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _HwnasHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    # Alembic narrates every migration context at INFO; the store says in one line what
    # changed (`server.store.schema.migrate`). Its detail stays for --log-level debug.
    quiet = root.getEffectiveLevel() > logging.DEBUG
    logging.getLogger("alembic").setLevel(logging.WARNING if quiet else logging.NOTSET)
    return handler
