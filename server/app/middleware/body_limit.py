"""Request limits: a body over `Settings.max_request_bytes` is refused with 413 before the
app reads it, and a body that is not JSON Python can read gets a 400 that says why."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from server.settings import Settings


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


def _unreadable(cause: BaseException) -> str:
    if isinstance(cause, UnicodeDecodeError):
        return f"it is not UTF-8 text ({cause.reason} at byte {cause.start})"
    if isinstance(cause, RecursionError):
        return "its arrays and objects are nested too deeply"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return "an integer has too many digits"  # sys.get_int_max_str_digits(), 4300 by default
    return f"{type(cause).__name__}: {cause}"


async def unreadable_body(request: Request, exc: Exception) -> Response:
    """FastAPI answers a body json.loads cannot read (not UTF-8, nested too deeply, a huge
    integer) with 400 'There was an error parsing the body'; this says which it was."""
    assert isinstance(exc, HTTPException)
    cause = exc.__cause__
    if exc.status_code != 400 or cause is None:
        return await http_exception_handler(request, exc)
    detail = f"the request body could not be read as JSON: {_unreadable(cause)}"
    return JSONResponse(status_code=400, content={"detail": detail})


def install_limits(app: FastAPI, settings: Settings) -> None:
    """The body-size limit (innermost middleware, so metrics and logs see its 413s) and the
    400 that explains an unreadable body."""
    app.add_middleware(LimitRequestBody, max_bytes=settings.max_request_bytes)
    app.add_exception_handler(HTTPException, unreadable_body)
