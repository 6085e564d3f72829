"""Measure a table of real device measurements for replaying searches (bench/search_efficiency.py).

Architectures are sampled uniformly from a space (the service's default GPT-2 space unless
--space says otherwise) and each is measured through the agent's real path
(`agent.measure.measure_candidate`: fresh process, latency protocol, memory high-water mark)
with the service's default measurement settings. Every row keeps the spec, its analytic
features, the measured latency and memory, and the agent-side wall time of the measurement
(the device-seconds a search spends on it). The file is rewritten after every row, so an
interrupted run leaves a usable table.

    .venv/bin/python bench/device_table.py [--count 300] [--seed 1] [--space '{"kind":"gpt2"}']
        [--out bench/data/device_table_gpt2_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
import time
from pathlib import Path

from agent.fingerprint import device_fingerprint
from agent.measure import measure_candidate
from archvocab.registry import parse_space
from archvocab.wire import Failure, MeasurementSettings
from proxies.flops import flops
from proxies.params import decoder_params, total_params

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "data" / "device_table_gpt2_cpu.json"


def sample_specs(space_dict: dict, count: int, seed: int) -> list:
    space = parse_space(space_dict)
    rng = random.Random(seed)
    specs: dict[str, object] = {}
    while len(specs) < count:
        spec = space.sample(rng)
        specs.setdefault(spec.arch_id, spec)
    return list(specs.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--space", default="{}", help="the space as JSON (default: gpt2)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    space_dict = parse_space(json.loads(args.space)).to_dict()
    settings = MeasurementSettings()
    table = {
        "command": "bench/device_table.py "
        + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        "fingerprint": device_fingerprint().model_dump(mode="json"),
        "settings": settings.model_dump(mode="json"),
        "space": space_dict,
        "rows": [],
    }
    specs = sample_specs(space_dict, args.count, args.seed)
    for index, spec in enumerate(specs):
        start = time.perf_counter()
        outcome = measure_candidate(spec.to_dict(), settings)
        wall = time.perf_counter() - start
        if isinstance(outcome, Failure):
            print(f"{spec.arch_id}: {outcome.kind}: {outcome.message}", file=sys.stderr)
            continue
        table["rows"].append(
            {
                "arch_id": spec.arch_id,
                "spec": spec.to_dict(),
                "decoder_params": decoder_params(spec),
                "total_params": total_params(spec),
                "flops": flops(spec),
                "latency_ms": outcome.latency_ms,
                "memory_mb": outcome.peak_memory_mb,
                "wall_s": round(wall, 3),
                "busy": outcome.provenance.busy,
            }
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(table, indent=1) + "\n")
        tmp.replace(args.out)
        print(
            f"{index + 1}/{len(specs)} {spec.arch_id} {outcome.latency_ms:.2f} ms "
            f"{outcome.peak_memory_mb:.1f} MB {wall:.1f} s",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
