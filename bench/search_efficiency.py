"""Search efficiency: how many device measurements each strategy needs to reach LTS's frontier.

In LTS the proxy is free and device measurements are the whole cost: a search measures about
3,000 candidates. This script runs every strategy on the same three objectives (maximise the
analytic decoder_params, minimise latency_ms and memory_mb) against a device replayed from a
table of real measurements on this machine (`bench/replay.py`, table made by
`bench/device_table.py --count 300`), one measurement at a time (one agent; `--agents K`: K
measuring at once on the replayed clock, bench.in_flight), and records after
every measurement the count, the cumulative device-seconds (the replayed agent wall time) and
the hypervolume of everything measured so far. Every strategy is judged with one fixed
normalisation: decoder_params from the space's smallest member (reference) to its largest
(ideal); latency and memory from 0 (ideal) to the replayed cost of the largest member.

Strategies: `lts` (LTS Algorithm 1 with the paper's population) at its full budget; `hwnas`
(steady-state + surrogate screening, its defaults, steered as the server steers it: by its
own adaptive normalisation, then by the one the server fixes from the first results; the
benchmark's yardstick is not handed in), `hwnas-residual-gp` (the same with its cost
models corrected by a Gaussian process of their residuals) and `hwnas-per-second` (weighing
each proposal by its predicted device-seconds) at 20% of it; `nsga2` (pymoo's
NSGA-II, population 100) and the peer `optuna-nsga2` (Optuna's NSGA-II sampler, population
100) at LTS's budget; the peers `optuna-tpe` (Optuna's default sampler) and `optuna-gp` (its
Gaussian process sampler), default settings, at their own budgets (a GP trial costs seconds
here); the peer `archai` (Archai 1.0.0's EvolutionParetoSearch, LTS's released code; skipped,
saying how to install it, where it is absent) at `--budget-peers`. It prints markdown:
hypervolume at equal measurement budgets and at equal device-hours, the measurements and
device-hours each strategy needs to reach 99% of LTS's final hypervolume, hwnas against each
peer, and PASS/FAIL for the targets; `--json` writes every curve.

    .venv/bin/python bench/search_efficiency.py --json bench/results/search_efficiency.json
        [--seeds 5] [--budget-lts 3000] [--budget-hwnas 600] [--budget-peers 3000]
        [--budget-tpe 600] [--budget-gp 120] [--space '{"n_layer": {"min": 2, "max": 6}}']
        [--strategies lts hwnas nsga2 optuna-nsga2 optuna-tpe optuna-gp archai]
        [--table bench/data/device_table_gpt2_cpu.json] [--quick]

`--space` overrides settings of the table's space (the replay interpolates any member).
`--report-from RUN.json` prints the report of a run saved by `--json` again, without running
it (given that run's other options). `--reuse RUN.json` takes the curves of the strategies
given with it from a saved run of the same seeds, agents, space and budgets instead of
running them again (a change to one strategy need not re-run the GP's hour); the report and
`--json` say which were reused, from where.

The script is this command line; its parts: bench.normalisation (objectives, scorer, fixed
normalisation), bench.strategy_runs (one search per strategy), bench.curve (the hypervolume
curves), bench.efficiency_tables and bench.efficiency_report (what is printed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from archvocab.registry import parse_space
from archvocab.spaces.gpt2.space import GPT2Space
from bench.efficiency_report import report
from bench.efficiency_tables import CHECKPOINTS
from bench.normalisation import make_normaliser
from bench.replay import DEFAULT_TABLE, DeviceReplay
from bench.script import command_line, fill_preset, shown, write_json
from bench.strategy_runs import HWNAS, STRATEGIES, run_one, without_missing
from search.hypervolume import Normaliser

DEFAULTS = {
    "seeds": 5,
    "budget_lts": 3000,
    "budget_hwnas": 600,
    "budget_peers": None,
    "budget_tpe": 600,
    "budget_gp": 120,
}
QUICK = {
    "seeds": 2,
    "budget_lts": 180,
    "budget_hwnas": 60,
    "budget_peers": 120,
    "budget_tpe": 60,
    # One past GPSampler's 10 random first trials: one fit of the Gaussian process, its
    # slowest step (a run of 11 took 4-11 s in a clean-clone CI run; 30-45 s a fit beside a
    # running suite, ad hoc).
    "budget_gp": 11,
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--budget-lts", type=int, help="default 3000 (LTS's paper budget)")
    parser.add_argument("--budget-hwnas", type=int, help="default 600 (20%% of 3000)")
    parser.add_argument(
        "--budget-peers", type=int, help="nsga2, optuna-nsga2, archai; default --budget-lts"
    )
    parser.add_argument("--budget-tpe", type=int, help="optuna-tpe; default 600")
    parser.add_argument("--budget-gp", type=int, help="optuna-gp; default 120")
    parser.add_argument(
        "--space", type=json.loads, default={}, help="JSON overrides of the table's space"
    )
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument(
        "--agents", type=int, default=1, help="agents measuring at once, replayed (default 1)"
    )
    parser.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    parser.add_argument("--json", type=Path, default=None, help="write every curve here")
    parser.add_argument(
        "--report-from",
        type=Path,
        default=None,
        help="print the report of a run saved by --json (give that run's other options)",
    )
    parser.add_argument(
        "--reuse",
        nargs="+",
        metavar="RUN.json [STRATEGY ...]",
        help="a run saved by --json, then the strategies whose curves to take from it",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"smoke-test defaults instead: {QUICK}"
    )
    args = parser.parse_args(argv)
    fill_preset(args, QUICK if args.quick else DEFAULTS)
    if args.report_from is None:  # a saved run reports what it ran
        args.strategies = without_missing(args.strategies, lambda s: print(s, file=sys.stderr))
    if args.budget_peers is None:
        args.budget_peers = args.budget_lts
    if args.reuse is not None and len(args.reuse) < 2:
        parser.error("--reuse: give a saved run, then at least one of its strategies")
    return args


def reused_runs(args: argparse.Namespace, space: GPT2Space) -> dict[str, list[dict]]:
    """`--reuse`'s curves, after checking that the saved run ran them as this one would; where
    they came from is kept in `args.reused` for the JSON (None: all were run here)."""
    args.reused = None
    if args.reuse is None:
        return {}
    path, names = Path(args.reuse[0]), args.reuse[1:]
    saved = json.loads(path.read_text())
    same = {
        "seeds": (saved["seeds"], args.seeds),
        "agents": (saved["agents"], args.agents),
        "space": (saved["space"], space.to_dict()),
    }
    for name in names:
        if name not in args.strategies or name not in saved["results"]:
            raise SystemExit(
                f"--reuse: {name} is not both in --strategies and in {path}'s runs "
                f"({', '.join(saved['results'])})"
            )
        same[f"budget of {name}"] = (saved["budgets"][name], budgets(args)[name])
    for what, (theirs, ours) in same.items():
        if theirs != ours:
            raise SystemExit(f"--reuse: {path} has {what} {theirs}, this run {ours}")
    args.reused = {"from": shown(path), "command": saved["command"], "strategies": names}
    return {name: saved["results"][name] for name in names}


def budgets(args: argparse.Namespace) -> dict[str, int]:
    return {
        "lts": args.budget_lts,
        **{variant: args.budget_hwnas for variant in HWNAS},
        "nsga2": args.budget_peers,
        "optuna-nsga2": args.budget_peers,
        "optuna-tpe": args.budget_tpe,
        "optuna-gp": args.budget_gp,
        "archai": args.budget_peers,
    }


def run_all(
    args: argparse.Namespace,
    space: GPT2Space,
    replay: DeviceReplay,
    normaliser: Normaliser,
    log: Callable[[str], None],
) -> dict[str, list[dict]]:
    results = reused_runs(args, space)
    for strategy in args.strategies:
        if strategy in results:
            log(f"{strategy}: {len(results[strategy])} runs reused from {args.reuse[0]}")
            continue
        budget = budgets(args)[strategy]
        results[strategy] = []
        for seed in range(args.seeds):
            run = run_one(strategy, space, replay, normaliser, seed, budget, agents=args.agents)
            results[strategy].append(run)
            batch = run["batch"]
            log(
                f"{strategy} seed {seed}: {run['measurements']} measurements, "
                f"hv {run['hv'][-1]:.4f}, {run['device_s'][-1] / 3600:.2f} device-h, "
                f"{run['repeats']} repeats, "
                + (f"batch {batch}, " if batch else "")
                + f"{run['wall_s']:.1f} s"
            )
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    command = command_line(["bench/search_efficiency.py"], argv)
    replay = DeviceReplay.load(args.table)
    space = parse_space({**(replay.space or {}), **args.space})
    normaliser = make_normaliser(replay, space)
    if args.report_from is not None:  # the same command's saved curves, reported again
        saved = json.loads(args.report_from.read_text())
        command, wall_s, results = saved["command"], saved["wall_s"], saved["results"]
    else:
        results = run_all(args, space, replay, normaliser, lambda s: print(s, file=sys.stderr))
        results = {name: results[name] for name in args.strategies}  # in the order asked
        wall_s = time.perf_counter() - started
    lines, summary = report(args, replay, space, results, normaliser, command, wall_s)
    print("\n".join(lines))
    if args.json is not None:
        payload: dict[str, Any] = {
            "command": command,
            "table": shown(args.table),
            "seeds": args.seeds,
            "agents": args.agents,
            "budgets": {s: budgets(args)[s] for s in args.strategies},
            "space": space.to_dict(),
            "normaliser": normaliser.to_dict(),
            "checkpoints": list(CHECKPOINTS),
            "reused": args.reused,
            "wall_s": wall_s,
            "summary": summary,
            "report": lines,
            "results": results,
        }
        write_json(args.json, payload, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
