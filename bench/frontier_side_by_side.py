"""LTS's full-budget frontier and hwnas's real-agent frontier, measured side by side now.

`bench/confirm_real.py` compares a real hwnas run with LTS on the replay, and the machine's
drift between the table and the run confounds that comparison. This script removes the
drift: it takes LTS's frontier after 3,000 replayed measurements and the frontier hwnas
found with real agents (from confirm_real's JSON), picks from each the `k` points that
together hold the most hypervolume (greedy, in each frontier's own values), and measures all
of them again through the agent's own path, alternating between the two sets, with the
space's largest member (the reference point) measured before and after. Both sets are then
judged by the same normalisation, with the reference measured in this run.

    .venv/bin/python -m bench.frontier_side_by_side --real bench/results/confirm_real.json --k 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from agent.measure import measure_candidate
from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.wire import MeasurementSettings
from bench.greedy_bound import greedy_order
from bench.normalisation import OBJECTIVES, extremes, make_normaliser
from bench.replay import DeviceReplay
from bench.strategy_runs import make_engine
from search.hypervolume import Normaliser, hypervolume


def lts_frontier(replay: DeviceReplay, norm: Normaliser, seed: int) -> list[dict]:
    """LTS's frontier after 3,000 replayed measurements: specs with their replayed values."""
    engine = make_engine("lts", GPT2Space(), seed, 3000)
    while batch := engine.ask(1):
        for c in batch:
            got = replay.measure(c.spec)
            engine.tell(c.arch_id, {"latency_ms": got.latency_ms, "memory_mb": got.memory_mb})
    return [
        {"spec": c.spec.to_dict(), "values": engine.objective_values(c.arch_id)}
        for c in engine.frontier()
    ]


def real_frontier(path: Path) -> list[dict]:
    real = json.loads(path.read_text())["real"]
    return [
        {"spec": c["spec"], "values": c["objectives"]}
        for c in real["candidates"]
        if c["on_frontier"]
    ]


def greedy(points: list[dict], norm: Normaliser, k: int) -> list[dict]:
    """The k points that together hold the most hypervolume, picked one at a time."""
    return [points[i] for i in greedy_order(norm.points([p["values"] for p in points]), k)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", type=Path, default=Path("bench/results/confirm_real.json"))
    parser.add_argument("--k", type=int, default=15)
    parser.add_argument("--lts-seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    replay = DeviceReplay.load()
    bench = make_normaliser(replay, GPT2Space())
    real_run = json.loads(args.real.read_text())
    measured_ref = real_run["anchor"]["largest"]
    in_run = Normaliser(OBJECTIVES, bench.ideal, {**bench.reference, **measured_ref})
    sets = {
        "lts-3000 (replay)": greedy(lts_frontier(replay, bench, args.lts_seed), bench, args.k),
        "hwnas (real agents)": greedy(real_frontier(args.real), in_run, args.k),
    }
    settings = MeasurementSettings(**replay.settings)
    largest = extremes(GPT2Space())[0].to_dict()
    refs = [measure_candidate(largest, settings)]
    again: dict[str, list[dict]] = {name: [] for name in sets}
    for pair in zip(*sets.values(), strict=False):  # alternate: drift hits both alike
        for name, point in zip(sets, pair, strict=True):
            m = measure_candidate(point["spec"], settings)
            params = float(point["values"]["decoder_params"])
            again[name].append(
                {
                    "decoder_params": params,
                    "latency_ms": m.latency_ms,
                    "memory_mb": m.peak_memory_mb,
                }
            )
    refs.append(measure_candidate(largest, settings))
    reference = {
        "latency_ms": statistics.mean(r.latency_ms for r in refs),
        "memory_mb": statistics.mean(r.peak_memory_mb for r in refs),
    }
    now = Normaliser(OBJECTIVES, bench.ideal, {**bench.reference, **reference})
    hv = {name: hypervolume(now.points(rows)) for name, rows in again.items()}
    lts_name, hwnas_name = list(sets)
    lines = [
        f"k = {args.k} points per frontier, measured again now, alternating; largest member "
        f"{refs[0].latency_ms:.1f} / {refs[1].latency_ms:.1f} ms before / after",
        "",
        "| frontier | points | hypervolume, measured now |",
        "|---|---|---|",
        *(f"| {name} | {len(again[name])} | {hv[name]:.4f} |" for name in sets),
        "",
        f"hwnas / LTS-3000: {hv[hwnas_name] / hv[lts_name]:.3f}",
        f"wall time {time.perf_counter() - started:.0f} s; command: bench/frontier_side_by_side.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
    ]
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"sets": sets, "again": again, "hv": hv, "report": lines}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
