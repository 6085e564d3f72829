"""A search's results as one compact table (archvocab.wire), from its result table."""

from __future__ import annotations

from typing import Any

from archvocab.wire import BASE_COLUMNS, JobStatus, SearchPoints
from server.services.context import Services
from server.services.results import Told
from server.services.searches import census
from server.store.store import get_search


def search_points(services: Services, search_id: int, after: int = 0) -> SearchPoints:
    with services.store.read() as session:
        search = get_search(session, search_id)
        table = services.results.get(session, search)
        request = search.parsed_request
        proxy = request.proxy_objective
        extra = [] if proxy in BASE_COLUMNS else [proxy]
        counts = census(session, search_id).by_status
        new = [t for t in table.rows if t.seq > after]
        return SearchPoints(
            search_id=search_id,
            status=search.status,
            objectives=list(request.objectives),
            columns=[*BASE_COLUMNS, *extra, "spec"],
            rows=[_row(t, extra) for t in new],
            after=after,
            last=table.last,
            frontier=[t.arch_id for t in table.frontier],
            intervals={
                arch: {m: list(v) for m, v in u.intervals.items()}
                for arch, u in table.uncertainty.items()
            },
            groups={arch: u.group for arch, u in table.uncertainty.items() if u.group},
            certain=[arch for arch, u in table.uncertainty.items() if u.certain],
            estimates={
                arch: dict(u.values) for arch, u in table.uncertainty.items() if u.measurements > 1
            },
            epoch=table.epoch,
            queued=counts.get(JobStatus.QUEUED, 0),
            running=counts.get(JobStatus.RUNNING, 0),
        )


def _row(t: Told, extra: list[str]) -> list[Any]:
    v = t.values
    return [
        t.arch_id,
        t.seq,
        t.generation,
        t.status,
        t.reused,
        t.feasible,
        v["decoder_params"],
        v["total_params"],
        v["latency_ms"],
        v["memory_mb"],
        t.hypervolume,
        t.agent_id,
        *(v[name] for name in extra),
        t.spec,
    ]
