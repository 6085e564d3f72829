"""`hwnas` subcommands: the registry and the dispatch.

Each role keeps its arguments beside it, in a module that imports the standard library and
at most the role's settings (server/cli/args.py, agent/args.py, hwnas/client_args.py,
hwnas/proxies_args.py). The server's defaults are read from its Settings; where reading a
default where it lives would load httpx, the agent's worker or the proxies library into `--help`,
the arguments module keeps a copy that tests/hwnas/test_cli.py holds equal. A subcommand's
arguments are added when that subcommand is parsed, so `hwnas --help` imports none of them
and `hwnas serve ...` only the server's; the command itself is imported on dispatch.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any, NamedTuple


class Command(NamedTuple):
    help: str
    arguments: str  # "module:function" adding the subcommand's arguments to its parser
    run: str  # "module:function" taking the parsed argparse.Namespace, returning an exit code


COMMANDS = {
    "serve": Command(
        "run the search server", "server.cli.args:serve_arguments", "server.cli.serve:serve"
    ),
    "token": Command(
        "create, list and revoke API tokens (on the server host)",
        "server.cli.args:token_arguments",
        "server.cli.tokens:run",
    ),
    "demo": Command(
        "server + one local agent + a short search, then the frontier",
        "server.cli.args:demo_arguments",
        "server.cli.demo:run",
    ),
    "agent": Command(
        "measure candidates for a server on this device",
        "agent.args:add_arguments",
        "agent.cli:run",
    ),
    "baseline": Command(
        "measure a space's layer-scaled baseline (LTS) on a device class",
        "hwnas.client_args:baseline_arguments",
        "hwnas.baseline:run_baseline",
    ),
    "report": Command(
        "a search's frontier against the layer-scaled baseline",
        "hwnas.client_args:report_arguments",
        "hwnas.baseline:run_report",
    ),
    "search": Command(
        "start, follow and read searches on a server",
        "hwnas.client_args:search_arguments",
        "hwnas.search_cli:run",
    ),
    "proxies": Command(
        "proxy tools", "hwnas.proxies_args:proxies_arguments", "hwnas.proxies_cli:run"
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hwnas", description="Hardware-aware Transformer search.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=RoleParser)
    for name, command in COMMANDS.items():
        sub.add_parser(name, help=command.help, arguments=command.arguments)
    return parser


class RoleParser(argparse.ArgumentParser):
    """A subcommand's parser that takes its role's arguments (`arguments`, "module:function")
    the first time it parses or formats help. Without `arguments`, a plain parser: the role's
    own nested subcommands are of this class too (argparse makes them of their parent's)."""

    def __init__(self, *args: Any, arguments: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending = arguments

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._take_arguments()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._take_arguments()
        return super().format_usage()

    def format_help(self) -> str:
        self._take_arguments()
        return super().format_help()

    def _take_arguments(self) -> None:
        if self._pending is None:
            return
        (module_name, func_name), self._pending = self._pending.split(":"), None
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            self.exit(2, missing_package(self.prog, exc) + "\n")
        getattr(module, func_name)(self)


def missing_package(prog: str, exc: ImportError) -> str:
    return (
        f"{prog}: a required package is missing ({exc.name}); "
        "install the matching extra, e.g. pip install 'hwnas[server]'"
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module_name, func_name = COMMANDS[args.command].run.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        print(missing_package(f"hwnas {args.command}", exc), file=sys.stderr)
        return 2
    return int(getattr(module, func_name)(args) or 0)
