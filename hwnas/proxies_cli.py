"""`hwnas proxies correlate|validate`: how well proxies rank published trained models.

`correlate` prints one proxy's Spearman against trained perplexity per LTS log file;
`validate` every chosen proxy on every chosen published set. Tables (with `rich` when it is
installed, plain text otherwise) or JSON. The numbers come from the proxies library
(`proxies.correlate`, `proxies.validate`); the data from the folder hwnas.ground_truth finds.
Imported only when the command runs (hwnas.cli), like every role's command; its arguments are
in hwnas.proxies_args.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from archvocab.errors import InvalidSpec
from hwnas.ground_truth import GroundTruthMissing, require_ground_truth
from proxies.correlate import Correlation, correlate_file
from proxies.ground_truth import SETS, load_set
from proxies.inputs import RANDOM, ProxyInputs
from proxies.registry import PROXIES, get_proxy
from proxies.validate import Validation, validate_many

DEFAULT_FILES = ("random_GPT2_wt103.json", "random_GPT2_lm1b.json")  # under <data>/lts
HEADERS = ("file", "models", "proxy", "Spearman rho vs valid_ppl", "p-value", "matches logged")
VALIDATE_HEADERS = ("set", "models", "proxy", "target", "Spearman", "Kendall", "top-k common")
VALIDATE_HEADERS += ("ms/arch",)


def run(args: argparse.Namespace) -> int:
    """Entry point for `hwnas proxies ...`; returns the exit code."""
    if args.proxies_command == "validate":
        return validate_command(
            args.proxy,
            args.set,
            args.top_k,
            as_json=args.json,
            inputs=(args.text or RANDOM, args.batch_size, args.seq_len, args.seed),
        )
    if args.proxies_command != "correlate":
        print(f"hwnas proxies: unknown command {args.proxies_command!r}", file=sys.stderr)
        return 2
    try:
        get_proxy(args.proxy)  # a wrong name is the first thing to say, data or none
    except InvalidSpec as exc:
        print(f"hwnas proxies correlate: {exc.message}", file=sys.stderr)
        return 2
    if args.files:
        return correlate(args.files, args.proxy, as_json=args.json)
    try:
        files = default_files()
    except GroundTruthMissing as exc:
        print(f"hwnas proxies correlate: {exc}", file=sys.stderr)
        return 2
    return correlate(files, args.proxy, as_json=args.json)


def default_files() -> list[Path]:
    """The two shared GPT-2 sets; GroundTruthMissing naming the setting when absent."""
    return [require_ground_truth("lts", name) for name in DEFAULT_FILES]


def one_thread_for_torch() -> None:
    """Low-cost proxies score one small model at a time: torch's default of one thread per
    core only adds contention (40x slower seen on a busy 2-core machine)."""
    import torch

    torch.set_num_threads(1)


# -- correlate ----------------------------------------------------------------------------------
def correlate(files: Sequence[str | Path], proxy: str, as_json: bool = False) -> int:
    """Correlate `proxy` on each file and print the results; 2 on a bad proxy or file."""
    try:
        get_proxy(proxy)
        results = [correlate_file(path, proxy) for path in files]
    except InvalidSpec as exc:
        print(f"hwnas proxies correlate: {exc.message}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"hwnas proxies correlate: cannot read a log file: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps({"results": [r.to_dict() for r in results]}, indent=2))
    else:
        render(results, sys.stdout)
    return 0


def table_rows(results: Sequence[Correlation]) -> list[tuple[str, ...]]:
    """One row of display strings per result, in HEADERS order."""
    rows = []
    for r in results:
        if r.logged_field is None:
            matched = "n/a"
        else:
            matched = f"{r.matches}/{r.models} {r.logged_field}"
        rows.append(
            (
                Path(r.file).name,
                str(r.models),
                r.proxy,
                f"{r.rho:+.4f}",
                f"{r.p_value:.2e}",
                matched,
            )
        )
    return rows


def render(results: Sequence[Correlation], out: TextIO, use_rich: bool | None = None) -> None:
    """Print the table; `use_rich=None` uses rich when it can be imported."""
    rows = table_rows(results)
    if use_rich is not False:
        try:
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            if use_rich:
                raise
        else:
            table = Table(*HEADERS, title="Proxy vs trained perplexity (LTS logs)")
            for row in rows:
                table.add_row(*row)
            # Off a terminal rich assumes 80 columns and would wrap the numbers.
            Console(file=out, width=None if out.isatty() else 140).print(table)
            return
    out.write(plain_table(rows))


def plain_table(rows: Sequence[Sequence[str]], headers: Sequence[str] = HEADERS) -> str:
    """A fixed-width text table with the `headers`."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in (headers, *rows)
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


# -- validate -----------------------------------------------------------------------------------
def validate_command(
    proxies: list[str] | None,
    sets: list[str] | None,
    top_k: float,
    as_json: bool = False,
    inputs: tuple[str, int, int, int] | None = None,
) -> int:
    """Print the validation of `proxies` (default: the zero-cost ones) on `sets` (default
    all); a proxy is skipped, with a note, on sets of kinds it does not apply to.
    `inputs` is (source, batch_size, seq_len, seed) of data-dependent proxies. 2 on bad
    input or missing data; None: ProxyInputs' defaults."""
    zero_cost = [p.name for p in PROXIES.values() if p.cost == "zero"]
    try:
        batch = ProxyInputs(*inputs) if inputs is not None else ProxyInputs()
        chosen = [get_proxy(p) for p in proxies or zero_cost]
        if any(p.cost != "zero" for p in chosen):
            one_thread_for_torch()
        data_dir = require_ground_truth()
        loaded = [load_set(s, data_dir) for s in sets or list(SETS)]
        results = []
        for data in loaded:
            names = [p.name for p in chosen if p.kinds is None or data.kind in p.kinds]
            skipped = [p.name for p in chosen if p.name not in names]
            if skipped:
                print(f"{data.name}: {', '.join(skipped)} not for {data.kind}", file=sys.stderr)
            if names:
                results += validate_many(data, names, top_k, batch)
    except (InvalidSpec, GroundTruthMissing) as exc:
        print(f"hwnas proxies validate: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps({"results": [r.to_dict() for r in results]}, indent=2))
    else:
        print(validation_table(results))
    return 0


def validation_table(results: list[Validation]) -> str:
    """The validation results as a fixed-width text table."""
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
    return plain_table(rows, VALIDATE_HEADERS).rstrip("\n")
