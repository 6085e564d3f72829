"""bench/agent_scaling.py's reading of its runs: per agent count, the median wall-clock time
to the target (a run that never reached it counts as the slowest), the speedup over the
fewest agents, and PASS/FAIL for the target (4 agents at least 3.2x faster than 1)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from bench.markdown_table import table
from bench.medians import median_or_none

SPEEDUP_TARGET = 3.2  # 4 agents vs 1, wall-clock to the same hypervolume


def summarise(runs: Sequence[Mapping[str, Any]], agents: Sequence[int]) -> list[dict[str, Any]]:
    base = median_or_none([r["wall_s_to_target"] for r in runs if r["agents"] == agents[0]])
    return [_summary_row([r for r in runs if r["agents"] == n], n, base) for n in agents]


def _summary_row(
    mine: Sequence[Mapping[str, Any]], agents: int, base: float | None
) -> dict[str, Any]:
    walls = [r["wall_s_to_target"] for r in mine]
    reached = [w for w in walls if w is not None]
    wall = median_or_none(walls)
    util = [r["agent_utilisation"] for r in mine if r["agent_utilisation"] is not None]
    cpu = [
        r["server_cpu_s"] / r["results_seen"]
        for r in mine
        if r["server_cpu_s"] is not None and r["results_seen"]
    ]
    return {
        "agents": agents,
        "runs": len(mine),
        "reached": len(reached),
        "wall_s": wall,
        "wall_min": min(reached) if reached else None,
        "wall_max": max(reached) if reached else None,
        "measurements": median_or_none([r["measurements_to_target"] for r in mine]),
        "device_s": median_or_none([r["device_s_to_target"] for r in mine]),
        "utilisation": statistics.median(util) if util else None,
        "server_cpu_ms_per_result": 1000 * statistics.median(cpu) if cpu else None,
        "speedup": base / wall if base is not None and wall else None,
    }


def _fmt(value: float | None, digits: int = 1) -> str:
    return "not reached" if value is None else f"{value:.{digits}f}"


def report(
    summary: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]], args: Any
) -> tuple[str, bool | None]:
    """The markdown report, and the verdict on the target (None where the run did not
    compare 4 agents with 1)."""
    lines = [
        f"Target hypervolume {args.target} (fixed normalisation), hwnas strategy, budget "
        f"{args.budget}, {args.seeds} seed(s), time scale {args.time_scale} "
        "(wall s per replayed device-s).",
        "",
    ]
    lines += summary_table(summary)
    lines += ["", "Per seed (wall s to target / measurements to target):", ""]
    lines += per_seed_table(runs, args.agents)
    verdict: bool | None = None
    four = next((r for r in summary if r["agents"] == 4), None)
    if four is not None and args.agents[0] == 1:
        verdict = four["speedup"] is not None and four["speedup"] >= SPEEDUP_TARGET
        got = "-" if four["speedup"] is None else f"{four['speedup']:.2f}x"
        lines += [
            "",
            f"{'PASS' if verdict else 'FAIL'}: 4 agents reach hypervolume {args.target} "
            f"{got} faster than 1 agent (median wall-clock; target >= {SPEEDUP_TARGET}x)",
        ]
    return "\n".join(lines), verdict


def summary_table(summary: Sequence[Mapping[str, Any]]) -> list[str]:
    header = [
        "agents",
        "runs reaching target",
        "median wall s to target",
        "min-max",
        "median measurements to target",
        "median device-s to target",
        "agent utilisation",
        "server CPU ms/result",
        "speedup vs 1 agent",
    ]
    rows = []
    for row in summary:
        span = (
            f"{row['wall_min']:.1f}-{row['wall_max']:.1f}" if row["wall_min"] is not None else "-"
        )
        rows.append(
            [
                row["agents"],
                f"{row['reached']}/{row['runs']}",
                _fmt(row["wall_s"]),
                span,
                _fmt(row["measurements"], 0),
                _fmt(row["device_s"], 0),
                _fmt(row["utilisation"], 2),
                _fmt(row["server_cpu_ms_per_result"], 0),
                "-" if row["speedup"] is None else f"{row['speedup']:.2f}x",
            ]
        )
    return table(header, rows, "r" * len(header))


def per_seed_table(runs: Sequence[Mapping[str, Any]], agents: Sequence[int]) -> list[str]:
    rows = []
    for seed in sorted({r["seed"] for r in runs}):
        cells: list[object] = [seed]
        for n in agents:
            run = next((r for r in runs if r["seed"] == seed and r["agents"] == n), None)
            if run is None or run["wall_s_to_target"] is None:
                cells.append("not reached")
            else:
                cells.append(f"{run['wall_s_to_target']:.1f} / {run['measurements_to_target']}")
        rows.append(cells)
    header = ["seed", *(f"{n} agent{'s' if n > 1 else ''}" for n in agents)]
    return table(header, rows, "r" * len(header))
