"""What a reproducibility run's numbers say: interval coverage and widths, the spread between
processes, memory repeatability, frontier stability (`bench.frontier_stability`), the noise
model had it learned from the candidates, the cost of reference readings and busy retries,
and the targets of issue 17."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from bench import frontier_stability
from bench.frontier_stability import frontier_sets
from bench.remeasure import BUSY_PAUSE_S
from search.noise import METRICS, fit

MEMORY_CV_TARGET = 0.03
COVERAGE_TARGET = 0.90
KEPT_TARGET = 0.90


def first_values(c: dict[str, Any]) -> dict[str, float]:
    m = c["measurement"]
    return {"latency_ms": m["latency_ms"], "memory_mb": m["peak_memory_mb"]}


def cv(values: Sequence[float]) -> float | None:
    if len(values) < 2 or statistics.fmean(values) <= 0:
        return None
    return statistics.stdev(values) / statistics.fmean(values)


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def pairs(
    candidates: list[dict[str, Any]], again: dict[str, list[dict[str, Any]]], quiet: bool
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(candidate, re-measurement) for every successful re-measurement; with `quiet`, only
    those where neither measurement was busy."""
    for c in candidates:
        for got in again[c["arch_id"]]:
            if "failure" in got or (quiet and (got["busy"] or c["busy"])):
                continue
            yield c, got


def coverage(
    candidates: list[dict[str, Any]], again: dict[str, list[dict[str, Any]]], quiet: bool
) -> dict[str, Any]:
    """Per metric: the share of re-measurements inside hwnas's interval and today's CI."""
    out: dict[str, Any] = {}
    for metric in METRICS:
        hwnas, today = [], []
        for c, got in pairs(candidates, again, quiet):
            low, high = c["intervals"][metric]
            hwnas.append(low <= got[metric] <= high)
            if metric == "latency_ms":
                lat = c["measurement"]["latency"]
                today.append(lat["ci_low_ms"] <= got[metric] <= lat["ci_high_ms"])
        out[metric] = {"hwnas": share(hwnas), "today": share(today), "n": len(hwnas)}
    return out


def widths_and_spread(
    candidates: list[dict[str, Any]], again: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """Per metric: median relative widths of the stated intervals, the between-process
    spread (median |log(re-measurement / first)|) and the within-process ci_rel."""
    out: dict[str, Any] = {}
    for metric in METRICS:
        rel = [
            (c["intervals"][metric][1] - c["intervals"][metric][0]) / first_values(c)[metric]
            for c in candidates
        ]
        logs = [
            abs(math.log(got[metric] / first_values(c)[metric]))
            for c, got in pairs(candidates, again, quiet=False)
        ]
        entry = {"hwnas_rel_width": median(rel), "between_median_abs_log": median(logs)}
        if metric == "latency_ms":
            lats = [c["measurement"]["latency"] for c in candidates]
            entry["today_rel_width"] = median(
                [(x["ci_high_ms"] - x["ci_low_ms"]) / x["median_ms"] for x in lats]
            )
            entry["within_ci_rel"] = median([x["ci_rel"] for x in lats])
        out[metric] = entry
    return out


def memory_repeatability(
    candidates: list[dict[str, Any]],
    again: dict[str, list[dict[str, Any]]],
    agent_readings: list[dict[str, Any]],
    readings: list[dict[str, Any]],
) -> dict[str, Any]:
    cvs = []
    for c in candidates:
        values = [first_values(c)["memory_mb"]]
        values += [g["memory_mb"] for g in again[c["arch_id"]] if "failure" not in g]
        if (x := cv(values)) is not None:
            cvs.append(x)
    ok = [r for r in readings if "failure" not in r]
    ours = [r["memory_mb"] for r in ok]
    theirs = [r["peak_memory_mb"] for r in agent_readings]
    return {
        "candidates": {
            "n": len(cvs),
            "median": median(cvs),
            "p90": float(np.quantile(cvs, 0.9)) if cvs else None,
            "max": max(cvs) if cvs else None,
            "share_within_target": share([x <= MEMORY_CV_TARGET for x in cvs]),
        },
        "reference": {
            "agent_readings": len(theirs),
            "agent_cv": cv(theirs),
            "remeasure_readings": len(ours),
            "remeasure_cv": cv(ours),
            "all_cv": cv(theirs + ours),
            "latency_all_cv": cv(
                [r["latency_ms"] for r in agent_readings] + [r["latency_ms"] for r in ok]
            ),
        },
    }


def agent_reference_readings(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reference readings the results carried, one per (agent, measured_at), as the
    server keys them."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for c in candidates:
        ref = c["measurement"].get("reference")
        if ref:
            seen[(c["measurement"]["agent_id"], ref["measured_at"])] = ref
    return list(seen.values())


def server_agreement(candidates: list[dict[str, Any]], rel: dict[str, list[float]]) -> int:
    """How many candidates this script's frontier beyond noise (first measurements, the
    server's pool: feasible and not busy) places differently from the API's `on_frontier`."""
    pool = [c for c in candidates if c["feasible"] and not c["busy"]]
    params = np.array([c["objectives"]["decoder_params"] for c in pool], dtype=float)
    values = np.array([[first_values(c)[m] for m in METRICS] for c in pool], dtype=float)
    mine = frontier_sets(params, values.reshape(-1, 2), rel)["members"]
    theirs = {i for i, c in enumerate(pool) if c["on_frontier"]}
    outside = sum(c["on_frontier"] for c in candidates if c not in pool)
    return len(mine ^ theirs) + outside


def sigma_from_candidates(
    candidates: list[dict[str, Any]], again: dict[str, list[dict[str, Any]]], device: str
) -> dict[str, float]:
    """The noise model's sigma had it learned from the candidates' own repeats instead."""
    groups: dict[str, list[list[float]]] = {m: [] for m in METRICS}
    for c in candidates:
        ok = [g for g in again[c["arch_id"]] if "failure" not in g]
        for m in METRICS:
            groups[m].append([first_values(c)[m], *(g[m] for g in ok)])
    return dict(fit(groups, device, prior_dof=0).reference_sigma)


def cost(
    candidates: list[dict[str, Any]], counters: dict[str, int], readings: list[dict[str, Any]]
) -> dict[str, Any]:
    """Device-seconds: candidates (their total_s), reference readings (the agent's count x
    the reference's median total_s here), busy retries (count x the kept total_s)."""
    cand_s = sum(c["measurement"]["total_s"] for c in candidates)
    ref_each = median([r["total_s"] for r in readings if "failure" not in r]) or 0.0
    carried = len(agent_reference_readings(candidates))
    ref_count = counters.get("reference_measurements", carried)
    retries = [len(c["measurement"].get("busy_attempts") or []) for c in candidates]
    busy_s = sum(n * c["measurement"]["total_s"] for n, c in zip(retries, candidates))
    return {
        "candidates_s": cand_s,
        "reference_measurements": ref_count,
        "reference_readings_carried": carried,
        "reference_each_s": ref_each,
        "reference_s": ref_count * ref_each,
        "busy_retries": sum(retries),
        "busy_retries_counter": counters.get("busy_retries"),
        "busy_s": busy_s,
        "busy_pause_s": sum(retries) * BUSY_PAUSE_S,
        "extra_share": (ref_count * ref_each + busy_s) / cand_s if cand_s else None,
    }


def analyse(
    found: dict[str, Any], again: dict[str, Any], readings: list[dict[str, Any]], repeats: int
) -> dict[str, Any]:
    candidates = [c for c in found["candidates"] if not c["reused"]]
    noise = found["search"]["noise"]
    rel = noise["interval_rel"]
    request = found["search"]["request"]
    rows = [candidate_row(c, again[c["arch_id"]]) for c in candidates]
    frontier = frontier_stability.analyse(rows, rel, repeats)
    frontier["server_disagreements"] = server_agreement(candidates, rel)
    return {
        "coverage": {
            "all": coverage(candidates, again, quiet=False),
            "quiet": coverage(candidates, again, quiet=True),
        },
        "spread": widths_and_spread(candidates, again),
        "memory": memory_repeatability(
            candidates, again, agent_reference_readings(candidates), readings
        ),
        "frontier": frontier,
        "sigma": {
            "server": noise["sigma"],
            "from_candidates": sigma_from_candidates(
                candidates, again, request["measurement"]["device"]
            ),
        },
        "cost": cost(candidates, found["agent_counters"], readings),
    }


def targets(a: dict[str, Any]) -> dict[str, bool | None]:
    cov = a["coverage"]["all"]
    plain, noisy = a["frontier"]["plain"], a["frontier"]["noise_aware"]
    mem = a["memory"]["candidates"]["max"]

    def at_least(value: float | None, bound: float) -> bool | None:
        return None if value is None else value >= bound

    return {
        "latency_coverage_ge_90": at_least(cov["latency_ms"]["hwnas"], COVERAGE_TARGET),
        "memory_coverage_ge_90": at_least(cov["memory_mb"]["hwnas"], COVERAGE_TARGET),
        "memory_cv_le_3pct": None if mem is None else mem <= MEMORY_CV_TARGET,
        "noise_frontier_keeps_ge_90": at_least(noisy["kept_share"], KEPT_TARGET),
        "noise_flips_le_half_plain": noisy["flips"] <= 0.5 * plain["flips"],
        "noise_decision_flips_le_half_plain": (
            a["frontier"]["decisions"]["flips"] <= 0.5 * plain["flips"]
        ),
    }


def candidate_row(c: dict[str, Any], again: list[dict[str, Any]]) -> dict[str, Any]:
    m = c["measurement"]
    return {
        "arch_id": c["arch_id"],
        "decoder_params": c["objectives"]["decoder_params"],
        **first_values(c),
        "ci_ms": [m["latency"]["ci_low_ms"], m["latency"]["ci_high_ms"]],
        "intervals": c["intervals"],
        "busy": c["busy"],
        "feasible": c["feasible"],
        "reused": c["reused"],
        "on_frontier": c["on_frontier"],
        "total_s": m["total_s"],
        "again": again,
    }


# Latency bands (ms) for `latency_shift`: small models move most between processes.
SHIFT_BANDS = ((0.0, 30.0), (30.0, 80.0), (80.0, math.inf))


def latency_shift(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How re-measured latencies moved against the first measurements (saved rows, as
    `candidate_row` writes them): the median log ratio overall and per latency band, the
    95th percentile of its size, and the misses of the run's own intervals below and above."""
    pairs = [
        (row["latency_ms"], row["again"][0]["latency_ms"], row["intervals"]["latency_ms"])
        for row in rows
        if row["again"] and "failure" not in row["again"][0]
    ]
    logs = np.array([math.log(again / first) for first, again, _ in pairs])
    bands = {}
    for low, high in SHIFT_BANDS:
        inside = [math.log(a / f) for f, a, _ in pairs if low <= f < high]
        bands[f"{low:g}-{high:g} ms"] = {"n": len(inside), "median_log": median(inside)}
    return {
        "n": len(pairs),
        "median_log": float(np.median(logs)) if len(logs) else None,
        "p95_abs_log": float(np.quantile(np.abs(logs), 0.95)) if len(logs) else None,
        "misses_below": sum(a < lo for _, a, (lo, _) in pairs),
        "misses_above": sum(a > hi for _, a, (_, hi) in pairs),
        "bands": bands,
    }


# A saved run's latency shift: python -m bench.reproducibility_analysis RESULT.json
if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    saved = json.loads(Path(sys.argv[1]).read_text())
    print(json.dumps(latency_shift(saved["candidates"]), indent=1))
