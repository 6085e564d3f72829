"""A search's results as one compact table (archvocab.wire), from its result table."""

from __future__ import annotations

from bisect import bisect_right
from functools import partial
from typing import Any

from pydantic import TypeAdapter

from archvocab.wire import BASE_COLUMNS, IntervalScope, JobStatus, SearchPoints, SpecForm
from server.services.compressed import Piece, Pieces
from server.services.context import Services
from server.services.results import ResultTable, Told
from server.services.searches import in_flight
from server.store.store import get_search

# Rows are encoded this many at a time, and each full block is kept with the table: a
# 100,000-result table's rows took 0.25 s to gather and 0.1-0.2 s to encode on every read.
ROW_BLOCK = 1024
_ROWS = TypeAdapter(list[list[Any]])
_FIELDS = TypeAdapter(dict[str, Any])
# The members an answer's head leaves out: rows and frontier come from pieces.
_APART = {"rows", "frontier", "intervals", "groups", "certain", "estimates", "left"}


def search_points(
    services: Services,
    search_id: int,
    after: int = 0,
    frontier_since: str | None = None,
    spec: SpecForm = "full",
    intervals: IntervalScope = "all",
) -> Pieces:
    """SearchPoints as JSON: the table's rows after `after`, with each row's spec as its
    plain data (`full`) or as one line (`summary`: a quarter of the bytes, what the dashboard
    shows), and the frontier (what changed since `frontier_since`, when given), with the
    intervals and groups of every member or (`nominal`) of its nominal points only."""
    with services.store.read() as session:
        search = get_search(session, search_id)
        table = services.results.get(session, search)
        counts = in_flight(session, search_id)
        status = search.status
    # The token before the frontier: a table that moves on meanwhile is read again next time.
    token = table.frontier_token
    changed = table.changed_since(frontier_since) if frontier_since else None
    if changed is None:
        every = list(table.remeasured)
        frontier = table.per_frontier(
            f"wire-{intervals}",
            lambda: Piece.of(_members(_frontier_fields(table, table.frontier, intervals, every))),
        )
    else:
        on = sorted((table.told(a) for a in changed if a in table.uncertainty), key=lambda t: t.seq)
        left = sorted(a for a in changed if a not in table.uncertainty)
        fields = _frontier_fields(table, on, intervals, [*(t.arch_id for t in on), *left])
        frontier = _members({**fields, "left": left})
    request = table.request
    proxy = request.proxy_objective
    extra = [] if proxy in BASE_COLUMNS else [proxy]
    rows = table.rows  # grows in place as results come: read up to one length
    end = len(rows)
    first = bisect_right(rows, after, 0, end, key=lambda t: t.seq)
    # Built from the table's own values: not validated again (a 100,000-result table's
    # frontier fields would take half a second); clients validate what they read.
    head = SearchPoints.model_construct(
        search_id=search_id,
        status=status,
        objectives=list(request.objectives),
        columns=[*BASE_COLUMNS, *extra, "spec" if spec == "full" else "summary"],
        after=after,
        last=rows[end - 1].seq if end else 0,
        frontier_token=token,
        frontier_since=None if changed is None else frontier_since,
        epoch=table.epoch,
        queued=counts.get(JobStatus.QUEUED, 0),
        running=counts.get(JobStatus.RUNNING, 0),
    ).model_dump_json(exclude=_APART)
    # The object's other members follow its head's, from the pieces kept with the table.
    return Pieces(
        [head.encode()[:-1], b',"rows":[', *_rows_json(table, first, end, extra, spec), b"],"]
        + [frontier, b"}"]
    )


def _members(fields: dict[str, Any]) -> bytes:
    """`fields` as the members of a JSON object, without its braces."""
    return _FIELDS.dump_json(fields)[1:-1]


def _rows_json(
    table: ResultTable, first: int, end: int, extra: list[str], spec: SpecForm
) -> list[Piece | bytes]:
    """`table.rows[first:end]` as the comma-separated elements of a JSON array, from the
    blocks of ROW_BLOCK rows kept with the table where the range covers one whole (rows never
    change once in the table)."""
    rows = table.rows
    parts: list[Piece | bytes] = []
    at = first
    while at < end:
        block = at // ROW_BLOCK
        stop = min(end, (block + 1) * ROW_BLOCK)
        if at == block * ROW_BLOCK and stop == (block + 1) * ROW_BLOCK:
            make = partial(_piece, rows[at:stop], extra, spec)
            part: Piece | bytes = table.per_rows(f"json-{spec}-{ROW_BLOCK}", block, make)
        else:
            part = _encode(rows[at:stop], extra, spec)
        parts += [b",", part] if parts else [part]
        at = stop
    return parts


def _piece(told: list[Told], extra: list[str], spec: SpecForm) -> Piece:
    return Piece.of(_encode(told, extra, spec))


def _encode(told: list[Told], extra: list[str], spec: SpecForm) -> bytes:
    """The rows of `told`, comma-separated, as elements of a JSON array."""
    return _ROWS.dump_json([_row(t, extra, spec) for t in told])[1:-1]


def _frontier_fields(
    table: ResultTable, members: list[Told], intervals: IntervalScope, estimated: list[str]
) -> dict[str, Any]:
    """SearchPoints' frontier fields for `members` (in result order), with the estimates of
    the re-measured among `estimated` (on the frontier or off it); one another result just
    pushed off (the table moves on while it is read) is left out."""
    uncertainty = table.uncertainty
    described = [(t.arch_id, u) for t in members if (u := uncertainty.get(t.arch_id))]
    bounded = described if intervals == "all" else [(a, u) for a, u in described if u.group == a]
    return {
        "frontier": [arch for arch, _ in described],
        "intervals": {arch: {m: list(v) for m, v in u.intervals.items()} for arch, u in bounded},
        "groups": {arch: u.group for arch, u in bounded if u.group},
        "certain": [arch for arch, u in described if u.certain],
        "estimates": table.estimates(estimated),
        "left": [],
    }


def _row(t: Told, extra: list[str], spec: SpecForm) -> list[Any]:
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
        t.spec if spec == "full" else t.summary,
    ]
