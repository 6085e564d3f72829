"""Scaling with agents: wall-clock time to a fixed hypervolume with 1, 2 and 4 agents.

Each run starts a fresh, real `hwnas serve` (its own temporary SQLite file, loopback port) and
N real agent processes (`bench/replay_agent.py`: the agent's own Worker over HTTP, whose
device is the replayed table of real measurements, `bench/replay.py`, sleeping each
measurement's real device time times `--time-scale`). It then creates an hwnas search
(asynchronous steady-state: one proposal per free live agent) with a fixed hypervolume
normalisation (the one bench/search_efficiency.py judges by: decoder_params from the space's
smallest member to its largest, latency and memory from 0 to the replayed cost of the largest
member) and polls the search's hypervolume trace until it reaches `--target` or the search
ends; then it cancels the search and stops every process.

Wall-clock time to target = the server's time of the first result whose hypervolume is >=
the target minus the search's created_at (both the server's clock, so the polling interval
does not matter). Measurements and device-seconds to the target come from the same trace
point. Configurations are interleaved across seeds (seed 0: 1, 2, 4 agents; seed 1: ...), so
drift of the machine hits all alike. It prints a markdown table and PASS/FAIL for the target
(4 agents at least 3.2x faster than 1 to the same hypervolume); `--json` keeps every run.

    .venv/bin/python -m bench.agent_scaling [--agents 1 2 4] [--seeds 3] [--budget 400]
        [--target 0.335] [--time-scale 0.2] [--table bench/data/device_table_gpt2_cpu.json]
        [--json bench/results/agent_scaling.json] [--quick]

The script is this command line; its parts: bench.replay_fleet (the agent processes),
bench.scaling_run (one run) and bench.scaling_report (what is printed).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from archvocab.spaces.gpt2.space import GPT2Space
from bench.replay import DEFAULT_TABLE, DeviceReplay
from bench.scaling_report import report, summarise
from bench.scaling_run import RunSettings, run_one
from bench.script import command_line, fill_preset, write_json

DEFAULTS = {
    "agents": [1, 2, 4],
    "seeds": 3,
    "budget": 400,
    "target": 0.335,
    "time_scale": 0.2,
    "initial": None,  # the hwnas strategy's own default initial design
    "max_run_s": 900.0,
}
QUICK = {
    "agents": [1, 2],
    "seeds": 1,
    "budget": 16,
    "target": 0.2,
    "time_scale": 0.02,
    "initial": 6,
    "max_run_s": 120.0,
}


def normalisation(table: Path) -> dict[str, dict[str, float]]:
    """The fixed hypervolume normalisation bench/search_efficiency.py judges every strategy by."""
    from bench.normalisation import make_normaliser  # search code: only the bench uses it

    return make_normaliser(DeviceReplay.load(table), GPT2Space()).to_dict()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, nargs="+", default=None)
    parser.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1")
    parser.add_argument("--budget", type=int, default=None, help="max evaluations per search")
    parser.add_argument("--target", type=float, default=None, help="hypervolume to reach")
    parser.add_argument("--time-scale", type=float, default=None)
    parser.add_argument("--initial", type=int, default=None, help="hwnas initial design size")
    parser.add_argument("--max-run-s", type=float, default=None, help="give up a run after")
    parser.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    args = parser.parse_args(argv)
    fill_preset(args, QUICK if args.quick else DEFAULTS)
    if sorted(set(args.agents)) != args.agents or args.agents[0] < 1:
        parser.error("--agents: distinct, increasing counts >= 1")
    return args


def progress_line(seed: int, agents: int, run: Mapping[str, Any]) -> str:
    """One run in a line, as it ends."""
    if run["reached"]:
        got = (
            f"target in {run['wall_s_to_target']:.1f} s, "
            f"{run['measurements_to_target']} measurements, "
            f"{run['device_s_to_target']:.0f} device-s, "
            f"utilisation {run['agent_utilisation']}"
        )
    else:
        got = f"not reached (hypervolume {run['hypervolume_seen']})"
    return (
        f"seed {seed}, {agents} agent(s): {got}; server CPU {run['server_cpu_s']} s for "
        f"{run['results_seen']} results; jobs per agent {run['jobs_done_per_agent']}, "
        f"failures {run['failures']}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    norm = normalisation(args.table)
    settings = RunSettings(
        budget=args.budget,
        target=args.target,
        time_scale=args.time_scale,
        table=args.table,
        norm=norm,
        initial=args.initial,
        max_run_s=args.max_run_s,
    )
    runs: list[dict[str, Any]] = []
    started = time.perf_counter()
    for seed in range(args.seeds):  # interleaved: every configuration once per seed
        for agents in args.agents:
            runs.append(run_one(agents, seed, settings))
            print(progress_line(seed, agents, runs[-1]), file=sys.stderr, flush=True)
    summary = summarise(runs, args.agents)
    text, verdict = report(summary, runs, args)
    print(text)
    if args.json is not None:
        payload = {
            "command": command_line(["python", "-m", "bench.agent_scaling"], argv),
            "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "normalisation": norm,
            "elapsed_s": round(time.perf_counter() - started, 1),
            "summary": summary,
            "verdict": verdict,
            "runs": runs,
        }
        write_json(args.json, payload, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
