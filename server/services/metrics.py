"""Prometheus metrics of the queue, the fleet and the searches, read from the database.

They come from COUNT ... GROUP BY queries run at scrape time, so they survive a restart and
every server process over one database reports the same numbers. (The HTTP metrics are per
process: server.app.middleware.observe; GET /metrics: server.app.metrics.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy import case, func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from archvocab.wire import JobStatus, SearchStatus
from server.store.rows import AgentRow, CandidateRow, SearchRow
from server.store.store import Store

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
