"""The tables bench/search_efficiency.py reads its curves into: hypervolume at equal
measurement budgets, the measurements each strategy needs to reach a share of LTS's final
hypervolume, hwnas against each Optuna peer, and hypervolume at equal device-hours."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from bench.curve import first_reaching, hv_at_count, hv_at_seconds
from bench.markdown_table import table
from bench.medians import median_or_none, median_range

CHECKPOINTS = (30, 50, 60, 100, 120, 200, 300, 400, 600, 1000, 2000, 3000)
HOURS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
TARGET_SHARE = 0.99  # of LTS's hypervolume at its full budget

Results = Mapping[str, list[dict]]  # strategy -> its runs (one per seed), as run_one made them


def checkpoints(results: Results) -> list[int]:
    longest = max(len(run["hv"]) for runs in results.values() for run in runs)
    return [c for c in CHECKPOINTS if c <= longest]


def equal_budget_table(results: Results) -> list[str]:
    """(1) Median (min-max) hypervolume over seeds after each number of measurements."""
    rows = []
    for count in checkpoints(results):
        row = [str(count)]
        for runs in results.values():
            values = [hv_at_count(run, count) for run in runs]
            row.append("-" if None in values else median_range(values))
        rows.append(row)
    return table(["measurements", *results], rows)


def lts_levels(results: Results) -> dict[int, float]:
    """Per seed, LTS's hypervolume at the end of its full budget."""
    return {run["seed"]: run["hv"][-1] for run in results["lts"]}


def target_reach(results: Results, share: float = TARGET_SHARE) -> dict[str, dict[str, Any]]:
    """(2) For each strategy and seed: the first count, and the device-seconds then, at which
    its hypervolume reaches `share` x the same seed's LTS hypervolume at LTS's budget."""
    levels = lts_levels(results)
    out: dict[str, dict[str, Any]] = {}
    for strategy, runs in results.items():
        counts, seconds = {}, {}
        for run in runs:
            count = first_reaching(run, share * levels[run["seed"]])
            counts[run["seed"]] = count
            seconds[run["seed"]] = None if count is None else run["device_s"][count - 1]
        out[strategy] = {
            "counts": counts,
            "device_s": seconds,
            "median_count": median_or_none(list(counts.values())),
            "median_device_s": median_or_none(list(seconds.values())),
        }
    return out


def target_lines(
    results: Results,
    reach: Mapping[str, Mapping[str, Any]],
    budget_lts: int,
    share: float = TARGET_SHARE,
) -> list[str]:
    seeds = sorted(lts_levels(results))
    lines = [
        f"Measurements to reach {share:.0%} of the same seed's LTS hypervolume at "
        f"{budget_lts} (- = never, within the strategy's budget; % of {budget_lts}):",
        "",
    ]

    def cell(count: float | None) -> str:
        return "-" if count is None else f"{count:g} ({count / budget_lts:.1%})"

    rows = []
    for strategy, got in reach.items():
        budget = results[strategy][0]["budget"]
        per_seed = [cell(got["counts"].get(s)) for s in seeds]
        rows.append([strategy, str(budget), *per_seed, cell(got["median_count"])])
    lines += table(["strategy", "budget", *(f"seed {s}" for s in seeds), "median"], rows)
    return lines


def peer_lines(results: Results, name: str) -> tuple[list[str], bool | None]:
    """(3) hwnas against the peer `name` at every checkpoint both reached; and whether hwnas's
    median was ahead at each of them (None: no checkpoint both reached)."""
    hw, peer = results["hwnas"], results[name]
    both = min(min(len(r["hv"]) for r in hw), min(len(r["hv"]) for r in peer))
    rows = [_peer_row(hw, peer, count) for count in CHECKPOINTS if count <= both]
    lines = table(
        ["measurements", "hwnas median", f"{name} median", "ratio", "seeds won", "ahead"], rows
    )
    start = min(CHECKPOINTS)
    every = [
        statistics.median(r["hv"][c] for r in hw) > statistics.median(r["hv"][c] for r in peer)
        for c in range(start - 1, both)
    ]
    if every:
        lines += [
            "",
            f"At every count from {start} to {both}: hwnas's median ahead at {sum(every)} of "
            f"{len(every)} counts.",
        ]
    return lines, all(row[-1] == "yes" for row in rows) if rows else None


def median_at(runs: list[dict], count: int) -> float | None:
    """The median over runs of the hypervolume at `count`; None if a run stopped before."""
    values = [hv_at_count(run, count) for run in runs]
    return None if None in values else statistics.median(values)


def seeds_won(ours: list[dict], theirs: list[dict], count: int) -> tuple[int, int]:
    """Seeds where our hypervolume at `count` is above theirs, of the seeds both reached."""
    by_seed = {run["seed"]: run for run in theirs}
    pairs = [
        (hv_at_count(run, count), hv_at_count(by_seed[run["seed"]], count))
        for run in ours
        if run["seed"] in by_seed
    ]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    return sum(a > b for a, b in pairs), len(pairs)


def _peer_row(hw: list[dict], peer: list[dict], count: int) -> list[str]:
    ours = statistics.median(hv_at_count(run, count) for run in hw)
    theirs = statistics.median(hv_at_count(run, count) for run in peer)
    wins = seeds_won(hw, peer, count)[0]
    return [
        str(count),
        f"{ours:.4f}",
        f"{theirs:.4f}",
        f"{ours / max(theirs, 1e-12):.3f}",
        f"{wins}/{len(hw)}",
        "yes" if ours > theirs else "no",
    ]


def device_lines(results: Results, reach: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """(4) Hypervolume at equal device-hours, total device-hours, and device-hours to target."""
    rows = []
    for hours in HOURS:
        row = [f"{hours:g}"]
        for runs in results.values():
            values = [hv_at_seconds(run, hours * 3600) for run in runs]
            row.append("-" if None in values else median_range(values))
        rows.append(row)
    rows.append(
        ["total device-h (median)"]
        + [
            f"{statistics.median(r['device_s'][-1] for r in runs) / 3600:.2f}"
            for runs in results.values()
        ]
    )
    if reach is not None:
        row = [f"device-h to {TARGET_SHARE:.0%} of LTS (median)"]
        for strategy in results:
            seconds = reach[strategy]["median_device_s"]
            row.append("-" if seconds is None else f"{seconds / 3600:.2f}")
        rows.append(row)
    return table(["device-hours", *results], rows)
