"""GET /metrics: the database's state (server.services.metrics) and this process's HTTP
traffic (server.app.middleware.observe) in Prometheus text format.

Each app gets its own CollectorRegistry: tests build many apps in one interpreter and the
global registry would refuse duplicates.
"""

from __future__ import annotations

from fastapi import FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest

from server.app.middleware.observe import HttpMetrics, ObserveRequests
from server.services.context import Services
from server.services.metrics import DatabaseCollector


def install_metrics(app: FastAPI, services: Services) -> None:
    """Add the request observer and GET /metrics (app-level, outside /api/v1)."""
    registry = CollectorRegistry()
    registry.register(DatabaseCollector(services.store))
    waiting = Gauge(
        "hwnas_claims_waiting",
        "claims held open in this process until work comes (claim?wait=)",
        registry=registry,
    )
    waiting.set_function(services.work.waiting)
    heard = Gauge(
        "hwnas_work_heard_from_others",
        "1 while jobs other server processes queue wake claims here (PostgreSQL's work channel)",
        registry=registry,
    )
    heard.set_function(lambda: float(services.work.hears_others))
    app.add_middleware(ObserveRequests, metrics=HttpMetrics(registry))

    @app.get("/metrics", include_in_schema=False)
    def metrics(_request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
