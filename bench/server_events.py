"""What a real `hwnas serve` says happened, read from outside: its timestamps, and its event
log (`--log-format json`) as the file grows, with the jobs each agent holds at a moment."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any


def server_time(value: str) -> datetime:
    """A timestamp as the server writes it (ISO 8601, `Z` for UTC)."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class EventLog:
    """The server's events (`--log-format json`: one JSON object per line; domain events such
    as job.claimed, and http.request for each request), read as its log file grows; restarts
    append to the same file. Each event gets `t`, its time in seconds since the epoch."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[dict[str, Any]] = []
        self._offset = 0
        self._partial = b""

    def poll(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return self.events
        with self.path.open("rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:  # the CLI's own lines before logging starts
                continue
            if isinstance(entry, dict) and "event" in entry:
                entry["t"] = server_time(entry["ts"]).timestamp()
                self.events.append(entry)
        return self.events

    def named(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.poll() if e["event"] == event]


def holders(events: Iterable[dict[str, Any]]) -> dict[str, tuple[int, float]]:
    """agent id -> (job id, time of the claim) for every job claimed and not reported in
    `events` (EventLog.poll())."""
    held: dict[str, tuple[int, float]] = {}
    for event in events:
        if event["event"] == "job.claimed":
            held[event["agent_id"]] = (event["job_id"], event["t"])
        elif event["event"] == "job.result":
            job, _ = held.get(event["agent_id"], (None, None))
            if job == event["job_id"]:
                del held[event["agent_id"]]
    return held
