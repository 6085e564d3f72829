"""create_app(settings): the FastAPI application, with one translation point for errors."""

from __future__ import annotations

from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from archvocab.errors import HwnasError, InvalidSpec
from server.api import router
from server.dashboard import router as dashboard_router
from server.errors import NotFound, http_status
from server.limits import install_limits
from server.metrics import install_metrics
from server.responses import document_errors
from server.settings import Settings
from server.store import Store


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


def create_app(settings: Settings) -> FastAPI:
    store = Store(settings)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        store.close()

    app = FastAPI(title="hwnas", version=VERSION, lifespan=lifespan)
    app.state.store = store
    app.include_router(router)
    app.include_router(dashboard_router)
    install_limits(app, settings)
    # Large answers (a 20,000-candidate points table is ~7 MB of JSON) shrink ~5x.
    app.add_middleware(GZipMiddleware, minimum_size=4096)
    install_metrics(app, store)
    app.add_api_route("/healthz", healthz, methods=["GET"])
    document_errors(app)

    @app.exception_handler(HwnasError)
    async def domain_error(_request: Request, exc: HwnasError) -> JSONResponse:
        body: dict = {"detail": str(exc)}
        if isinstance(exc, InvalidSpec):
            body["field"] = exc.field
        if isinstance(exc, NotFound):
            body["resource"] = exc.what
        status = http_status(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse(status_code=status, content=body, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # The offending input is not echoed back: it may not even be JSON-encodable (NaN).
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        fields = ".".join(str(p) for p in errors[0]["loc"] if p != "body") if errors else ""
        summary = f"{fields}: {errors[0]['msg']}" if errors else "invalid request"
        return JSONResponse(status_code=422, content={"detail": errors, "message": summary})

    return app
