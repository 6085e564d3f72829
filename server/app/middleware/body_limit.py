"""The request body limit: a body over `Settings.max_request_bytes` is refused with 413
before the app reads it. (A body that is not JSON Python can read gets a 400 that says why:
server.app.errors.)"""

from __future__ import annotations

from fastapi.responses import JSONResponse


class BodyTooLarge(Exception):
    """Raised from `receive` when a streamed body passes the limit."""


def too_large_detail(max_bytes: int) -> str:
    return (
        f"request body over the server's limit of {max_bytes} bytes ({max_bytes / 2**20:g} MiB): "
        "send less, or raise the limit (Settings.max_request_bytes; hwnas serve --max-request-mb)"
    )


class LimitRequestBody:
    """Pure ASGI middleware: 413 for a request body over `max_bytes`.

    A declared Content-Length over the limit is refused before a byte of the body is read. A
    body without one (chunked) is counted as the app reads it, and refused as soon as the count
    passes the limit: the app's read fails, whatever it answers to that is dropped, and the
    client gets the 413. (The server discards the rest of the body, so the client sees it.)
    """

    def __init__(self, app, max_bytes: int) -> None:  # noqa: ANN001 - any ASGI app
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI callables
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        received = 0
        started = refused = False

        async def counted_receive() -> dict:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    refused = True
                    raise BodyTooLarge(too_large_detail(self.max_bytes))
            return message

        async def guarded_send(message: dict) -> None:
            nonlocal started
            if refused and not started:
                return  # the app's answer to a body it could not read: the 413 goes instead
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except BodyTooLarge:
            if started:
                raise  # too late for a 413: the server ends the response
        if refused and not started:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI callables
        response = JSONResponse(
            status_code=413, content={"detail": too_large_detail(self.max_bytes)}
        )
        await response(scope, receive, send)


def _content_length(scope: dict) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server answers a malformed length itself
    return None
