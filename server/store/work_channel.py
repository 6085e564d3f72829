"""Jobs queued by one server process, heard by the others: PostgreSQL's LISTEN/NOTIFY.

A process wakes its own waiting claims when it commits jobs it queued (server.services.work).
Several processes on one PostgreSQL database each queue jobs that the others' claims could
take. So a transaction that queued jobs also sends a notification saying how many, per device
class; PostgreSQL delivers it to every listening connection only if the transaction commits.
Each process keeps one connection listening, in a thread, and wakes that many of its own
waiting claims. SQLite has no such channel: there a process's claims ask again every second
once it has seen other processes write (server.app.agent_path).
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable

import psycopg
from sqlalchemy import URL, func, select
from sqlalchemy.orm import Session

log = logging.getLogger("hwnas.work_channel")

CHANNEL = "hwnas_work"

# Jobs queued per device class (None: any class, or not known); None alone: every claim looks.
Queued = dict[str | None, int] | None
Heard = Callable[[Queued], None]


def encode(sender: str, queued: Queued) -> str:
    """The notification's payload: who sent it and the jobs per class (JSON's keys are
    strings, so "any class" is sent as a missing class list)."""
    if queued is None or None in queued:
        return json.dumps({"from": sender})
    return json.dumps({"from": sender, "queued": queued}, separators=(",", ":"))


def decode(payload: str) -> tuple[str, Queued]:
    """(sender, jobs per class) from a payload `encode` wrote; a payload it cannot read wakes
    every claim (it came from a server of another version, say)."""
    try:
        message = json.loads(payload)
        queued = message.get("queued")
        if queued is not None:
            queued = {str(k): int(v) for k, v in queued.items()}
        return str(message["from"]), queued
    except (ValueError, TypeError, KeyError, AttributeError):
        return "", None


class WorkChannel:
    """One server process's end of the channel: `send` from a write transaction, and a
    listener thread (`start`, `stop`) that passes what other processes sent to `heard`."""

    def __init__(self, url: URL, heard: Heard, retry_s: float = 1.0) -> None:
        # psycopg's own connection string: the URL without SQLAlchemy's driver name.
        self._conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._heard = heard
        self._retry_s = retry_s
        self.sender = uuid.uuid4().hex[:16]  # this process: its own notifications are skipped
        self._stop = threading.Event()
        self._listening = threading.Event()
        self._thread: threading.Thread | None = None

    def send(self, session: Session, queued: Queued) -> None:
        """Tell the other processes, when `session`'s transaction commits, that it queued
        `queued` jobs."""
        session.execute(select(func.pg_notify(CHANNEL, encode(self.sender, queued))))

    @property
    def listening(self) -> bool:
        """Whether the listener is connected: while it is not (the database away), what other
        processes queue is not heard, and waiting claims ask again on a timer."""
        return self._listening.is_set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._listen, name="work-channel", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _listen(self) -> None:
        quiet = False  # said already that it failed: once per outage, not once a second
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    self._listening.set()
                    quiet = False
                    # Notifications sent while no connection listened are lost: every
                    # waiting claim looks once.
                    self._heard(None)
                    while not self._stop.is_set():
                        for note in connection.notifies(timeout=0.5):
                            sender, queued = decode(note.payload)
                            if sender != self.sender:
                                self._heard(queued)
            except Exception as error:  # the database away, or a bug: listen again soon
                if not quiet:
                    log.warning("the work channel is not listening (%r); trying again", error)
                quiet = True
            finally:
                self._listening.clear()
            self._stop.wait(self._retry_s)
