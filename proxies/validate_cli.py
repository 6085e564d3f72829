"""`hwnas proxies validate`: every chosen proxy on every chosen published set, as a table
(plain text) or JSON. The numbers come from `proxies.validate`."""

from __future__ import annotations

import json
import sys

from archvocab.errors import InvalidSpec
from proxies.ground_truth import SETS, load_set
from proxies.inputs import ProxyInputs
from proxies.registry import PROXIES, get_proxy
from proxies.validate import Validation, validate_many

HEADERS = ("set", "models", "proxy", "target", "Spearman", "Kendall", "top-k common", "ms/arch")


def validate_command(
    proxies: list[str] | None,
    sets: list[str] | None,
    top_k: float,
    as_json: bool = False,
    inputs: tuple[str, int, int, int] = ("random", 4, 32, 0),
) -> int:
    """Print the validation of `proxies` (default: the zero-cost ones) on `sets` (default
    all); a proxy is skipped, with a note, on sets of kinds it does not apply to.
    `inputs` is (source, batch_size, seq_len, seed) of data-dependent proxies. 2 on bad
    input."""
    zero_cost = [p.name for p in PROXIES.values() if p.cost == "zero"]
    try:
        batch = ProxyInputs(*inputs)
        chosen = [get_proxy(p) for p in proxies or zero_cost]
        if any(p.cost != "zero" for p in chosen):
            one_thread_for_torch()
        loaded = [load_set(s) for s in sets or list(SETS)]
        results = []
        for data in loaded:
            names = [p.name for p in chosen if p.kinds is None or data.kind in p.kinds]
            skipped = [p.name for p in chosen if p.name not in names]
            if skipped:
                print(f"{data.name}: {', '.join(skipped)} not for {data.kind}", file=sys.stderr)
            if names:
                results += validate_many(data, names, top_k, batch)
    except InvalidSpec as exc:
        print(f"hwnas proxies validate: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps({"results": [r.to_dict() for r in results]}, indent=2))
    else:
        print(table(results))
    return 0


def one_thread_for_torch() -> None:
    """Low-cost proxies score one small model at a time: torch's default of one thread per
    core only adds contention (40x slower seen on a busy 2-core machine)."""
    import torch

    torch.set_num_threads(1)


def table(results: list[Validation]) -> str:
    rows = [
        (
            r.set,
            str(r.models),
            r.proxy,
            r.target,
            f"{r.spearman:+.3f}",
            f"{r.kendall:+.3f}",
            f"{r.top_k_common:.2f} (top {r.top_k:.0%})",
            f"{r.ms_per_arch:.3f}",
        )
        for r in results
    ]
    widths = [max(len(c) for c in column) for column in zip(HEADERS, *rows, strict=True)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in (HEADERS, *rows)
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
