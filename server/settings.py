"""Server settings, created by entry points (CLI, tests) and passed inward."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime


def utcnow() -> datetime:
    """Naive UTC 'now': the store keeps naive UTC datetimes throughout."""
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class Settings:
    database_url: str = "sqlite:///hwnas.db"
    lease_seconds: float = 60.0  # a job whose agent stays silent this long goes back to the queue
    heartbeat_interval_s: float = 10.0
    # How often each server process requeues the jobs of agents that went silent, without
    # waiting for a claim (server.services.leases). None: a sixth of the lease, at most 10 s.
    requeue_every_s: float | None = None
    clock: Callable[[], datetime] = field(default=utcnow)  # injectable for lease-expiry tests
    # Cache of ONNX exports. None: `<database file>.exports/` beside a SQLite file (it lives
    # and goes with the database whose ids it is keyed by), else the system temp directory.
    export_dir: str | None = None
    # The interpreter that runs `python -m agent.export`: it needs torch and onnx, the server
    # does not. Injectable so tests can run one that lacks torch.
    export_python: str = sys.executable
    # Request bodies over this are refused with 413 (server.app.middleware.body_limit). The
    # largest body a schema admits is a ProxyCheck at its 100,000-result cap: 6 MB of compact
    # JSON with 16-digit arch ids, 8.3 MB indented, 10.9 MB with 64-character ids. A JobResult
    # at its caps (10,000 latency samples, 4096 CPU ids) is ~0.3 MB and a SearchCreate a few kB.
    max_request_bytes: int = 16 * 2**20
    # Authentication (server.services.auth). Off here, for tests and embedding; `hwnas serve`
    # turns it on unless told --no-auth. With it on, writes need a token; reads too when private.
    auth: bool = False
    private_reads: bool = False

    def to_json(self) -> str:
        """The plain settings (not the clock) as JSON, for another process (server.app.asgi)."""
        return json.dumps(
            {f.name: getattr(self, f.name) for f in fields(self) if f.name != "clock"}
        )

    @classmethod
    def from_json(cls, text: str) -> Settings:
        return cls(**json.loads(text))

    @staticmethod
    def database_url_from(value: str) -> str:
        """Accept a URL or a plain SQLite file path."""
        return value if "://" in value else f"sqlite:///{value}"


def as_utc(value: datetime) -> datetime:
    """Attach UTC to a naive datetime read back from the store."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value
