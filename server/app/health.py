"""GET /healthz: whether this process can reach the database, for load balancers."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from fastapi import Request
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError


def _version() -> str:
    try:
        return version("hwnas")
    except PackageNotFoundError:  # run from a source tree that was never pip-installed
        return "0+unknown"


VERSION = _version()


def healthz(request: Request) -> JSONResponse:
    """200 while the database answers `SELECT 1`; 503 otherwise, so a balancer drains us."""
    try:
        with request.app.state.store.db.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        reason = getattr(exc, "orig", None) or exc
        detail = f"database unreachable: {reason.__class__.__name__}: {reason}"
        return JSONResponse(
            status_code=503, content={"status": "unavailable", "detail": detail, "version": VERSION}
        )
    return JSONResponse({"status": "ok", "version": VERSION})
