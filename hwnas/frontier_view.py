"""How `hwnas search pareto` and `hwnas search pick` ask and show: their flags as the query of
/pareto and /pick, the frontier as a table, a pick with the points around it, and the
number formats the other `hwnas search` commands share."""

from __future__ import annotations

import argparse
from typing import Any

from rich.markup import escape
from rich.table import Table

from archvocab.summary import spec_summary
from archvocab.wire import CandidateInfo, FrontierPick, PickNeighbour

CAPTION = escape(
    "[low, high]: where a re-measurement should fall; one group: cannot be told apart (* its "
    "nominal frontier point); certain: on the frontier whatever a re-measurement gives"
)


def choosing_params(args: argparse.Namespace) -> dict[str, Any]:
    """The query of /pareto or /pick that the flags of `hwnas client_args.choosing_arguments`
    ask for; names the server does not know come back as its 422."""
    params: dict[str, Any] = dict(args.bound or [])
    for name in ("order_by", "desc", "bounds_on", "limit", "neighbours"):
        value = getattr(args, name, None)
        if value is not None:
            params[name] = value
    return params


def pareto_table(points: list[CandidateInfo], args: argparse.Namespace) -> Table:
    """The frontier (in the server's order when one was asked for, else by latency)."""
    if not args.order_by:
        points = sorted(points, key=lambda p: p.objectives.get("latency_ms") or 0)
    shown = _shown(points)
    asked = _asked(args)
    table = Table(
        "arch id",
        *shown,
        "group",
        "certain",
        "spec",
        title=f"search {args.search_id}: Pareto frontier{asked}",
        caption=CAPTION,
    )
    for p in points:
        table.add_row(p.arch_id, *_values(p, shown), *_group(p), spec_summary(p.spec))
    return table


def pick_table(pick: FrontierPick) -> Table:
    """The pick between its neighbours in the order, then the rest of its frontier group."""
    shown = _shown([pick.pick])
    direction = "descending" if pick.descending else "ascending"
    bounds = ", ".join(_bound_text(n, v) for n, v in pick.bounds.items()) or "no bounds"
    on = " (whole intervals)" if pick.bounds_on == "interval" else ""
    table = Table(
        "",
        "arch id",
        *shown,
        "group",
        "certain",
        "fails",
        title=f"search {pick.search_id}: best by {pick.order_by} ({direction}) with {bounds}{on}: "
        f"{pick.meeting} of {pick.frontier_size} frontier points meet them",
        caption=CAPTION,
    )
    rows = [*pick.neighbours, PickNeighbour(offset=0, fails=[], point=pick.pick)]
    for n in sorted(rows, key=lambda n: n.offset):
        mark = "[bold]pick[/bold]" if n.offset == 0 else f"{n.offset:+d}"
        table.add_row(mark, *_neighbour(n, shown))
    near = {n.point.arch_id for n in pick.neighbours}
    for n in pick.group:
        if n.point.arch_id not in near:
            table.add_row(f"group {n.offset:+d}", *_neighbour(n, shown))
    return table


def _neighbour(n: PickNeighbour, shown: list[str]) -> list[str]:
    p = n.point
    return [p.arch_id, *_values(p, shown), *_group(p), ", ".join(n.fails)]


def _shown(points: list[CandidateInfo]) -> list[str]:
    return [o for o in (points[0].objectives if points else {}) if o != "total_params"]


def _values(p: CandidateInfo, shown: list[str]) -> list[str]:
    return [with_interval(p.objectives.get(o), p.intervals.get(o)) for o in shown]


def _group(p: CandidateInfo) -> list[str]:
    group = p.frontier_group or ""
    mark = "*" if group == p.arch_id else ""
    return [f"{group[:8]}{mark}", "yes" if p.frontier_certain else ""]


def _asked(args: argparse.Namespace) -> str:
    bounds = [_bound_text(name, value) for name, value in (args.bound or [])]
    order = f"by {args.order_by}" if args.order_by else ""
    text = ", ".join([*bounds, order] if order else bounds)
    return f" ({text})" if text else ""


def _bound_text(name: str, value: float) -> str:
    side, _, objective = name.partition("_")
    return f"{objective} {'>=' if side == 'min' else '<='} {number(value)}"


def with_interval(value: float | None, interval: list[float] | None) -> str:
    if value is None or not interval:
        return number(value)
    return f"{number(value)} [{number(interval[0])}, {number(interval[1])}]"


def number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
