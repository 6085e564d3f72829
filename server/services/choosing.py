"""Choosing one architecture: a search's frontier under bounds on any objective, in an order,
cut to a limit (/pareto), and the single best point under them with the points around it
(/pick). Bounds apply to a point's best estimate (`CandidateInfo.objectives`), or to its whole
interval with `bounds_on=interval`.

The query is checked against the search here (the wire schema cannot know its objectives):
every parameter that is not one of the query's, a bound on an objective the search has no
values of, an order by one, is refused naming the parameter and the allowed values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from archvocab.errors import HwnasError, InvalidSpec
from archvocab.wire import (
    BOUND_SIDES,
    OBJECTIVE_SENSE,
    BoundsOn,
    CandidateInfo,
    ChoosingQuery,
    FrontierPick,
    PickNeighbour,
    SearchCreate,
    split_bound,
)
from server.errors import NotFound
from server.services.context import Services
from server.services.searches import FrontierPoint, FrontierView, candidates_by_arch, frontier

# Values every point has whatever its search's objectives (server.services.frontier.values_of).
ALWAYS = ("decoder_params", "total_params", "latency_ms", "memory_mb")


class NothingMeets(NotFound):
    """404: no frontier point meets the bounds; the message names the bound that left none and
    the point closest to meeting it."""

    def __init__(self, bound: str, message: str) -> None:
        HwnasError.__init__(self, message)
        self.what, self.key = "frontier point", bound


@dataclass(frozen=True)
class Bound:
    name: str  # the query parameter, e.g. max_latency_ms
    side: str  # min or max
    objective: str
    value: float

    def value_of(self, point: FrontierPoint, bounds_on: str) -> float | None:
        """What the bound is compared with: the value, or the end of the interval nearer it."""
        value = point.objectives.get(self.objective)
        interval = point.intervals.get(self.objective)
        if value is not None and bounds_on == "interval" and interval:
            return interval[1] if self.side == "max" else interval[0]
        return value

    def met(self, point: FrontierPoint, bounds_on: str) -> bool:
        value = self.value_of(point, bounds_on)  # a missing value meets no bound
        if value is None:
            return False
        return value <= self.value if self.side == "max" else value >= self.value

    def __str__(self) -> str:
        return f"{self.objective} {BOUND_SIDES[self.side]} {_number(self.value)}"


@dataclass(frozen=True)
class Choice:
    """A checked query: the bounds, what they apply to, and the order (None: result order)."""

    bounds: list[Bound]
    bounds_on: BoundsOn
    order_by: str | None
    descending: bool

    def fails(self, point: FrontierPoint) -> list[str]:
        return [b.name for b in self.bounds if not b.met(point, self.bounds_on)]

    def ranked(self, points: Sequence[FrontierPoint]) -> list[FrontierPoint]:
        """`points` best first in the order (ties by arch id; a missing value last)."""
        if self.order_by is None:
            return list(points)
        sign = -1.0 if self.descending else 1.0

        def key(p: FrontierPoint) -> tuple[bool, float, str]:
            value = p.objectives.get(self.order_by or "")
            return (value is None, sign * (value or 0.0), p.arch_id)

        return sorted(points, key=key)


def metrics_of(request: SearchCreate) -> list[str]:
    """The objectives a search's points have values of, in OBJECTIVE_SENSE order."""
    have = {*ALWAYS, *request.objectives}
    return [name for name in OBJECTIVE_SENSE if name in have]


def checked(query: ChoosingQuery, request: SearchCreate) -> Choice:
    """The query as a Choice; InvalidSpec (422) naming the parameter and the allowed values."""
    metrics = metrics_of(request)
    allowed = (
        f"{', '.join(n for n in type(query).model_fields if not split_bound(n))}, and "
        f"min_<objective> or max_<objective> for an objective of this search: {', '.join(metrics)}"
    )
    for name in query.unknown():
        split = split_bound(name)
        if split is None or split[1] in OBJECTIVE_SENSE:
            raise InvalidSpec(name, f"unknown query parameter; allowed: {allowed}")
        raise InvalidSpec(name, f"{split[1]!r} is not an objective; allowed: {allowed}")
    bounds = []
    for name, value in query.bounds().items():
        side, objective = split_bound(name) or ("", "")
        if objective not in metrics:
            raise InvalidSpec(name, f"this search has no {objective} values; allowed: {allowed}")
        bounds.append(Bound(name, side, objective, value))
    _check_ranges(bounds)
    order_by = query.order_by
    if order_by is not None and order_by not in metrics:
        raise InvalidSpec(
            "order_by",
            f"{order_by!r} is not an objective of this search; allowed: {', '.join(metrics)}",
        )
    descending = query.desc
    if descending is None:
        descending = order_by is not None and OBJECTIVE_SENSE[order_by] == "max"
    return Choice(bounds, query.bounds_on, order_by, descending)


def _check_ranges(bounds: list[Bound]) -> None:
    low = {b.objective: b for b in bounds if b.side == "min"}
    for high in (b for b in bounds if b.side == "max"):
        if high.objective in low and low[high.objective].value > high.value:
            raise InvalidSpec(
                high.name,
                f"{_number(high.value)} is below {low[high.objective].name} "
                f"{_number(low[high.objective].value)}: no value can meet both",
            )


def frontier_points(
    services: Services, search_id: int, query: ChoosingQuery
) -> list[CandidateInfo]:
    """The frontier's points that meet the bounds, in the order, from `query.offset` on and at
    most `query.limit`: chosen among the result table's points, and only those read in full."""
    view = frontier(services, search_id)
    choice = checked(query, view.request)
    ranked = _ranked(view, choice)
    meeting = [p for p in ranked if not choice.fails(p)] if choice.bounds else ranked
    start = getattr(query, "offset", 0)
    limit = getattr(query, "limit", None)
    chosen = meeting[start:] if limit is None else meeting[start : start + limit]
    return candidates_by_arch(services, search_id, [p.arch_id for p in chosen])


def pick(services: Services, search_id: int, query: ChoosingQuery) -> FrontierPick:
    """The best frontier point under the bounds in the order, its `query.neighbours` nearest
    frontier points on each side in that order (meeting the bounds or not), and the other
    points of its frontier group. NothingMeets (404) when no point meets them."""
    view = frontier(services, search_id)
    choice = checked(query, view.request)
    if choice.order_by is None:
        raise InvalidSpec(
            "order_by",
            f"a pick needs an order: one of {', '.join(metrics_of(view.request))} "
            "(best first: ascending for latency and memory, descending for the others)",
        )
    if not view.points:
        raise NothingMeets("", f"search {search_id} has no frontier point yet: nothing measured")
    ranked = _ranked(view, choice)
    fails = {p.arch_id: choice.fails(p) for p in ranked}
    meeting = [p for p in ranked if not fails[p.arch_id]]
    if not meeting:
        raise _nothing_meets(ranked, choice)
    best = meeting[0]
    at, n = ranked.index(best), getattr(query, "neighbours", 2)

    near = [i for i in range(max(0, at - n), min(len(ranked), at + n + 1)) if i != at]
    group = [
        i
        for i, p in enumerate(ranked)
        if i != at and best.frontier_group is not None and p.frontier_group == best.frontier_group
    ]
    shown = sorted({at, *near, *group})
    full = dict(
        zip(
            shown,
            candidates_by_arch(services, search_id, [ranked[i].arch_id for i in shown]),
            strict=True,
        )
    )

    def around(i: int) -> PickNeighbour:
        return PickNeighbour(offset=i - at, fails=fails[ranked[i].arch_id], point=full[i])

    return FrontierPick(
        search_id=search_id,
        order_by=choice.order_by,
        descending=choice.descending,
        bounds={b.name: b.value for b in choice.bounds},
        bounds_on=choice.bounds_on,
        frontier_size=len(view.points),
        meeting=len(meeting),
        pick=full[at],
        neighbours=[around(i) for i in near],
        group=[around(i) for i in group],
    )


def _ranked(view: FrontierView, choice: Choice) -> list[FrontierPoint]:
    """The frontier's points in the choice's order, ranked once per frontier state and order
    (a large frontier's pages and picks share it; nobody may change the list)."""
    if choice.order_by is None:
        return view.points
    name = f"ranked by {choice.order_by}, descending {choice.descending}"
    return view.kept(name, lambda: choice.ranked(view.points))


def _nothing_meets(points: list[FrontierPoint], choice: Choice) -> NothingMeets:
    """Which bound left no point, and the point nearest to meeting it: a bound that no point
    meets on its own first; else the first that empties what the ones before it left."""
    on = choice.bounds_on
    whole = " (its whole interval)" if on == "interval" else ""
    for bound in choice.bounds:
        if not any(bound.met(p, on) for p in points):
            return NothingMeets(
                bound.name,
                f"{bound.name}: no frontier point has {bound}{whole}; "
                f"{_closest(points, bound, on, 'on the frontier')}",
            )
    kept, applied = points, []
    for bound in choice.bounds:
        left = [p for p in kept if bound.met(p, on)]
        if not left:
            among = f"of the {len(kept)} with {' and '.join(map(str, applied))}"
            return NothingMeets(
                bound.name,
                f"{bound.name}: no frontier point has {bound}{whole} and "
                f"{' and '.join(map(str, applied))}; {_closest(kept, bound, on, among)}",
            )
        kept, applied = left, [*applied, bound]
    raise AssertionError("some bound leaves no point")  # pragma: no cover


def _closest(points: list[FrontierPoint], bound: Bound, on: str, among: str) -> str:
    measured = [p for p in points if bound.value_of(p, on) is not None]
    if not measured:
        return f"no point {among} has a {bound.objective} value"
    pick_ = min if bound.side == "max" else max
    closest = pick_(measured, key=lambda p: bound.value_of(p, on) or 0.0)
    what = "lowest" if bound.side == "max" else "highest"
    end = {"max": " (interval's high end)", "min": " (interval's low end)"}[bound.side]
    end = end if on == "interval" and closest.intervals.get(bound.objective) else ""
    value = _number(bound.value_of(closest, on) or 0.0)
    return f"the {what} {bound.objective}{end} {among} is {value} ({closest.arch_id})"


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) and abs(value) < 1e15 else f"{value:.6g}"
