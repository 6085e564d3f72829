"""`hwnas` subcommands. Parsers live here; implementations are imported on dispatch."""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> "module:function" taking the parsed argparse.Namespace, returning an exit code
_COMMANDS = {
    "serve": "server.cli:serve",
    "demo": "server.demo:run",
    "agent": "agent.cli:run",
    "proxies": "proxies.cli:run",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hwnas", description="Hardware-aware Transformer search.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the search server")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--db", default="sqlite:///hwnas.db", help="database URL or SQLite file path"
    )
    serve.add_argument("--lease-seconds", type=float, default=60.0)

    demo = sub.add_parser(
        "demo", help="server + one local agent + a short search, then the frontier"
    )
    demo.add_argument("--db", default="hwnas-demo.db", help="SQLite file for the demo's store")
    demo.add_argument("--port", type=int, default=0, help="0 picks a free port")
    demo.add_argument("--budget", type=int, default=24, help="candidates to measure")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--json", action="store_true", help="print the frontier as JSON")
    demo.add_argument("--keep-serving", action="store_true", help="keep the server up afterwards")

    agent = sub.add_parser("agent", help="measure candidates for a server on this device")
    agent.add_argument("--server", required=True, help="server URL, e.g. http://127.0.0.1:8000")
    agent.add_argument(
        "--device-class", required=True, help="the class of device this agent serves"
    )
    agent.add_argument("--name", default=None)
    agent.add_argument("--once", action="store_true", help="measure at most one job, then exit")
    agent.add_argument("--max-jobs", type=int, default=None)
    agent.add_argument(
        "--exit-when-idle",
        type=float,
        default=None,
        metavar="SECONDS",
        help="exit after this long without work",
    )
    agent.add_argument("--poll-interval", type=float, default=1.0)

    proxies = sub.add_parser("proxies", help="proxy tools")
    psub = proxies.add_subparsers(dest="proxies_command", required=True)
    corr = psub.add_parser("correlate", help="Spearman of a proxy vs trained perplexity (LTS logs)")
    corr.add_argument("files", nargs="*", help="LTS log JSON files (default: shared GPT-2 sets)")
    corr.add_argument("--proxy", default="decoder_params")
    corr.add_argument("--json", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    module_name, func_name = _COMMANDS[args.command].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        print(
            f"hwnas {args.command}: a required package is missing ({exc.name}); "
            "install the matching extra, e.g. pip install 'hwnas[server]'",
            file=sys.stderr,
        )
        return 2
    return int(getattr(module, func_name)(args) or 0)
