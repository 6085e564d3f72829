"""One log line and one metrics observation per HTTP request (pure ASGI middleware).

The HTTP metrics are per process (a scraper sums them); the app registers them with its own
CollectorRegistry (server.app.metrics).
"""

from __future__ import annotations

import logging
import time

from prometheus_client import CollectorRegistry, Counter, Histogram

log = logging.getLogger("hwnas.http")


class HttpMetrics:
    """Request count and latency, labelled by route template (never the raw path)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "hwnas_http_requests",
            "HTTP requests served",
            ["method", "route", "status"],
            registry=registry,
        )
        self.duration = Histogram(
            "hwnas_http_request_duration_seconds",
            "HTTP request latency",
            ["method", "route"],
            registry=registry,
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.duration.labels(method, route).observe(seconds)


def route_template(scope: dict) -> str:
    """The matched route's path template; one label for every unmatched path (404 probes)."""
    route = scope.get("route")
    return getattr(route, "path", None) or "unmatched"


class ObserveRequests:
    """ASGI middleware: one log line and one metrics observation per HTTP request."""

    def __init__(self, app, metrics: HttpMetrics) -> None:  # noqa: ANN001 - any ASGI app
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI callables
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the client gets if the app raises before it answers

        async def send_status(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, receive, send_status)
        finally:
            self._record(scope, status, time.perf_counter() - start)

    def _record(self, scope: dict, status: int, seconds: float) -> None:
        route, method = route_template(scope), scope["method"]
        self.metrics.observe(method, route, status, seconds)
        client = scope.get("client")
        log.info(
            "%s %s %d",
            method,
            scope["path"],
            status,
            extra={
                "event": "http.request",
                "method": method,
                "route": route,
                "path": scope["path"],
                "status": status,
                "duration_ms": round(seconds * 1000, 2),
                "client": f"{client[0]}:{client[1]}" if client else None,
            },
        )
