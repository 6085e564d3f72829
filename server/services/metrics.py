"""Prometheus metrics: queue and fleet state read from the database, HTTP traffic in-process.

The state metrics come from COUNT ... GROUP BY queries run at scrape time, so they survive a
restart and every server process over one database reports the same numbers. The HTTP
metrics are per process (a scraper sums them). Each app gets its own CollectorRegistry:
tests build many apps in one interpreter and the global registry would refuse duplicates.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import timedelta

from fastapi import FastAPI, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy import case, func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from archvocab.search_wire import JobStatus, SearchStatus
from server.db import AgentRow, CandidateRow, SearchRow
from server.store import Store

log = logging.getLogger("hwnas.http")
SEARCH_STATUSES = tuple(SearchStatus)
RATE_WINDOW_S = 60.0


class DatabaseCollector:
    """Collects the queue, fleet and search metrics from the store at each scrape."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def describe(self) -> list[Metric]:
        # Without this the registry would call collect() (and query the database) on register.
        return []

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("hwnas_database_up", "1 if the last scrape could read the database")
        try:
            with self.store.read() as session:
                families = [*self._candidates(session), *self._agents(session)]
                families.append(self._searches(session))
        except DBAPIError as exc:
            log.warning("metrics scrape could not read the database: %s", exc.__class__.__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _candidates(self, session: Session) -> list[Metric]:
        # One grouped scan gives the queue, running jobs, measurements and failures together.
        rows = session.execute(
            select(
                SearchRow.device_class,
                CandidateRow.status,
                CandidateRow.reused,
                CandidateRow.failure_kind,
                func.count(),
            )
            .select_from(CandidateRow)
            .join(SearchRow, SearchRow.id == CandidateRow.search_id)
            .group_by(
                SearchRow.device_class,
                CandidateRow.status,
                CandidateRow.reused,
                CandidateRow.failure_kind,
            )
        ).all()
        queued, running, measured, failures = _tally(rows)
        return [
            _gauge("hwnas_queue_depth", "queued candidates", ["device_class"], queued),
            _gauge("hwnas_jobs_running", "candidates being measured", ["device_class"], running),
            _gauge(
                "hwnas_measurements_per_minute",
                f"candidates measured (not reused) in the last {RATE_WINDOW_S:g} s",
                ["device_class"],
                self._recent(session, {dc: 0 for dc in queued}),
            ),
            _counter(
                "hwnas_measurements",
                "candidates measured; reused=true came from the measurement cache",
                ["device_class", "reused"],
                measured,
            ),
            _counter(
                "hwnas_measurement_failures",
                "candidates whose measurement failed, by failure kind",
                ["device_class", "kind"],
                failures,
            ),
        ]

    def _recent(self, session: Session, counts: dict) -> dict:
        since = self.store.now() - timedelta(seconds=RATE_WINDOW_S)
        rows = session.execute(
            select(SearchRow.device_class, func.count())
            .select_from(CandidateRow)
            .join(SearchRow, SearchRow.id == CandidateRow.search_id)
            .where(
                CandidateRow.status == JobStatus.MEASURED,
                CandidateRow.reused.is_(False),
                CandidateRow.finished_at >= since,
            )
            .group_by(SearchRow.device_class)
        ).all()
        return {**counts, **dict(rows)}

    def _agents(self, session: Session) -> list[Metric]:
        since = self.store.now() - timedelta(seconds=self.store.settings.lease_seconds)
        rows = session.execute(
            select(
                AgentRow.device_class,
                func.count(),
                func.sum(case((AgentRow.last_seen_at >= since, 1), else_=0)),
            ).group_by(AgentRow.device_class)
        ).all()
        return [
            _gauge(
                "hwnas_agents_online",
                "agents seen within the lease period",
                ["device_class"],
                {dc: online or 0 for dc, _, online in rows},
            ),
            _gauge(
                "hwnas_agents_registered",
                "agents ever registered",
                ["device_class"],
                {dc: n for dc, n, _ in rows},
            ),
        ]

    def _searches(self, session: Session) -> Metric:
        rows = session.execute(
            select(SearchRow.status, func.count()).group_by(SearchRow.status)
        ).all()
        counts = {s: 0 for s in SEARCH_STATUSES} | dict(rows)
        return _gauge("hwnas_searches", "searches by status", ["status"], counts)


def _tally(rows) -> tuple[dict, dict, dict, dict]:  # noqa: ANN001 - result rows
    """(queued, running) by device class, measured by (class, reused), failed by (class, kind).

    Every device class with candidates gets a queued/running sample, 0 included, so a drained
    queue reads 0 rather than vanishing from the scrape."""
    queued, running, measured, failures = {}, {}, {}, {}
    for device_class, status, reused, kind, n in rows:
        queued[device_class] = queued.get(device_class, 0) + (
            n if status == JobStatus.QUEUED else 0
        )
        running[device_class] = running.get(device_class, 0) + (
            n if status == JobStatus.RUNNING else 0
        )
        if status == JobStatus.MEASURED:
            key = (device_class, "true" if reused else "false")
            measured[key] = measured.get(key, 0) + n
        elif status == JobStatus.FAILED:
            key = (device_class, kind or "unknown")
            failures[key] = failures.get(key, 0) + n
    return queued, running, measured, failures


def _labels(key) -> list[str]:
    return list(key) if isinstance(key, tuple) else [key]


def _gauge(name: str, doc: str, labels: list[str], values: dict) -> Metric:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(_labels(key), value)
    return family


def _counter(name: str, doc: str, labels: list[str], values: dict) -> Metric:
    family = CounterMetricFamily(name, doc, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(_labels(key), value)
    return family


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


def install_metrics(app: FastAPI, store: Store) -> None:
    """Add the request observer and GET /metrics (app-level, outside /api/v1)."""
    registry = CollectorRegistry()
    registry.register(DatabaseCollector(store))
    app.add_middleware(ObserveRequests, metrics=HttpMetrics(registry))

    @app.get("/metrics", include_in_schema=False)
    def metrics(_request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
