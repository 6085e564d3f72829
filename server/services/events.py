"""Domain events: what happened to searches, jobs and agents, as log records on "hwnas.events".

How they are written (JSON lines or text) is the entry point's choice (server.app.logs).
"""

from __future__ import annotations

import logging

_events = logging.getLogger("hwnas.events")


def log_event(event: str, **fields: object) -> None:
    """A domain event at INFO on "hwnas.events": the message is the event's name, the fields
    travel as extras (JSON keys, or key=value in text). Field names must not be LogRecord's."""
    _events.info(event, extra={"event": event, **fields})
