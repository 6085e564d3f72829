"""`hwnas proxies correlate`: how well a proxy ranks LTS's trained models.

Prints a table (with `rich` when it is installed, plain text otherwise) or JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from archvocab.errors import InvalidSpec
from proxies.correlate import Correlation, correlate_file
from proxies.registry import get_proxy

# The shared ground-truth data sits next to the repository: <repo>/../shared/data/lts.
LTS_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "lts"
DEFAULT_FILES = ("random_GPT2_wt103.json", "random_GPT2_lm1b.json")
HEADERS = ("file", "models", "proxy", "Spearman rho vs valid_ppl", "p-value", "matches logged")


def default_files() -> list[Path]:
    """The two shared GPT-2 sets."""
    return [LTS_DIR / name for name in DEFAULT_FILES]


def run(args: argparse.Namespace) -> int:
    """Entry point for `hwnas proxies ...`; returns the exit code."""
    if args.proxies_command == "validate":
        from proxies.validate_cli import validate_command

        return validate_command(
            args.proxy,
            args.set,
            args.top_k,
            as_json=args.json,
            inputs=(args.text or "random", args.batch_size, args.seq_len, args.seed),
        )
    if args.proxies_command != "correlate":
        print(f"hwnas proxies: unknown command {args.proxies_command!r}", file=sys.stderr)
        return 2
    return correlate(args.files or default_files(), args.proxy, as_json=args.json)


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


def plain_table(rows: Sequence[Sequence[str]]) -> str:
    """A fixed-width text table with the HEADERS."""
    widths = [max(len(cell) for cell in column) for column in zip(HEADERS, *rows, strict=True)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in (HEADERS, *rows)
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"
