"""The one translation point: a domain error (server.errors) becomes an HTTP status and a JSON
body here, and so do requests FastAPI cannot read or validate. Routes and services only raise.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from archvocab.errors import HwnasError, InvalidSpec
from server.errors import (
    Conflict,
    ExportFailed,
    ExportUnavailable,
    Forbidden,
    NotFound,
    Unauthenticated,
)

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


def domain_answer(exc: HwnasError) -> tuple[int, dict, dict[str, str] | None]:
    """A domain error's status, JSON body and headers, wherever it is answered."""
    body: dict = {"detail": str(exc)}
    if isinstance(exc, InvalidSpec):
        body["field"] = exc.field
    if isinstance(exc, NotFound):
        body["resource"] = exc.what
    status = http_status(exc)
    return status, body, {"WWW-Authenticate": "Bearer"} if status == 401 else None


async def domain_error(_request: Request, exc: HwnasError) -> JSONResponse:
    status, body, headers = domain_answer(exc)
    return JSONResponse(status_code=status, content=body, headers=headers)


async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
    # The offending input is not echoed back: it may not even be JSON-encodable (NaN).
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in exc.errors()
    ]
    fields = ".".join(str(p) for p in errors[0]["loc"] if p != "body") if errors else ""
    summary = f"{fields}: {errors[0]['msg']}" if errors else "invalid request"
    return JSONResponse(status_code=422, content={"detail": errors, "message": summary})


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


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(HTTPException, unreadable_body)
    app.add_exception_handler(HwnasError, domain_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
