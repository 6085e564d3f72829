"""What both clients of the HTTP API (the user's `hwnas.client` and the agent's
`agent.client`) and the server agree on besides the schemas: where the API lives, and how a
refusal reads on the client side."""

from __future__ import annotations

from typing import Any, Protocol

API_PREFIX = "/api/v1"
# The longest a claim may wait for work (`claim?wait=`) before it is answered "no work".
MAX_CLAIM_WAIT_S = 30.0


class ApiError(Exception):
    """The server refused a request: `status`, its `message`, the `field` it names (if any),
    the parsed `body`, and which request it was (`method`, `path`) where the caller said."""

    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        body: Any = None,
        *,
        method: str | None = None,
        path: str | None = None,
    ) -> None:
        where = f"{method} {path} -> " if method and path else ""
        super().__init__(f"{where}{status}: {message}")
        self.status, self.message, self.field, self.body = status, message, field, body
        self.method, self.path = method, path


class _Response(Protocol):  # what is read of an httpx.Response (archvocab needs no httpx)
    status_code: int
    text: str
    reason_phrase: str

    def json(self) -> Any: ...


def error_from(
    response: _Response, *, method: str | None = None, path: str | None = None
) -> ApiError:
    """The ApiError a refusal means: the server's `message` (or FastAPI's `detail`) and the
    field it names (hwnas's own errors say `field`; a 422 from validation gives `loc`)."""
    message_cap = 2000  # a proxy's HTML error page is not a message
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()[:message_cap] or response.reason_phrase
        return ApiError(response.status_code, text, method=method, path=path)
    if not isinstance(body, dict):
        return ApiError(
            response.status_code, str(body)[:message_cap], None, body, method=method, path=path
        )
    message = body.get("message") or body.get("detail") or response.reason_phrase
    if not isinstance(message, str):
        message = str(message)
    field = body.get("field")
    if field is None and isinstance(body.get("detail"), list) and body["detail"]:
        first = body["detail"][0]
        loc = first.get("loc", []) if isinstance(first, dict) else []
        field = ".".join(str(p) for p in loc if p not in ("body", "query")) or None
    return ApiError(response.status_code, message, field, body, method=method, path=path)
