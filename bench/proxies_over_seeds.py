"""Proxies against published ground truth, with their spread over seeds and their cost.

`hwnas proxies validate` gives one seed's figures; this benchmark repeats every
data-dependent proxy over several seeds (the model's random weights and the minibatch both
come from the seed) and reports the median Spearman, Kendall and top-k common ratio with
their range, and the median compute time per architecture. Zero-cost proxies do not depend
on a seed and run once.

    .venv/bin/python bench/proxies_over_seeds.py --set lts/random_TransXL_wt103 --limit 60 \\
        --seeds 3 --proxy decoder_params --proxy snip --proxy grad_norm

`--limit N` takes every k-th model so that N remain (spread over the whole set, not its
start): the low-cost proxies build every model, which on a 2-core machine takes about a
second each. `--text` reads minibatches from a text file instead of random tokens.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace

from hwnas.ground_truth import require_ground_truth
from hwnas.proxies_cli import one_thread_for_torch
from proxies.ground_truth import SETS, GroundTruthSet, load_set
from proxies.inputs import RANDOM, ProxyInputs
from proxies.registry import PROXIES, get_proxy
from proxies.validate import Validation, validate_many


def thinned(data: GroundTruthSet, limit: int | None) -> GroundTruthSet:
    """Every k-th model, so that at most `limit` remain."""
    if limit is None or limit >= len(data.specs):
        return data
    step = len(data.specs) / limit
    keep = [int(i * step) for i in range(limit)]
    return replace(
        data, specs=[data.specs[i] for i in keep], targets=[data.targets[i] for i in keep]
    )


def _summary(runs: list[Validation]) -> dict:
    def stat(field: str) -> dict:
        values = [getattr(r, field) for r in runs]
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    first = runs[0]
    return {
        "set": first.set,
        "proxy": first.proxy,
        "cost": PROXIES[first.proxy].cost,
        "models": first.models,
        "target": first.target,
        "seeds": len(runs),
        "spearman": stat("spearman"),
        "kendall": stat("kendall"),
        "top_k_common": stat("top_k_common"),
        "ms_per_arch": stat("ms_per_arch"),
    }


def run(args: argparse.Namespace) -> list[dict]:
    names = args.proxy or [n for n, p in PROXIES.items() if p.cost == "zero"]
    proxies = [get_proxy(n) for n in names]
    if any(p.cost != "zero" for p in proxies):
        one_thread_for_torch()
    rows = []
    data_dir = require_ground_truth()
    for set_name in args.set or list(SETS):
        data = thinned(load_set(set_name, data_dir), args.limit)
        fitting = [p for p in proxies if p.kinds is None or data.kind in p.kinds]
        runs: dict[str, list[Validation]] = {p.name: [] for p in fitting}
        for seed in range(args.seeds):
            batch = ProxyInputs(args.text or RANDOM, args.batch_size, args.seq_len, seed)
            todo = [p.name for p in fitting if seed == 0 or p.cost != "zero"]
            for result in validate_many(data, todo, args.top_k, batch) if todo else []:
                runs[result.proxy].append(result)
            print(f"{set_name}: seed {seed} done", file=sys.stderr)
        rows += [_summary(r) for r in runs.values()]
    return rows


def table(rows: list[dict]) -> str:
    def cell(s: dict) -> str:
        if s["min"] == s["max"]:
            return f"{s['median']:+.3f}"
        return f"{s['median']:+.3f} [{s['min']:+.3f}, {s['max']:+.3f}]"

    lines = [
        "| set | models | proxy | cost | seeds | Spearman | Kendall | top-k common | ms/arch |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['set']} | {r['models']} | {r['proxy']} | {r['cost']} | {r['seeds']} | "
            f"{cell(r['spearman'])} | {cell(r['kendall'])} | "
            f"{r['top_k_common']['median']:.2f} | {r['ms_per_arch']['median']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy", action="append", help="repeatable; default: zero-cost ones")
    parser.add_argument("--set", action="append", help=f"repeatable; default: {', '.join(SETS)}")
    parser.add_argument("--limit", type=int, help="at most this many models per set")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per data-dependent proxy")
    parser.add_argument("--text", help="minibatches from this text file (default: random)")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--top-k", type=float, default=0.1)
    parser.add_argument("--json", action="store_true", help="JSON instead of a Markdown table")
    args = parser.parse_args(argv)
    rows = run(args)
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
