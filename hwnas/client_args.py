"""The arguments of the commands that talk to a server through hwnas.client: `hwnas search
...` (run by hwnas.search_cli), `hwnas baseline` and `hwnas report` (hwnas.baseline).

Apart from those because they import httpx, pydantic and rich, and `--help` need not.
Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

SERVER_ENV = "HWNAS_SERVER"  # `hwnas search`'s server, where --server is not given
# hwnas.client's DEFAULT_SERVER, TOKEN_ENV and Client.wait's poll_s, which importing here would
# make --help slow; tests/hwnas/test_cli.py holds them equal.
DEFAULT_SERVER = "http://127.0.0.1:8000"
TOKEN_ENV = "HWNAS_TOKEN"
POLL_INTERVAL_S = 2.0
TOKEN_HELP = f"user token (default: ${TOKEN_ENV}); needed where the server has authentication"
SEARCH_COMMANDS = {
    "start": "start a search; fields from --file and/or flags",
    "list": "every search with its status and progress",
    "status": "one search: progress, best values, frontier size",
    "wait": "wait until a search ends, showing progress (a bar on a terminal, lines elsewhere)",
    "pareto": "a search's measured Pareto frontier, or the points meeting bounds, in an order",
    "pick": "the best frontier point under bounds in an order, with its neighbours",
    "cancel": "stop a search proposing",
    "export": "an architecture as spec JSON, ONNX, or a PyTorch module",
}


def baseline_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", required=True, help="server URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--device-class", required=True)
    parser.add_argument("--kind", default=None, help="space kind (default gpt2)")
    parser.add_argument("--space", default=None, help="space settings as JSON")
    parser.add_argument("--measurement", default=None, help="measurement settings as JSON")
    parser.add_argument("--layers", default="1-16", help="depths, e.g. 1-16 or 1,2,4,8")
    parser.add_argument("--wait", action="store_true", help="wait and print the measured table")
    parser.add_argument("--poll-interval", type=float, default=POLL_INTERVAL_S)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--token", default=None, help=TOKEN_HELP)


def report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("search_id", type=int)
    parser.add_argument("--server", required=True)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--token", default=None, help=TOKEN_HELP)


def search_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="search_command", required=True)
    commands = {name: _search_command(sub, name, text) for name, text in SEARCH_COMMANDS.items()}

    _start_arguments(commands["start"])
    for name in ("status", "wait", "pareto", "pick", "cancel"):
        commands[name].add_argument("search_id", type=int)
    choosing_arguments(commands["pareto"])
    commands["pareto"].add_argument("--limit", type=int, help="at most this many points")
    choosing_arguments(commands["pick"], order_required=True)
    commands["pick"].add_argument(
        "--neighbours", type=int, help="frontier points shown on each side of the pick (default 2)"
    )
    _follow_arguments(commands["wait"])
    commands["wait"].add_argument("--timeout", type=float, default=None, metavar="SECONDS")

    export = commands["export"]
    export.add_argument("arch_id", help="its id, or a unique prefix of 8 or more characters")
    export.add_argument(
        "--format",
        choices=["json", "onnx", "torch"],
        default="json",
        help="json: the spec and counts (the default, as in the API); torch: one file that "
        "needs only torch; onnx: the model",
    )
    export.add_argument("--output", "-o", help="file or folder (default: current folder)")
    export.add_argument("--seq-len", type=int, help="ONNX: the exported input's length")


# The bounds with flags of their own; any objective's takes --min/--max OBJECTIVE=VALUE.
BOUND_FLAGS = (
    "min_decoder_params",
    "max_decoder_params",
    "max_latency_ms",
    "min_latency_ms",
    "max_memory_mb",
)


def _bound_of(name: str) -> Any:
    """An argparse type: VALUE -> (name, float) for a flag of BOUND_FLAGS."""

    def parse(text: str) -> tuple[str, float]:
        try:
            return name, float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: a number, e.g. 20 or 5e6") from None

    parse.__name__ = name
    return parse


def _bound_named(side: str) -> Any:
    """An argparse type: OBJECTIVE=VALUE -> (side_OBJECTIVE, float)."""

    def parse(text: str) -> tuple[str, float]:
        objective, sep, value = text.partition("=")
        with contextlib.suppress(ValueError):
            if sep and objective.strip():
                return f"{side}_{objective.strip()}", float(value)
        raise argparse.ArgumentTypeError(f"{text!r}: OBJECTIVE=VALUE, e.g. --{side} snip=0.5")

    parse.__name__ = f"--{side}"
    return parse


def choosing_arguments(command: argparse.ArgumentParser, order_required: bool = False) -> None:
    """Bounds (each a (query name, value) in args.bound) and an order: the query of /pareto
    and /pick (hwnas.frontier_view.choosing_params)."""
    for name in BOUND_FLAGS:
        side, _, objective = name.partition("_")
        command.add_argument(
            f"--{name.replace('_', '-')}",
            dest="bound",
            action="append",
            type=_bound_of(name),
            metavar="VALUE",
            help=f"keep points with {objective} {'>=' if side == 'min' else '<='} VALUE",
        )
    for side in ("min", "max"):
        command.add_argument(
            f"--{side}",
            dest="bound",
            action="append",
            type=_bound_named(side),
            metavar="OBJECTIVE=VALUE",
            help=f"any objective's {'lower' if side == 'min' else 'upper'} bound",
        )
    command.add_argument(
        "--bounds-on",
        choices=["value", "interval"],
        help="what a bound applies to: the value (default) or its whole interval",
    )
    command.add_argument(
        "--order-by",
        required=order_required,
        metavar="OBJECTIVE",
        help="e.g. latency_ms: best first (ascending for latency and memory, else descending)",
    )
    order = command.add_mutually_exclusive_group()
    order.add_argument("--desc", dest="desc", action="store_true", default=None)
    order.add_argument("--asc", dest="desc", action="store_false", default=None)


# SearchCreate's defaults (archvocab/wire/searches.py), for --help only: a flag not given sends
# nothing and the server applies its own. tests/hwnas/test_cli.py holds these equal.
REQUEST_DEFAULTS = {"strategy": "lts", "budget": 100, "device_class": "cpu", "seq_len": 64}
STALL_S = 60.0  # hwnas.client.STALL_S
PROGRESS_EVERY_S = 60.0


def span(text: str) -> dict[str, int]:
    """A space range from the command line: MIN-MAX, MIN-MAX:STEP or one value N."""
    bounds, colon, step = text.partition(":")
    low, sep, high = bounds.partition("-")
    try:
        value = {"min": int(low), "max": int(high if sep else low)}
        if colon:
            value["step"] = int(step)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a range is MIN-MAX, MIN-MAX:STEP or N, e.g. 2-6 or 128-512:64"
        ) from None
    return value


def count(text: str) -> int:
    """A parameter count: 1000000, 1e6, 1M or 500k."""
    scale = {"k": 10**3, "m": 10**6, "g": 10**9}.get(text[-1:].lower(), 1)
    digits = text[:-1] if scale > 1 else text
    try:
        return int(float(digits) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a count, e.g. 2000000, 2e6 or 2M") from None


def _start_arguments(start: argparse.ArgumentParser) -> None:
    """Flags for the request's common fields, each set on top of --file (hwnas.search_request);
    a flag not given leaves the server's default."""
    d = REQUEST_DEFAULTS
    start.add_argument("--file", "-f", help="request JSON file ('-' reads stdin)")
    start.add_argument("--name")
    start.add_argument("--device-class", help=f"agents' device class (default {d['device_class']})")
    start.add_argument("--strategy", help=f"lts, nsga2 or hwnas (default {d['strategy']})")
    start.add_argument("--budget", type=int, help=f"measurements to spend (default {d['budget']})")
    start.add_argument("--seed", type=int, help="default 0")
    start.add_argument("--kind", help="space kind, e.g. gpt2 (default), transxl, flexibert")
    start.add_argument("--space", metavar="JSON", help="space settings as JSON, over --file's")
    for flag in ("--n-layer", "--d-model", "--d-inner"):
        start.add_argument(flag, type=span, metavar="MIN-MAX[:STEP]", help="a space range")
    start.add_argument("--seq-len", type=int, help=f"tokens per input (default {d['seq_len']})")
    start.add_argument("--runtime", help="torch (default) or onnxruntime")
    start.add_argument("--max-latency-ms", type=float, help="constraint: latency at most")
    start.add_argument("--max-memory-mb", type=float, help="constraint: peak memory at most")
    start.add_argument("--min-decoder-params", type=count, help="constraint, e.g. 2M")
    start.add_argument("--max-decoder-params", type=count, help="constraint, e.g. 20M")
    start.add_argument("--objectives", help="comma-separated, e.g. decoder_params,latency_ms")
    start.add_argument("--wait", action="store_true", help="then wait, showing progress")
    _follow_arguments(start)


def _follow_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--poll-interval", type=float, default=POLL_INTERVAL_S)
    command.add_argument(
        "--progress-every",
        type=float,
        default=PROGRESS_EVERY_S,
        metavar="SECONDS",
        help="without a terminal: a progress line on each change and at least this often",
    )
    command.add_argument(
        "--stall-after",
        type=float,
        default=STALL_S,
        metavar="SECONDS",
        help="say so when nothing moved this long and no live agent can measure the search",
    )


def _search_command(sub: Any, name: str, text: str) -> argparse.ArgumentParser:
    command = sub.add_parser(name, help=text)
    command.add_argument(
        "--server", help=f"server URL (default: ${SERVER_ENV}, else {DEFAULT_SERVER})"
    )
    command.add_argument("--json", action="store_true", help="print JSON for scripts")
    command.add_argument("--token", default=None, help=TOKEN_HELP)
    return command
