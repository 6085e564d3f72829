"""Benchmark: does the memory objective repeat between fresh processes, and at what latency cost?

Specs of the gpt2 and transxl kinds (LTS's released WikiText-103 configs) are each measured
R times through the agent's real path (`agent.measure.measure_candidate`: a fresh process per
measurement, forked from a forkserver), interleaved: repeat by repeat, spec by spec, variant by
variant, so that drift hits every cell alike. Two variants of where memory is read
(`agent.in_process.MEMORY_PASS_ENV`), each in a driver process of its own (a forked measuring
process sees its forkserver's environment, so each variant needs its own forkserver):

- after_latency: the old protocol: keep_heap (glibc: no mmap, no trim) from the start, memory
  read after the latency protocol;
- separate: the new one: memory in its own pass under `agent.memory.fixed_heap` (glibc's
  default thresholds, not sliding: build, then MEMORY_RUNS forward passes), then keep_heap
  and the latency protocol on the same model.

Printed per spec: the mean peak memory and latency, and their coefficients of variation
(sample stdev / mean) between processes, per variant.

    .venv/bin/python bench/memory_repeat.py [--quick] [--repeats 5] [--output all|last]
        [--seq-len 64] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hwnas.ground_truth import require_ground_truth

VARIANTS = ("after_latency", "separate")
SETS = {"gpt2": "random_GPT2_wt103.json", "transxl": "random_TransXL_wt103.json"}
FULL = {"per_kind": 3, "repeats": 5, "seq_len": 64}
QUICK = {"per_kind": 2, "repeats": 3, "seq_len": 32}
# The default protocol, capped so that one measurement takes seconds, not tens of seconds.
PROTOCOL = {"warmup_max_s": 2.0, "max_time_s": 3.0, "timeout_s": 600.0}


def lts_specs(per_kind: int) -> list[dict[str, Any]]:
    """The first `per_kind` configs of each LTS WikiText-103 set, as spec dicts."""
    from archvocab.spaces.gpt2.spec import GPT2Spec
    from archvocab.spaces.transxl.spec import TransXLSpec

    specs = []
    for kind, name in SETS.items():
        parse = GPT2Spec.from_lts_config if kind == "gpt2" else TransXLSpec.from_lts_config
        models = json.loads(require_ground_truth("lts", name).read_text())["models"]
        specs += [parse(m["config"]).to_dict() for m in models[:per_kind]]
    return specs


# -- driver: one per variant, measuring what the parent sends ----------------------------------
def driver() -> int:
    """Read {"spec", "settings"} lines on stdin; answer one JSON line each on stdout."""
    from agent.launch import start_forkserver
    from agent.measure import measure_candidate
    from archvocab.wire import MeasurementResult, MeasurementSettings

    start_forkserver()
    for line in sys.stdin:
        job = json.loads(line)
        outcome = measure_candidate(job["spec"], MeasurementSettings(**job["settings"]))
        if isinstance(outcome, MeasurementResult):
            answer = {
                "memory_mb": outcome.peak_memory_mb,
                "latency_ms": outcome.latency_ms,
                "heap": outcome.details.get("heap"),
                "memory_pass": outcome.details.get("memory_pass"),
                "busy": outcome.provenance.busy,
            }
        else:
            answer = {"failure": f"{outcome.kind}: {outcome.message[:300]}"}
        print(json.dumps(answer), flush=True)
    return 0


class Driver:
    def __init__(self, variant: str) -> None:
        env = {**os.environ, "HWNAS_MEMORY_PASS": variant}
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--driver"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def measure(self, spec: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"spec": spec, "settings": settings}) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


# -- the benchmark ------------------------------------------------------------------------------
def cv(values: list[float]) -> float:
    if len(values) < 2 or statistics.fmean(values) == 0:
        return float("nan")
    return statistics.stdev(values) / statistics.fmean(values)


def run(args: argparse.Namespace) -> dict[str, Any]:
    preset = QUICK if args.quick else FULL
    repeats = args.repeats or preset["repeats"]
    settings = {**PROTOCOL, "seq_len": args.seq_len or preset["seq_len"], "output": args.output}
    specs = lts_specs(preset["per_kind"])
    drivers = {v: Driver(v) for v in VARIANTS}
    readings: dict[str, dict[str, list[dict[str, Any]]]] = {
        v: {str(i): [] for i in range(len(specs))} for v in VARIANTS
    }
    started = time.monotonic()
    try:
        for rep in range(repeats):
            for i, spec in enumerate(specs):
                order = VARIANTS if (rep + i) % 2 == 0 else VARIANTS[::-1]
                for variant in order:
                    answer = drivers[variant].measure(spec, settings)
                    readings[variant][str(i)].append(answer)
                    print(f"rep {rep} spec {i} ({spec['kind']}) {variant}: {answer}", flush=True)
    finally:
        for d in drivers.values():
            d.close()
    return {
        "settings": settings,
        "repeats": repeats,
        "specs": specs,
        "readings": readings,
        "seconds": time.monotonic() - started,
    }


def table(result: dict[str, Any]) -> list[str]:
    lines = [
        f"settings {result['settings']}, {result['repeats']} fresh processes per cell, "
        f"{result['seconds']:.0f} s",
        "| spec | kind | variant | memory MB (mean) | memory CV | latency ms (mean) | "
        "latency CV | busy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    worst = {v: 0.0 for v in VARIANTS}
    for i, spec in enumerate(result["specs"]):
        for variant in VARIANTS:
            ok = [r for r in result["readings"][variant][str(i)] if "failure" not in r]
            mem = [r["memory_mb"] for r in ok]
            lat = [r["latency_ms"] for r in ok]
            busy = sum(r["busy"] for r in ok)
            if not ok:
                lines.append(f"| {i} | {spec['kind']} | {variant} | failed | | | | |")
                continue
            worst[variant] = max(worst[variant], cv(mem))
            lines.append(
                f"| {i} | {spec['kind']} | {variant} | {statistics.fmean(mem):.1f} | "
                f"{cv(mem):.1%} | {statistics.fmean(lat):.2f} | {cv(lat):.1%} | {busy} |"
            )
    lines.append("worst memory CV: " + ", ".join(f"{v} {worst[v]:.1%}" for v in VARIANTS))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="2 specs per kind, 3 repeats")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--seq-len", type=int, default=None)
    parser.add_argument("--output", choices=("last", "all"), default="all")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.driver:
        return driver()
    result = run(args)
    print("\n".join(table(result)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
