"""create_app(settings): the FastAPI application, with one translation point for errors."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from archvocab.errors import HwnasError, InvalidSpec
from server.api import router
from server.errors import NotFound, http_status
from server.settings import Settings
from server.store import Store


def create_app(settings: Settings) -> FastAPI:
    store = Store(settings)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        store.close()

    app = FastAPI(title="hwnas", version="0.1.0", lifespan=lifespan)
    app.state.store = store
    app.include_router(router)

    @app.exception_handler(HwnasError)
    async def domain_error(_request: Request, exc: HwnasError) -> JSONResponse:
        body: dict = {"detail": str(exc)}
        if isinstance(exc, InvalidSpec):
            body["field"] = exc.field
        if isinstance(exc, NotFound):
            body["resource"] = exc.what
        return JSONResponse(status_code=http_status(exc), content=body)

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

    @app.get("/healthz")
    def healthz() -> dict:
        return {"status": "ok"}

    return app
