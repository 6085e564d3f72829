"""Server-side domain errors, raised by every layer; `server.app.errors` translates every
HwnasError to HTTP in one place."""

from __future__ import annotations

from archvocab.errors import HwnasError


class NotFound(HwnasError):
    def __init__(self, what: str, key: object) -> None:
        super().__init__(f"{what} {key!r} not found")
        self.what, self.key = what, key


class Conflict(HwnasError):
    """The request is well-formed but contradicts the current state (e.g. a lost lease)."""


class Unauthenticated(HwnasError):
    """401: no credential, or one the server does not know (never issued, or revoked)."""


class Forbidden(HwnasError):
    """403: a valid credential that does not allow this request."""


class ExportUnavailable(HwnasError):
    """This server cannot produce the export: a tool it needs (torch, onnx) is not installed."""


class ExportFailed(HwnasError):
    """The export process crashed or ran out of time: the server's fault, not the request's."""
