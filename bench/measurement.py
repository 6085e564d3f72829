"""Benchmark: how far the agent's measurements can be trusted, and what they cost.

Everything goes through the agent's real path (`agent.measure.measure_candidate`: a fresh
process per candidate, the latency protocol, memory high-water marks), on this machine.

1. Repeatability: N architectures sampled from LTS's GPT-2 space (adaptive embedding k = 4, as
   LTS searches) are each measured R times, round-robin so that drift hits all of them alike.
   Reported: the coefficient of variation of each architecture's R medians, and the Spearman
   correlation of the latency ranking between every pair of complete runs.
2. Overhead: a real `hwnas serve` on loopback and the agent's own job loop (bench/agent_loop.py)
   measure a search's candidates; per candidate, the agent's wall time from its claim request
   to the accepted result that is not timed inference (HTTP, process start, build, warm-up,
   statistics), as a share of the timed time.
3. LTS's reference architectures: GPT-2 small (d_model 768, d_inner 3072, 12 heads, full
   embedding) scaled in depth only, 1..16 layers: latency and memory against layer count.

    .venv/bin/python bench/measurement.py [--archs 10] [--repeats 5] [--layers 1-16]
        [--agent-jobs 20] [--runtime torch|onnxruntime] [--json F]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from typing import Any

from scipy.stats import spearmanr

from agent.measure import measure_candidate
from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec
from archvocab.wire import Failure, MeasurementResult, MeasurementSettings
from bench.agent_loop import agent_loop_timing
from proxies.params import decoder_params

LATENCY_FLOOR_MS = 5.0  # the CV target applies to models above this


def lts_architectures(count: int, seed: int) -> list[GPT2Spec]:
    space = GPT2Space.from_dict({"div_val": [4]})
    rng = random.Random(seed)
    specs: dict[str, GPT2Spec] = {}
    while len(specs) < count:
        spec = space.sample(rng)
        specs.setdefault(spec.arch_id, spec)
    return sorted(specs.values(), key=decoder_params)


def gpt2_small(n_layer: int) -> GPT2Spec:
    return GPT2Spec(
        n_layer=n_layer,
        d_model=768,
        d_inner=(3072,) * n_layer,
        n_head=(12,) * n_layer,
        d_embed=768,
        div_val=1,
        cutoffs=(),
    )


def measure(spec: GPT2Spec, settings: MeasurementSettings) -> tuple[MeasurementResult, float]:
    """The result and the agent-side wall time of one measurement."""
    start = time.perf_counter()
    outcome = measure_candidate(spec.to_dict(), settings)
    wall = time.perf_counter() - start
    if isinstance(outcome, Failure):
        raise RuntimeError(f"{spec.arch_id}: {outcome.kind}: {outcome.message}")
    return outcome, wall


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values)


def repeatability(specs: list[GPT2Spec], repeats: int, settings: MeasurementSettings) -> dict:
    runs: list[list[tuple[MeasurementResult, float]]] = []
    for r in range(repeats):
        run = []
        for spec in specs:
            run.append(measure(spec, settings))
            print(f"  run {r + 1}/{repeats}: {spec.arch_id} done", file=sys.stderr)
        runs.append(run)
    rows = []
    for i, spec in enumerate(specs):
        results = [run[i][0] for run in runs]
        medians = [m.latency_ms for m in results]
        rows.append(
            {
                "arch_id": spec.arch_id,
                "decoder_params": decoder_params(spec),
                "median_ms": statistics.median(medians),
                "cv": cv(medians),
                "ci_rel": statistics.median(m.latency.ci_rel for m in results),
                "samples": statistics.median(m.latency.samples for m in results),
                "stop_reasons": sorted({m.latency.stop_reason for m in results}),
                "memory_mb": statistics.median(m.peak_memory_mb for m in results),
                "memory_cv": cv([m.peak_memory_mb for m in results]),
                "busy": sum(m.provenance.busy for m in results),
            }
        )
    rhos = []
    for a, b in itertools.combinations(range(repeats), 2):
        rho = spearmanr([m.latency_ms for m, _ in runs[a]], [m.latency_ms for m, _ in runs[b]])
        rhos.append(float(rho.statistic))
    above = [row["cv"] for row in rows if row["median_ms"] > LATENCY_FLOOR_MS]
    return {
        "rows": rows,
        "spearman_pairs": rhos,
        "cv_median": statistics.median(above) if above else None,
        "cv_max": max(above) if above else None,
    }


def overhead(jobs: list[dict]) -> dict:
    """Per job, the agent's wall time that is not timed inference, relative to the timed time,
    and the median seconds of each part: HTTP (claim, heartbeats, report), process start and
    result transfer, build (and load), warm-up, timed, and the rest (statistics, snapshots)."""
    shares = [(j["wall_s"] - j["timed_s"]) / j["timed_s"] for j in jobs]
    parts = {
        "http": [j["wall_s"] - j["measure_s"] for j in jobs],
        "spawn": [j["measure_s"] - j["process_s"] for j in jobs],
        "build": [j["build_s"] for j in jobs],
        "warmup": [j["warmup_s"] for j in jobs],
        "timed": [j["timed_s"] for j in jobs],
        "other": [j["process_s"] - j["build_s"] - j["warmup_s"] - j["timed_s"] for j in jobs],
    }
    return {
        "jobs": len(jobs),
        "per_job": jobs,
        "share_median": statistics.median(shares),
        "share_max": max(shares),
        "share_total": sum(j["wall_s"] - j["timed_s"] for j in jobs)
        / sum(j["timed_s"] for j in jobs),
        "seconds_median": {k: statistics.median(v) for k, v in parts.items()},
    }


def layer_scaled(layers: list[int], settings: MeasurementSettings) -> list[dict]:
    rows = []
    for n_layer in layers:
        spec = gpt2_small(n_layer)
        m, wall = measure(spec, settings)
        print(f"  {n_layer} layers: {m.latency_ms:.1f} ms", file=sys.stderr)
        rows.append(
            {
                "n_layer": n_layer,
                "decoder_params": decoder_params(spec),
                "median_ms": m.latency_ms,
                "p90_ms": m.latency.p90_ms,
                "ci_rel": m.latency.ci_rel,
                "samples": m.latency.samples,
                "memory_mb": m.peak_memory_mb,
                "weights_mb": m.memory.weights_mb,
                "build_s": m.build_s,
                "wall_s": wall,
                "busy": m.provenance.busy,
            }
        )
    return rows


def print_report(report: dict[str, Any]) -> None:
    rep = report["repeatability"]
    print(f"\n## Repeatability ({report['repeats']} round-robin runs of {report['archs']} archs)\n")
    print("| arch | decoder params | median ms | CV of medians | CI +- | samples | stop | MB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rep["rows"]:
        print(
            f"| {r['arch_id'][:8]} | {r['decoder_params'] / 1e6:.1f}M | {r['median_ms']:.1f} "
            f"| {r['cv'] * 100:.1f}% | {r['ci_rel'] * 100:.1f}% | {r['samples']:.0f} "
            f"| {'/'.join(r['stop_reasons'])} | {r['memory_mb']:.0f} |"
        )
    rhos = rep["spearman_pairs"]
    if rep["cv_median"] is not None:
        print(
            f"\nCV of the median over archs above {LATENCY_FLOOR_MS:g} ms: median "
            f"{rep['cv_median'] * 100:.2f}%, max {rep['cv_max'] * 100:.2f}%"
        )
    if rhos:
        print(
            f"Spearman between complete runs ({len(rhos)} pairs): min {min(rhos):.3f}, "
            f"median {statistics.median(rhos):.3f}"
        )
    busy = sum(r["busy"] for r in rep["rows"])
    print(f"Measurements flagged busy: {busy} of {report['repeats'] * report['archs']}")
    ov = report["overhead"]
    if ov:
        secs = ov["seconds_median"]
        print(
            f"\n## Overhead ({ov['jobs']} jobs through a real server and the agent's loop)\n\n"
            "Not-timed share of the agent's time per candidate, relative to the timed time: "
            f"median {ov['share_median'] * 100:.0f}%, max {ov['share_max'] * 100:.0f}%, "
            f"all jobs together {ov['share_total'] * 100:.0f}%.\nMedian seconds per candidate: "
            + ", ".join(f"{k} {v:.3f}" for k, v in secs.items())
        )
    rows = report["layer_scaled"]
    if rows:
        print("\n## Layer-scaled GPT-2 small (d_model 768, d_inner 3072, 12 heads)\n")
        print("| layers | decoder params | median ms | p90 ms | CI +- | MB | weights MB | busy |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['n_layer']} | {r['decoder_params'] / 1e6:.1f}M | {r['median_ms']:.1f} "
                f"| {r['p90_ms']:.1f} | {r['ci_rel'] * 100:.1f}% | {r['memory_mb']:.0f} "
                f"| {r['weights_mb']:.0f} | {'yes' if r['busy'] else ''} |"
            )
        n = [r["n_layer"] for r in rows]
        if len(rows) > 2:
            lat = spearmanr(n, [r["median_ms"] for r in rows]).statistic
            mem = spearmanr(n, [r["memory_mb"] for r in rows]).statistic
            print(f"\nSpearman(layers, latency) {lat:.3f}; Spearman(layers, memory) {mem:.3f}")


def parse_layers(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--layers", default="1-16", help="layer-scaled range, e.g. 1-16; 0 skips")
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--agent-jobs", type=int, default=20, help="jobs for the overhead section; 0 skips"
    )
    parser.add_argument("--runtime", choices=["torch", "onnxruntime"], default="torch")
    parser.add_argument("--json", help="also write the raw report here")
    args = parser.parse_args()
    settings = MeasurementSettings(
        runtime=args.runtime, seq_len=args.seq_len, threads=args.threads, timeout_s=600
    )
    specs = lts_architectures(args.archs, args.seed)
    print(f"settings: {settings.model_dump()}", file=sys.stderr)
    report: dict[str, Any] = {
        "archs": args.archs,
        "repeats": args.repeats,
        "settings": settings.model_dump(),
        "repeatability": repeatability(specs, args.repeats, settings),
        "overhead": overhead(agent_loop_timing(args.agent_jobs, settings, args.seed))
        if args.agent_jobs
        else None,
        "layer_scaled": []
        if args.layers == "0"
        else layer_scaled(parse_layers(args.layers), settings),
    }
    print_report(report)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
