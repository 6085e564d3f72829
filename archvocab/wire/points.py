"""The compact table of a search's results, for plots and tables (the dashboard, notebooks).

A search may hold tens of thousands of candidates: one object per candidate with its full
measurement would be megabytes per poll. This is one row per told result, as a list of plain
values under `columns`, and can be read incrementally (`after`: the last result number seen;
`frontier_since`: the frontier state last read).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from archvocab.wire.base import Strict

# Columns every table has, in this order; the search's proxy objective follows if it is not
# one of them, then "spec" (the architecture's plain data) or "summary" (it in one line).
BASE_COLUMNS = (
    "arch_id",
    "result",  # the result's number within the search: 1, 2, ... in the order they came in
    "generation",
    "status",  # measured | failed
    "reused",  # the measurement came from the cache
    "feasible",  # within the search's latency and memory bounds (None unless measured)
    "decoder_params",
    "total_params",
    "latency_ms",
    "memory_mb",
    "hypervolume",  # the measured frontier's normalised hypervolume after this result
    "agent_id",
)


# How /points gives each row's architecture: its plain data under "spec", or one line under
# "summary" (archvocab.summary: a quarter of the bytes, for tables and hovers).
SpecForm = Literal["full", "summary"]

# Which frontier points /points gives `intervals` and `groups` for: every member, or only the
# nominal ones (each its own group). Wide intervals can keep most of a large search on the
# frontier beyond noise (86,000 of 100,000); a plot of that draws the nominal points, and
# their intervals are a hundredth of the bytes.
IntervalScope = Literal["all", "nominal"]


class SearchPoints(Strict):
    """A search's told results as rows under `columns`, and its current frontier."""

    search_id: int
    status: str
    objectives: list[str]
    columns: list[str]
    rows: list[list[Any]] = Field(description="results numbered above `after`, in that order")
    after: int = Field(description="the `after` this answers: rows are results after it")
    last: int = Field(description="the highest result number so far: the next poll's `after`")
    frontier: list[str] = Field(
        description="arch ids on the measured frontier, over all rows; with `frontier_since`, "
        "only those whose place changed since then"
    )
    intervals: dict[str, dict[str, list[float]]] = Field(
        default_factory=dict,
        description="per frontier arch id, per measured objective: [low, high], where a "
        "re-measurement should fall (the search's noise.confidence); with "
        "`intervals=nominal`, for the nominal frontier points only",
    )
    estimates: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="per re-measured arch id, on the frontier or off it: its measured "
        "objectives as the geometric mean of its quiet measurements, the values "
        "/candidates gives (rows hold the first measurement)",
    )
    groups: dict[str, str] = Field(
        default_factory=dict,
        description="per frontier arch id: the nominal frontier point it cannot be told apart "
        "from (itself for a nominal frontier point); with `intervals=nominal`, the nominal "
        "frontier points only",
    )
    certain: list[str] = Field(
        default_factory=list,
        description="the frontier arch ids no other point could dominate within the noise "
        "(on the frontier whatever a re-measurement gives)",
    )
    frontier_token: str = Field(
        "",
        description="names the frontier state this answer holds: send it back as "
        "`frontier_since` to read only what changed",
    )
    frontier_since: str | None = Field(
        None,
        description="null: `frontier`, `intervals`, `estimates`, `groups` and `certain` hold "
        "the whole frontier. Otherwise the token they update: they hold only the arch ids "
        "whose place changed since it, each replacing what the reader held for it, and "
        "`left` the changed ones now off the frontier",
    )
    left: list[str] = Field(
        default_factory=list, description="with `frontier_since`: arch ids off the frontier now"
    )
    epoch: str = Field(
        description="changes when earlier rows change (their hypervolumes, once the "
        "normalisation is fixed): a reader holding rows of another epoch reads again from 0"
    )
    queued: int
    running: int
