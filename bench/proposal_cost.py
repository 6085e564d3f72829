"""What strategy hwnas's proposals cost as the fleet grows (issue 20, item 1).

A SteadyStateEngine over LTS's GPT-2 space, with bench/load.py's population (75 initial, 15
parents, 30 mutations and crossovers), is driven as `slots` agents drive it through the
server: asked to fill the slots, then one result told at a time (a random pending one,
seeded) and asked again. Every ask is timed (process CPU). The device is
hwnas.testing.measurements.synthetic_measurement's latency and memory.

Each run is a fresh process. With `--baseline-pythonpath`, every run is made again with another
checkout's `search` package (the same driver, this file), the two interleaved. Reported per
slots: CPU per proposed candidate (median over runs), the ratio, whether both proposed the
same architectures in the same order, and the hypervolume of each run's measured frontier,
all runs of a seed under one normalisation (the worst and best value any of them saw).

    .venv/bin/python -m bench.proposal_cost [--slots 19,50,200] [--results 300] [--seeds 0,1]
        [--baseline-pythonpath /tmp/before] [--json bench/results/proposal_cost.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT_PATH = str(HERE.parent)  # this checkout, as a PYTHONPATH
OBJECTIVES = ["decoder_params", "latency_ms", "memory_mb"]


# -- one run, in a process of its own (imports only the engine's code) ------------------------
def run_engine(slots: int, seed: int, results: int) -> dict:
    from archvocab.spaces.gpt2.space import GPT2Space
    from archvocab.wire import Constraints, Population
    from hwnas.testing.measurements import synthetic_measurement
    from proxies.params import decoder_params, total_params
    from search.strategies.hwnas import SteadyStateEngine

    def scorer(spec) -> dict[str, float]:  # noqa: ANN001 - a GPT2Spec
        return {"decoder_params": float(decoder_params(spec)), "total_params": total_params(spec)}

    engine = SteadyStateEngine(
        GPT2Space(),
        objectives=OBJECTIVES,
        scorer=scorer,
        seed=seed,
        max_evaluations=10 * results + slots,
        population=Population(initial=75, parents=15, mutations=30, crossovers=30),
        constraints=Constraints(),
    )
    order = random.Random(seed)
    told: list[dict[str, float]] = []
    cpu: list[float] = []
    proposed: list[str] = []
    pending: list = []
    while len(told) < results:
        start = time.process_time()
        batch = engine.ask(slots)
        cpu.append(time.process_time() - start)
        proposed += [c.arch_id for c in batch]
        pending += batch
        if not pending:
            break
        candidate = pending.pop(order.randrange(len(pending)))
        got = synthetic_measurement(candidate.spec.to_dict())
        values = {"latency_ms": got["latency_ms"], "memory_mb": got["peak_memory_mb"]}
        engine.tell(candidate.arch_id, values)
        told.append({**candidate.proxies, **values})
    return {
        "cpu_s": sum(cpu),
        "proposed": len(proposed),
        "digest": hashlib.sha256("".join(proposed).encode()).hexdigest()[:16],
        "told": [[row[o] for o in OBJECTIVES] for row in told],
    }


# -- the comparison ---------------------------------------------------------------------------
def child(pythonpath: str | None, slots: int, seed: int, results: int) -> dict:
    """One run in a fresh process, with `pythonpath`'s code (this checkout's when None); this
    file drives it either way."""
    env = {**os.environ, "PYTHONPATH": pythonpath or ROOT_PATH, "PYTHONSAFEPATH": "1"}
    command = [sys.executable, str(Path(__file__)), "--child", str(slots), str(seed), str(results)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def frontier_volumes(runs: list[dict]) -> list[float]:
    """Each run's measured hypervolume, all under one normalisation spanning all of them."""
    from search.hypervolume import Normaliser, hypervolume

    rows = [row for run in runs for row in run["told"]]
    columns = list(zip(*rows, strict=True))
    # decoder_params is maximised (ideal: the largest), latency and memory minimised.
    ideal = {OBJECTIVES[0]: max(columns[0])}
    reference = {OBJECTIVES[0]: min(columns[0])}
    for name, column in zip(OBJECTIVES[1:], columns[1:], strict=True):
        ideal[name], reference[name] = min(column), max(column)
    normaliser = Normaliser(OBJECTIVES, ideal, reference)
    volumes = []
    for run in runs:
        points = normaliser.points([dict(zip(OBJECTIVES, row, strict=True)) for row in run["told"]])
        volumes.append(round(hypervolume(points), 5))
    return volumes


def compare(args: argparse.Namespace) -> dict:
    versions = {"this": None} | (
        {"baseline": args.baseline_pythonpath} if args.baseline_pythonpath else {}
    )
    report = []
    for slots in args.slots:
        runs: dict[str, list[dict]] = {name: [] for name in versions}
        for seed in args.seeds:
            names = list(versions) if seed % 2 == 0 else list(reversed(versions))
            for name in names:  # interleaved: the machine's drift falls on both
                run = child(versions[name], slots, seed, args.results)
                run["seed"] = seed
                runs[name].append(run)
                per = 1000 * run["cpu_s"] / max(1, run["proposed"])
                print(f"slots {slots}, seed {seed}, {name}: {per:.2f} ms per candidate", flush=True)
        row: dict = {"slots": slots}
        for seed in args.seeds:
            of_seed = [run for name in versions for run in runs[name] if run["seed"] == seed]
            for run, volume in zip(of_seed, frontier_volumes(of_seed), strict=True):
                run["hypervolume"] = volume
        for name, made in runs.items():
            per = [1000 * r["cpu_s"] / max(1, r["proposed"]) for r in made]
            row[name] = {
                "ms_per_candidate": round(statistics.median(per), 2),
                "runs_ms_per_candidate": [round(p, 2) for p in per],
                "hypervolume": [r["hypervolume"] for r in made],
                "digests": [r["digest"] for r in made],
            }
        if "baseline" in row:
            row["ratio"] = round(
                row["this"]["ms_per_candidate"] / row["baseline"]["ms_per_candidate"], 3
            )
            row["same_proposals"] = row["this"]["digests"] == row["baseline"]["digests"]
        report.append(row)
    return {"results": args.results, "seeds": args.seeds, "rows": report}


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        slots, seed, results = (int(v) for v in argv[1:4])
        print(json.dumps(run_engine(slots, seed, results)))
        return 0
    from bench.machine import commit, machine
    from bench.script import command_line, write_json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--slots", type=lambda s: [int(v) for v in s.split(",")], default=[19, 50, 200]
    )
    parser.add_argument("--results", type=int, default=300)
    parser.add_argument("--seeds", type=lambda s: [int(v) for v in s.split(",")], default=[0, 1])
    parser.add_argument("--baseline-pythonpath", help="another checkout, run the same way")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "proposal_cost.json")
    args = parser.parse_args(argv)
    payload = {
        "command": command_line(["python", "-m", "bench.proposal_cost"], argv),
        "commit": commit(),
        "machine": machine(),
        **compare(args),
    }
    for row in payload["rows"]:
        print(json.dumps(row))
    write_json(args.json, payload, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
