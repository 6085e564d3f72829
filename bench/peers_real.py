"""hwnas against the general-purpose optimisers on real measurements, side by side (issue 22).

Every contender searches the same space with the same budget, measuring on this machine
through the agent's own path (`agent.measure.measure_candidate`: the model built and timed in
fresh processes, the agent's protocol), one measurement at a time, seed by seed, contenders in
a rotating order so that the machine's drift falls on all of them alike:

- `hwnas` and `lts`: hwnas's strategies as a user runs them (defaults; hwnas steered as the
  server steers it, bench.strategy_runs.Steer);
- `optuna-nsga2`, `optuna-tpe`, `optuna-gp`: Optuna's samplers as their users write them
  (bench.peers.optuna_peer);
- `archai`: Archai 1.0.0's EvolutionParetoSearch, LTS's released code (bench.peers.archai_peer;
  an optional extra, skipped with a message saying how to install it where it is absent).

Values taken during a search drift with the machine, so the frontiers are judged afterwards:
each run's frontier at every checkpoint (its first 30, 60, ... measurements) is measured again,
all runs of a seed interleaved point by point, with the space's largest member (the drift
reference) measured every `--reference-every` points. Scores use those re-measured values,
under one normalisation from the reference's median (bench.normalisation.normaliser_for);
also with each latency scaled by the reference's drift at its time.

Per contender and checkpoint: re-measured hypervolume, frontier size, device-seconds and wall
time to that count, proposals that repeated a measured architecture, and the share of the
pooled re-measured frontier of all contenders (of that seed and checkpoint) it holds.

    .venv/bin/python -m bench.peers_real [--seeds 0 1 2] [--budget 60] [--checkpoints 10 ... 120]
        [--contenders hwnas lts optuna-nsga2 optuna-tpe optuna-gp archai] [--measurement '{}']
        [--space ISSUE] [--json bench/results/peers_real.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agent.measure import measure_candidate
from archvocab.registry import parse_space
from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.spaces.gpt2.spec import GPT2Spec
from archvocab.wire import Failure, MeasurementSettings, SearchCreate
from bench.efficiency_report import BUDGETS, EARLY
from bench.markdown_table import table
from bench.normalisation import extremes, normaliser_for, score
from bench.replay import DeviceReplay
from bench.script import command_line, write_json
from bench.strategy_runs import HWNAS, PEERS, Steer, make_engine, peer_search, without_missing
from search.hypervolume import Normaliser, hypervolume
from search.pareto import non_dominated_mask
from search.records import DEVICE_SECONDS

CONTENDERS = ("hwnas", "lts", *PEERS)
# The issue's space: GPT-2 with n_layer 2-6, d_model 128-512, d_inner 256-2048; per-layer
# heads, d_embed and div_val free as in the table's space.
ISSUE_SPACE = {
    "n_layer": {"min": 2, "max": 6, "step": 1},
    "d_model": {"min": 128, "max": 512, "step": 64},
    "d_inner": {"min": 256, "max": 2048, "step": 64},
}
Measure = Callable[[GPT2Spec], dict[str, float]]


class MeasurementFailed(RuntimeError):
    """A model of the space failed to measure: the comparison stops and names it."""


def agent_path(settings: MeasurementSettings) -> Measure:
    """The agent's measuring function, with the seconds each measurement took."""

    def measure(spec: GPT2Spec) -> dict[str, float]:
        started = time.perf_counter()
        got = measure_candidate(spec.to_dict(), settings)
        if isinstance(got, Failure):
            raise MeasurementFailed(f"{spec.arch_id} ({spec.to_dict()}): {got.kind}: {got.message}")
        return {
            "latency_ms": got.latency_ms,
            "memory_mb": got.peak_memory_mb,
            "device_s": time.perf_counter() - started,
        }

    return measure


def search(
    contender: str,
    space: GPT2Space,
    seed: int,
    budget: int,
    measure: Measure,
    hwnas_variant: str = "hwnas",
) -> dict:
    """One contender's search: what it measured, in order, with the values and the seconds;
    contender `hwnas` runs with the settings of `hwnas_variant` (bench.strategy_runs.HWNAS)."""
    started = time.perf_counter()

    def timed(spec: GPT2Spec) -> dict[str, float]:  # and when, from the search's start
        return {**measure(spec), "elapsed_s": time.perf_counter() - started}

    measured: list[tuple[GPT2Spec, dict[str, float]]] = []
    repeats = 0
    if contender in PEERS:
        run = peer_search(contender, space, timed, seed, budget)
        measured, repeats = run.measured, run.repeats
    else:
        variant = hwnas_variant if contender == "hwnas" else contender
        engine = make_engine(variant, space, seed, budget)
        steer = None
        if contender == "hwnas":  # steered as the server steers a search of this space
            steer = Steer(SearchCreate(strategy="hwnas", space=space.to_dict(), seed=seed))
        while not engine.finished and (batch := engine.ask(1)):
            for candidate in batch:
                got = timed(candidate.spec)
                told = {"latency_ms": got["latency_ms"], "memory_mb": got["memory_mb"]}
                engine.tell(candidate.arch_id, {**told, DEVICE_SECONDS: got["device_s"]})
                measured.append((candidate.spec, {**candidate.proxies, **got}))
                if steer is not None:
                    steer.told(engine, {**candidate.proxies, **told})
    return {
        "contender": contender,
        "seed": seed,
        "repeats": repeats,
        "wall_s": time.perf_counter() - started,
        "measured": [{"spec": s.to_dict(), "values": v} for s, v in measured],
    }


def _front(values: Sequence[dict[str, float]]) -> list[int]:
    """Indices of the values whose (decoder_params, latency, memory) none of the others
    dominates (more parameters, less latency and memory are better)."""
    if not values:
        return []
    minimised = np.array([[-v["decoder_params"], v["latency_ms"], v["memory_mb"]] for v in values])
    return [int(i) for i in np.flatnonzero(non_dominated_mask(minimised))]


def front_of(rows: Sequence[dict]) -> list[int]:
    """Indices of the measured rows on their frontier."""
    return _front([r["values"] for r in rows])


def remeasure(
    runs: Sequence[dict],
    checkpoints: Sequence[int],
    reference: GPT2Spec,
    measure: Measure,
    every: int,
) -> tuple[dict[str, dict[str, float]], list[dict]]:
    """Measure again every architecture on any run's frontier at any checkpoint, the runs'
    points interleaved, and the reference every `every` points (and first and last): the
    re-measured values by arch id (in measurement order) and the reference's readings."""
    queues: list[list[dict]] = []
    for run in runs:
        wanted: dict[str, dict] = {}
        for count in checkpoints:
            rows = run["measured"][:count]
            for i in front_of(rows):
                wanted.setdefault(GPT2Spec.from_dict(rows[i]["spec"]).arch_id, rows[i])
        queues.append(list(wanted.values()))
    again: dict[str, dict[str, float]] = {}
    readings: list[dict] = []

    def read_reference() -> None:
        readings.append({"at": len(again), **measure(reference)})

    read_reference()
    for turn in range(max((len(q) for q in queues), default=0)):
        for queue in queues[turn % len(queues) :] + queues[: turn % len(queues)]:
            if turn >= len(queue):
                continue
            spec = GPT2Spec.from_dict(queue[turn]["spec"])
            if spec.arch_id in again:  # two runs found the same architecture
                continue
            again[spec.arch_id] = {**score(spec), **measure(spec), "order": len(again)}
            if len(again) % every == 0:
                read_reference()
    read_reference()
    return again, readings


def drift_at(readings: Sequence[dict], order: float) -> float:
    """The reference's latency at a point's place in the re-measurement order, over its
    median: the nearest reading's."""
    median = statistics.median(r["latency_ms"] for r in readings)
    nearest = min(readings, key=lambda r: abs(r["at"] - order))
    return nearest["latency_ms"] / median


def score_runs(
    runs: Sequence[dict],
    checkpoints: Sequence[int],
    again: dict[str, dict[str, float]],
    readings: Sequence[dict],
    normaliser: Normaliser,
) -> list[dict]:
    """Per run and checkpoint: the frontier's re-measured hypervolume (raw and drift-scaled),
    its size, the device-seconds and wall time so far, and its share of the pooled frontier."""
    scored = []
    for count in checkpoints:
        fronts = {}
        for run in runs:
            rows = run["measured"][:count]
            ids = [GPT2Spec.from_dict(rows[i]["spec"]).arch_id for i in front_of(rows)]
            fronts[run["contender"]] = ids
        pooled = _pooled(fronts, again)
        for run in runs:
            ids = fronts[run["contender"]]
            raw = [again[a] for a in ids]
            scaled = [
                {**v, "latency_ms": v["latency_ms"] / drift_at(readings, v["order"])} for v in raw
            ]
            rows = run["measured"][:count]
            seconds = sum(r["values"]["device_s"] for r in rows)
            scored.append(
                {
                    "contender": run["contender"],
                    "seed": run["seed"],
                    "count": count,
                    "measured": len(rows),
                    "hypervolume": hypervolume(normaliser.points(raw)) if raw else 0.0,
                    "hypervolume_drift_scaled": hypervolume(normaliser.points(scaled))
                    if raw
                    else 0.0,
                    "frontier": len(ids),
                    "device_s": seconds,
                    "wall_s": rows[-1]["values"]["elapsed_s"] if rows else 0.0,
                    "repeats": run["repeats"],
                    "pooled_share": sum(a in pooled for a in ids) / max(len(pooled), 1),
                }
            )
    return scored


def _pooled(fronts: dict[str, list[str]], again: dict[str, dict[str, float]]) -> set[str]:
    """The arch ids on the frontier of every contender's re-measured frontier points together."""
    ids = sorted({a for front in fronts.values() for a in front})
    return {ids[i] for i in _front([again[a] for a in ids])}


def report(
    scored: Sequence[dict], contenders: Sequence[str], checkpoints: Sequence[int]
) -> list[str]:
    """Medians over seeds per contender and checkpoint, and hwnas's ratio to each peer."""
    lines: list[str] = []
    for count in checkpoints:
        rows = []
        for name in contenders:
            mine = [s for s in scored if s["contender"] == name and s["count"] == count]
            if not mine:
                continue

            def med(key: str, rows_: list[dict] = mine) -> float:
                return statistics.median(s[key] for s in rows_)

            rows.append(
                [
                    name,
                    f"{med('hypervolume'):.4f}",
                    f"{med('hypervolume_drift_scaled'):.4f}",
                    f"{med('frontier'):g}",
                    f"{med('pooled_share'):.0%}",
                    f"{med('device_s'):.0f}",
                    f"{med('wall_s'):.0f}",
                    f"{med('repeats'):g}",
                ]
            )
        header = [
            f"at {count} measurements",
            "hypervolume (re-measured)",
            "drift-scaled",
            "frontier",
            "share of pooled frontier",
            "device-s",
            "wall s",
            "repeats",
        ]
        lines += [
            f"Medians over seeds, {count} measurements:",
            "",
            *table(header, rows, "lrrrrrrr"),
            "",
        ]
    lines += ratios(scored, contenders, checkpoints)
    lines += target_lines(scored, contenders)
    return lines


# Issue 22's real-CPU targets, as the replay states them (bench.efficiency_report): the best
# general-purpose optimiser's volume at 60 measurements, reached within 30.
GOAL_COUNT, REACH_LIMIT = BUDGETS[0], EARLY


def target_lines(scored: Sequence[dict], contenders: Sequence[str]) -> list[str]:
    """Issue 22's real-CPU targets, seed by seed, against the best peer on that seed at 60
    measurements: the earliest checkpoint at which hwnas's re-measured hypervolume reaches that
    peer's (a count between checkpoints is not known, so each reach is an upper bound), and
    hwnas's device-seconds to it against the peer's to its 60. PASS on the median seed."""
    peers = [c for c in contenders if c in PEERS]  # hwnas's own `lts` is no peer
    if "hwnas" not in contenders or not peers:
        return []
    by = {(s["contender"], s["seed"], s["count"]): s for s in scored}
    ours = [s for s in sorted(scored, key=lambda s: s["count"]) if s["contender"] == "hwnas"]
    rows, reaches, shares = [], [], []
    for seed in sorted({s["seed"] for s in ours}):
        theirs = [by[(p, seed, GOAL_COUNT)] for p in peers if (p, seed, GOAL_COUNT) in by]
        if not theirs:
            continue
        best = max(theirs, key=lambda s: s["hypervolume"])
        goal = best["hypervolume"]
        reached = next((s for s in ours if s["seed"] == seed and s["hypervolume"] >= goal), None)
        reaches.append(math.inf if reached is None else reached["count"])
        shares.append(math.inf if reached is None else reached["device_s"] / best["device_s"])
        rows.append(
            [
                seed,
                best["contender"],
                f"{best['hypervolume']:.4f}",
                f"{best['device_s']:.0f}",
                "never" if reached is None else f"{reached['count']}",
                "" if reached is None else f"{reached['hypervolume']:.4f}",
                "" if reached is None else f"{reached['device_s']:.0f}",
                "" if reached is None else f"{shares[-1]:.2f}",
            ]
        )
    if not rows:
        return []
    header = [
        "seed",
        f"best peer at {GOAL_COUNT}",
        "its hypervolume",
        "its device-s",
        "hwnas reaches it at (checkpoint)",
        "hwnas's hypervolume there",
        "hwnas's device-s",
        "ratio",
    ]
    reach, share = statistics.median(reaches), statistics.median(shares)
    return [
        "",
        f"Issue 22's targets against the best peer at {GOAL_COUNT} measurements, per seed:",
        "",
        *table(header, rows, "rlrrrrrr"),
        "",
        f"{'PASS' if reach <= REACH_LIMIT else 'FAIL'}: hwnas reaches the best peer's "
        f"{GOAL_COUNT}-measurement hypervolume within {REACH_LIMIT} measurements on the median "
        f"seed (median checkpoint {reach:g})",
        f"{'PASS' if share <= 0.5 else 'FAIL'}: hwnas spends at most half the best peer's "
        f"device-seconds to reach it (median ratio {share:.2f})",
    ]


def _ratio(mine: float, theirs: float) -> float | None:
    """hwnas's hypervolume over a peer's; a peer whose frontier covers nothing loses to any
    volume (inf), and two empty volumes are no comparison (None)."""
    if theirs > 0:
        return mine / theirs
    return math.inf if mine > 0 else None


def ratios(
    scored: Sequence[dict], contenders: Sequence[str], checkpoints: Sequence[int]
) -> list[str]:
    """hwnas's re-measured hypervolume over each peer's, per seed, at each checkpoint."""
    if "hwnas" not in contenders:
        return []
    by = {(s["contender"], s["seed"], s["count"]): s["hypervolume"] for s in scored}
    seeds = sorted({s["seed"] for s in scored})
    rows = []
    for peer in (c for c in contenders if c != "hwnas"):
        for count in checkpoints:
            per_seed = [
                _ratio(by[("hwnas", seed, count)], by[(peer, seed, count)])
                for seed in seeds
                if ("hwnas", seed, count) in by and (peer, seed, count) in by
            ]
            if per_seed:
                wins = sum(r is not None and r > 1 for r in per_seed)
                cells = ", ".join("both 0" if r is None else f"{r:.3f}" for r in per_seed)
                decided = [r for r in per_seed if r is not None]
                middle = f"{statistics.median(decided):.3f}" if decided else "both 0"
                rows.append(
                    [
                        peer,
                        count,
                        middle,
                        cells,
                        f"{wins}/{len(per_seed)}",
                    ]
                )
    header = ["peer", "measurements", "hwnas / peer (median)", "per seed", "seeds hwnas won"]
    return ["hwnas against each peer, re-measured hypervolume:", "", *table(header, rows, "lrrll")]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=60)
    # Fine early checkpoints: when hwnas reaches a peer's volume is known only to one of them.
    parser.add_argument(
        "--checkpoints", type=int, nargs="+", default=[10, 15, 20, 25, 30, 40, 50, 60, 90, 120]
    )
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=list(CONTENDERS))
    parser.add_argument(
        "--measurement", type=json.loads, default={}, help="MeasurementSettings overrides (JSON)"
    )
    parser.add_argument(
        "--space", type=json.loads, default=ISSUE_SPACE, help="overrides of the table's space"
    )
    parser.add_argument("--reference-every", type=int, default=10)
    parser.add_argument(
        "--hwnas-variant",
        choices=list(HWNAS),
        default="hwnas",
        help="the settings contender hwnas runs with (default: its defaults); e.g. "
        "hwnas-per-second weighs each proposal by its predicted device-seconds",
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        help="measure nothing: report the seeds of these earlier --json files together "
        "(runs split by seed, e.g. to fit a lent machine's call limit)",
    )
    args = parser.parse_args(argv)
    args.checkpoints = sorted({c for c in args.checkpoints if c <= args.budget} | {args.budget})
    return args


def run(
    args: argparse.Namespace,
    say: Callable[[str], None],
    seed_done: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every seed's searches, re-measurements and scores; `seed_done` hears the result so far
    after each seed (a run cut short keeps the seeds it finished)."""
    space = parse_space({**(DeviceReplay.load().space or {}), **args.space})  # the table's
    measure = agent_path(MeasurementSettings(**args.measurement))
    largest = extremes(space)[0]
    runs, scored, references = [], [], []
    for seed in args.seeds:
        order = (
            args.contenders[seed % len(args.contenders) :]
            + args.contenders[: seed % len(args.contenders)]
        )
        seed_runs = []
        for name in order:
            say(f"seed {seed}: {name} ...")
            seed_runs.append(search(name, space, seed, args.budget, measure, args.hwnas_variant))
            say(f"seed {seed}: {name} done in {seed_runs[-1]['wall_s']:.0f} s")
        say(f"seed {seed}: measuring the frontiers again ...")
        again, readings = remeasure(
            seed_runs, args.checkpoints, largest, measure, args.reference_every
        )
        reference = {
            m: statistics.median(r[m] for r in readings) for m in ("latency_ms", "memory_mb")
        }
        normaliser = normaliser_for(space, reference["latency_ms"], reference["memory_mb"])
        scored += score_runs(seed_runs, args.checkpoints, again, readings, normaliser)
        runs += seed_runs
        references.append(
            {"seed": seed, "readings": readings, "again": again, "normaliser": normaliser.to_dict()}
        )
        result = {"space": space.to_dict(), "runs": runs, "references": references}
        if seed_done is not None:
            seed_done({**result, "scored": scored})
    return {**result, "scored": scored}


def merged(paths: Sequence[Path]) -> tuple[dict[str, Any], list[str], list[int]]:
    """Earlier results (one per file, on one space and one set of seeds each) as one result,
    with their contenders and checkpoints; the seeds must not overlap."""
    parts = [json.loads(p.read_text()) for p in paths]
    if len({json.dumps(part["space"], sort_keys=True) for part in parts}) > 1:
        raise SystemExit("--merge: the files searched different spaces")
    seeds = [r["seed"] for part in parts for r in part["references"]]
    if len(set(seeds)) < len(seeds):
        raise SystemExit(f"--merge: a seed appears in more than one file: {sorted(seeds)}")
    result = {
        "space": parts[0]["space"],
        "merged_from": [str(p) for p in paths],
        "wall_s": sum(part["wall_s"] for part in parts),
        **{
            key: [x for part in parts for x in part[key]]
            for key in ("runs", "references", "scored")
        },
    }
    contenders = list(dict.fromkeys(s["contender"] for s in result["scored"]))
    checkpoints = sorted({s["count"] for s in result["scored"]})
    return result, contenders, checkpoints


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()

    def written(result: dict[str, Any]) -> list[str]:
        """The report of `result`; with --json, the result and report written there."""
        lines = report(result["scored"], args.contenders, args.checkpoints)
        if args.json is not None:
            command = command_line(["bench/peers_real.py"], argv)
            wall_s = time.perf_counter() - started
            write_json(args.json, {"command": command, "wall_s": wall_s, **result, "report": lines})
        return lines

    if args.merge:
        result, contenders, checkpoints = merged(args.merge)
        args.contenders, args.checkpoints = contenders, checkpoints
    else:  # each seed written as soon as it is scored: a run cut short keeps those it finished
        say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        args.contenders = without_missing(args.contenders, say)
        result = run(args, say, written)
    print("\n".join(written(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
