"""The arguments of the commands that talk to a server through hwnas.client: `hwnas search
...` (run by hwnas.search_cli), `hwnas baseline` and `hwnas report` (hwnas.baseline).

Apart from those because they import httpx, pydantic and rich, and `--help` need not.
Standard library only.
"""

from __future__ import annotations

import argparse
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
    "wait": "wait until a search ends, with a progress bar",
    "pareto": "a search's measured Pareto frontier",
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

    start = commands["start"]
    start.add_argument("--file", "-f", help="request JSON file ('-' reads stdin)")
    start.add_argument("--name")
    start.add_argument("--device-class")
    start.add_argument("--strategy", help="lts (default), nsga2 or hwnas")
    start.add_argument("--kind", help="space kind, e.g. gpt2, transxl, flexibert")
    start.add_argument("--budget", type=int, help="measurements to spend")
    start.add_argument("--objectives", help="comma-separated, e.g. decoder_params,latency_ms")
    start.add_argument("--seed", type=int)
    start.add_argument("--wait", action="store_true", help="then wait with a progress bar")
    start.add_argument("--poll-interval", type=float, default=POLL_INTERVAL_S)

    for name in ("status", "wait", "pareto", "cancel"):
        commands[name].add_argument("search_id", type=int)
    commands["wait"].add_argument("--poll-interval", type=float, default=POLL_INTERVAL_S)
    commands["wait"].add_argument("--timeout", type=float, default=None, metavar="SECONDS")

    export = commands["export"]
    export.add_argument("arch_id")
    export.add_argument("--format", choices=["json", "onnx", "torch"], default="torch")
    export.add_argument("--output", "-o", help="file or folder (default: current folder)")
    export.add_argument("--seq-len", type=int, help="ONNX: the exported input's length")


def _search_command(sub: Any, name: str, text: str) -> argparse.ArgumentParser:
    command = sub.add_parser(name, help=text)
    command.add_argument(
        "--server", help=f"server URL (default: ${SERVER_ENV}, else {DEFAULT_SERVER})"
    )
    command.add_argument("--json", action="store_true", help="print JSON for scripts")
    command.add_argument("--token", default=None, help=TOKEN_HELP)
    return command
