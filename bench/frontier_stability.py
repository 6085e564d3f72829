"""Frontier stability: which frontier decisions a re-measurement overturns (issue 17, item 8).

Given each candidate's first measurement and its re-measurements (the rows
`bench/reproducibility.py` saves), the frontier is computed from the first measurements and
again from each repeat of re-measurements, over the candidates feasible and quiet (not busy)
in both, three ways:

- plain: the exact Pareto frontier of the values as measured; every point is on or off it;
- noise-aware membership: the frontier beyond noise (`search.pareto.front_beyond_noise`, with
  the API's relative interval widths): a point is off only when another's worst case
  dominates its best case; "flips" are membership changes either way;
- noise-aware decisions: the frontier beyond noise says "on, whatever the noise" for its
  certain points (`search.pareto.beyond_doubt`), "off" for the points dominated beyond noise,
  and "cannot tell" for the rest; a decision flips when "on" becomes "off" or "off" becomes
  "on". A move into or out of "cannot tell" is reported (transitions) but is not a flip:
  that is the frontier saying it does not know, as the API, CLI and dashboard say it.

The plain frontier's flips count both ways too, so its flips are its decision flips.

Re-analyse a saved run (the JSON `bench/reproducibility.py --json` writes):

    .venv/bin/python -m bench.frontier_stability bench/results/reproducibility_lts200.json

With `--refit`, the intervals are not the run's but those today's noise model
(`search.noise.fit`) gives from the run's agent reference readings, every candidate at one
measurement; the latency and memory coverage of the re-measurements under them is printed
too.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from search.noise import METRICS, NoiseModel, fit
from search.pareto import beyond_doubt, front_beyond_noise, non_dominated_mask

CERTAIN, UNDECIDED, OFF = "certain", "cannot_tell", "off"
STATES = (CERTAIN, UNDECIDED, OFF)


def frontier_sets(
    params: np.ndarray,
    values: np.ndarray,
    rel: dict[str, list[float]],
    metrics: Sequence[str] = METRICS,
) -> dict[str, set[int]]:
    """Row indices of the plain frontier, the frontier beyond noise and its certain points:
    params maximised; `metrics` (the columns of `values`) minimised with intervals of the
    given relative widths."""
    nominal = np.column_stack([-params, values])
    low, high = nominal.copy(), nominal.copy()
    for j, metric in enumerate(metrics, start=1):
        low[:, j] = nominal[:, j] * rel[metric][0]
        high[:, j] = nominal[:, j] * rel[metric][1]
    members, _ = front_beyond_noise(nominal, low, high)
    return {
        "plain": set(np.flatnonzero(non_dominated_mask(nominal))),
        "members": set(np.flatnonzero(members)),
        "certain": set(np.flatnonzero(beyond_doubt(low, high, members))),
    }


def compare(before: set[int], after: set[int]) -> dict[str, Any]:
    return {
        "size_before": len(before),
        "size_after": len(after),
        "kept": len(before & after),
        "kept_share": len(before & after) / len(before) if before else None,
        "left": len(before - after),
        "entered": len(after - before),
        "flips": len(before ^ after),
    }


def decisions(before: dict[str, set[int]], after: dict[str, set[int]], n: int) -> dict[str, Any]:
    """The three-way decisions before and after: flips (certain <-> off), the transitions
    between every pair of states, and how much of the pool each time could not be told."""

    def state(sets: dict[str, set[int]], i: int) -> str:
        if i in sets["certain"]:
            return CERTAIN
        return UNDECIDED if i in sets["members"] else OFF

    moves = [(state(before, i), state(after, i)) for i in range(n)]
    transitions = {f"{a}->{b}": moves.count((a, b)) for a, b in itertools.product(STATES, STATES)}
    return {
        "flips": transitions[f"{CERTAIN}->{OFF}"] + transitions[f"{OFF}->{CERTAIN}"],
        "certain_before": len(before["certain"]),
        "certain_after": len(after["certain"]),
        "cannot_tell_before": len(before["members"] - before["certain"]),
        "cannot_tell_after": len(after["members"] - after["certain"]),
        "transitions": transitions,
    }


def stability(
    rows: list[dict[str, Any]],
    rel: dict[str, list[float]],
    repeats: int,
    metrics: Sequence[str] = METRICS,
) -> dict[str, Any]:
    """Per repeat, the frontiers (decoder_params and `metrics`) from the first measurements
    against those from that repeat's re-measurements, over the rows feasible and quiet in
    both; then the mean. A row: decoder_params, the first values by metric, busy, feasible
    and `again` (the re-measurements, each with its values, busy and maybe failure)."""
    runs: list[dict[str, Any]] = []
    for r in range(repeats):
        pool = [
            (row, row["again"][r])
            for row in rows
            if row["feasible"] and not row["busy"] and len(row["again"]) > r
        ]
        pool = [(row, g) for row, g in pool if "failure" not in g and not g["busy"]]
        params = np.array([row["decoder_params"] for row, _ in pool], dtype=float)
        shape = (-1, len(metrics))
        first = np.array([[row[m] for m in metrics] for row, _ in pool], dtype=float)
        later = np.array([[g[m] for m in metrics] for _, g in pool], dtype=float)
        before = frontier_sets(params, first.reshape(shape), rel, metrics)
        after = frontier_sets(params, later.reshape(shape), rel, metrics)
        runs.append(
            {
                "pool": len(pool),
                "plain": compare(before["plain"], after["plain"]),
                "noise_aware": compare(before["members"], after["members"]),
                "decisions": decisions(before, after, len(pool)),
            }
        )
    return {"per_repeat": runs, **_means(runs)}


def _means(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(values: list[Any]) -> float | None:
        known = [v for v in values if v is not None]
        return statistics.fmean(known) if known else None

    out: dict[str, Any] = {"pool": mean([run["pool"] for run in runs])}
    for kind in ("plain", "noise_aware", "decisions"):
        scalars = [k for k, v in runs[0][kind].items() if not isinstance(v, dict)]
        out[kind] = {k: mean([run[kind][k] for run in runs]) for k in scalars}
    return out


def analyse(rows: list[dict[str, Any]], rel: dict[str, list[float]], repeats: int) -> dict:
    """All three objectives together, then params with each measured metric alone: with
    three correlated objectives most of a small search is non-dominated, and two at a time
    make frontiers that re-measurement can actually move."""
    return {
        **stability(rows, rel, repeats),
        "pairs": {m: stability(rows, rel, repeats, (m,)) for m in METRICS},
    }


def table(frontier: dict[str, Any]) -> list[str]:
    """Markdown rows: per frontier, size, members kept, membership flips, decision flips."""
    lines = [
        "| frontier | size before -> after | kept | flips (left + entered) | "
        "decision flips (certain / cannot tell, before) |",
        "|---|---|---|---|---|",
    ]
    sets = [("", frontier), *((f"params+{m}, ", x) for m, x in frontier["pairs"].items())]
    for label, f in sets:
        for kind in ("plain", "noise_aware"):
            x = f[kind]
            if kind == "plain":
                decided = f"{x['flips']:.1f} (all decided)"
            else:
                d = f["decisions"]
                decided = (
                    f"{d['flips']:.1f} ({d['certain_before']:.1f} / {d['cannot_tell_before']:.1f})"
                )
            lines.append(
                f"| {label}{kind} | {x['size_before']:.1f} -> {x['size_after']:.1f} | "
                f"{_pct(x['kept_share'])} | {x['flips']:.1f} ({x['left']:.1f} + "
                f"{x['entered']:.1f}) | {decided} |"
            )
    return lines


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def refit(saved: dict[str, Any]) -> tuple[dict[str, list[float]], NoiseModel]:
    """Relative intervals of one measurement under today's noise model, learned from a saved
    run's agent reference readings (no candidate measured twice: the prior extra)."""
    readings = saved["agent_reference_readings"]
    groups = {
        "latency_ms": [[r["latency_ms"] for r in readings]],
        "memory_mb": [[r["peak_memory_mb"] for r in readings]],
    }
    model = fit(groups, saved["search"]["measurement"]["device"])
    confidence = saved["search"]["noise"]["confidence"]
    return {m: list(model.interval(m, 1.0, confidence)) for m in METRICS}, model


def coverage(rows: list[dict[str, Any]], rel: dict[str, list[float]]) -> dict[str, float | None]:
    """Per metric, the share of first re-measurements inside their row's interval."""
    out: dict[str, float | None] = {}
    for metric in METRICS:
        inside = [
            row[metric] * rel[metric][0] <= row["again"][0][metric] <= row[metric] * rel[metric][1]
            for row in rows
            if row["again"] and "failure" not in row["again"][0]
        ]
        out[metric] = sum(inside) / len(inside) if inside else None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("result", type=Path, help="a JSON file bench/reproducibility.py wrote")
    parser.add_argument(
        "--refit", action="store_true", help="intervals from today's noise model (see above)"
    )
    args = parser.parse_args(argv)
    saved = json.loads(args.result.read_text())
    rel = saved["search"]["noise"]["interval_rel"]
    rows = [row for row in saved["candidates"] if not row.get("reused")]
    if args.refit:
        rel, model = refit(saved)
        shown = ", ".join(f"{m} [{lo:.4f}, {hi:.4f}]" for m, (lo, hi) in rel.items())
        print(f"refitted intervals (relative): {shown}")
        for m in METRICS:
            print(
                f"{m} sigma: reference {_pct(model.reference_sigma[m])}, candidate "
                f"{_pct(model.sigma[m])}, dof {model.dof[m]:.1f}"
            )
        for metric, share in coverage(rows, rel).items():
            print(f"{metric} coverage of the first re-measurements: {_pct(share)}")
    frontier = analyse(rows, rel, saved["remeasure"]["repeats"])
    print(f"{args.result}: {frontier['pool']:.0f} candidates quiet in both")
    print("\n".join(table(frontier)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
