"""create_app(settings): the FastAPI application, assembled from the layers below."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.gzip import GZipMiddleware

from server.api.dashboard import router as dashboard_router
from server.api.encoded import GZIP_FROM_BYTES
from server.api.responses import document_errors
from server.api.router import router
from server.app.agent_path import AgentPath
from server.app.errors import install_error_handlers
from server.app.health import VERSION, healthz
from server.app.metrics import install_metrics
from server.app.middleware.body_limit import LimitRequestBody
from server.app.stopping import claims_answered_on_stop
from server.app.sweeper import lease_schedule
from server.services.compressed import LEVEL
from server.services.context import Services
from server.services.heap import keep_settled
from server.settings import Settings
from server.store.store import Store


def create_app(settings: Settings) -> FastAPI:
    services = Services(Store(settings))
    store = services.store

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        with keep_settled(), claims_answered_on_stop(services.work), services.work.listening():
            async with lease_schedule(services):
                yield
        store.close()

    app = FastAPI(title="hwnas", version=VERSION, lifespan=lifespan)
    app.state.store = store
    app.state.services = services
    app.include_router(router)
    app.include_router(dashboard_router)
    # The body-size limit is the innermost middleware, so metrics and logs see its 413s.
    app.add_middleware(LimitRequestBody, max_bytes=settings.max_request_bytes)
    # Large answers (a 20,000-candidate points table is ~7 MB of JSON) shrink 3-4x, at the
    # level and from the size the answers made of kept pieces use (server.services.compressed).
    app.add_middleware(GZipMiddleware, minimum_size=GZIP_FROM_BYTES, compresslevel=LEVEL)
    # The agents' claims, heartbeats and results skip the layers above (their answers are
    # small); what they cannot answer goes on through them.
    app.add_middleware(AgentPath, services=services, max_bytes=settings.max_request_bytes)
    install_metrics(app, services)
    app.add_api_route("/healthz", healthz, methods=["GET"])
    document_errors(app)
    install_error_handlers(app)
    return app
