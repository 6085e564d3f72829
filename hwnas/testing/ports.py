"""Free TCP ports on loopback."""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing listens on now. Another process may take it before the caller binds
    it: callers that can retry do (hwnas.testing.postgres), the rest accept the small risk."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def loopback_url(port: int) -> str:
    """The base URL of a server listening on `port` of loopback."""
    return f"http://{LOOPBACK}:{port}"
