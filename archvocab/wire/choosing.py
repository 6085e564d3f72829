"""Wire schemas of choosing one architecture from a search's frontier: the query `/pareto` and
`/pick` read (a bound on any objective, an order, a limit) and what `/pick` answers.

A bound is `min_<objective>` or `max_<objective>` for an objective of `OBJECTIVE_SENSE`; it
applies to a point's value, its best estimate (`bounds_on=value`, the default), or to its
whole interval (`bounds_on=interval`: `max_latency_ms=20` keeps a point whose interval's high
end is at most 20 ms). Whether an objective names a metric of the search at hand is the
server's to say (it knows the search); unknown parameters are kept (`model_extra`) so that
it can name them with the allowed ones.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from archvocab.wire.search_views import CandidateInfo
from archvocab.wire.searches import OBJECTIVE_SENSE

BOUND_SIDES = {"min": ">=", "max": "<="}
BoundsOn = Literal["value", "interval"]


def bound_name(side: str, objective: str) -> str:
    """The query parameter of a bound: `max_latency_ms`."""
    return f"{side}_{objective}"


def split_bound(name: str) -> tuple[str, str] | None:
    """`max_latency_ms` -> ("max", "latency_ms"); None for a name that is not a bound."""
    side, _, objective = name.partition("_")
    return (side, objective) if side in BOUND_SIDES and objective else None


def _bound_fields() -> dict[str, Any]:
    return {
        bound_name(side, name): (
            float | None,
            Field(None, description=f"keep points whose {name} is {op} this"),
        )
        for name in OBJECTIVE_SENSE
        for side, op in BOUND_SIDES.items()
    }


class ChoosingQuery(BaseModel):
    """What /pareto and /pick share: bounds, an order, what a bound applies to."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    order_by: str | None = Field(
        None,
        max_length=100,
        description="an objective of the search; best first: ascending for a minimised "
        "objective, descending for a maximised one, unless `desc` says otherwise",
    )
    desc: bool | None = Field(
        None, description="true: descending, false: ascending (default: best first)"
    )
    bounds_on: BoundsOn = Field(
        "value",
        description="value: a bound applies to a point's value (its best estimate); "
        "interval: to its whole interval (a max bound to the high end, a min bound to the low "
        "end), for an objective with one",
    )

    def bounds(self) -> dict[str, float]:
        """The bounds set, query name -> bound, in OBJECTIVE_SENSE order."""
        names = [n for n in type(self).model_fields if split_bound(n)]
        return {n: float(getattr(self, n)) for n in names if getattr(self, n) is not None}

    def unknown(self) -> list[str]:
        """Query parameters that are none of the above."""
        return list(self.model_extra or {})


FrontierQuery = create_model(
    "FrontierQuery",
    __base__=ChoosingQuery,
    __doc__="The query of GET /searches/{id}/pareto.",
    format=(Literal["json", "csv"], Field("json", description="json or csv")),
    limit=(int | None, Field(None, ge=1, le=100_000, description="at most this many points")),
    offset=(
        int,
        Field(
            0,
            ge=0,
            le=10**9,
            description="skip this many of the points that meet the bounds, in the order: with "
            "`limit`, a page of a large frontier",
        ),
    ),
    **_bound_fields(),
)

PickQuery = create_model(
    "PickQuery",
    __base__=ChoosingQuery,
    __doc__="The query of GET /searches/{id}/pick: `order_by` is required.",
    neighbours=(
        int,
        Field(2, ge=0, le=50, description="frontier points to show on each side of the pick"),
    ),
    **_bound_fields(),
)


class PickNeighbour(BaseModel):
    offset: int = Field(
        description="its place in the order relative to the pick: -1 just before it (better "
        "in that order), 1 just after"
    )
    fails: list[str] = Field(
        description="the bounds it does not meet (e.g. min_decoder_params); empty: it meets "
        "them all"
    )
    point: CandidateInfo


class FrontierPick(BaseModel):
    """The best frontier point under the bounds, in the order, and what is around it."""

    search_id: int
    order_by: str
    descending: bool
    bounds: dict[str, float] = Field(description="the bounds applied, by query name")
    bounds_on: BoundsOn
    frontier_size: int
    meeting: int = Field(description="frontier points that meet the bounds")
    pick: CandidateInfo
    neighbours: list[PickNeighbour] = Field(
        description="the frontier points next to the pick in the order, meeting the bounds or "
        "not (those before it do not), by offset"
    )
    group: list[PickNeighbour] = Field(
        description="the other points of its frontier_group: the noise cannot tell them apart"
    )
