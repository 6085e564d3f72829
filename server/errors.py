"""Server-side domain errors; `server.app` translates every HwnasError to HTTP in one place."""

from __future__ import annotations

from archvocab.errors import HwnasError, InvalidSpec


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


STATUS_BY_ERROR: dict[type[HwnasError], int] = {
    InvalidSpec: 422,
    NotFound: 404,
    Conflict: 409,
    Unauthenticated: 401,
    Forbidden: 403,
    ExportUnavailable: 501,
    ExportFailed: 500,
}


def http_status(error: HwnasError) -> int:
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return 400
