"""`hwnas` subcommands. Parsers live here; implementations are imported on dispatch."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

# subcommand -> "module:function" taking the parsed argparse.Namespace, returning an exit code
_COMMANDS = {
    "serve": "server.cli.serve:serve",
    "demo": "server.cli.demo:run",
    "agent": "agent.cli:run",
    "proxies": "hwnas.proxies_cli:run",
    "baseline": "hwnas.baseline:run_baseline",
    "report": "hwnas.baseline:run_report",
    "search": "hwnas.search_cli:run",
    "token": "server.cli.tokens:run",
}

TOKEN_HELP = "user token (default: $HWNAS_TOKEN); needed where the server has authentication"


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
    serve.add_argument(
        "--max-request-mb",
        type=float,
        default=16.0,
        help="refuse request bodies over this many MiB with 413 (default 16)",
    )
    serve.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="json: one JSON object per line, for log shippers (default text)",
    )
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info")
    serve.add_argument(
        "--no-auth",
        action="store_true",
        help="accept requests without tokens (only on a trusted network or a single machine)",
    )
    serve.add_argument(
        "--private-reads", action="store_true", help="reads need a user token too, not only writes"
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes sharing the port and the database (PostgreSQL, or SQLite on "
        "one machine)",
    )

    token = sub.add_parser("token", help="create, list and revoke API tokens (on the server host)")
    tsub = token.add_subparsers(dest="token_command", required=True)
    for name, text in (
        ("create", "a new token, printed once"),
        ("list", "every token: id, name, kind, created, revoked"),
        ("revoke", "revoke tokens by name or id (agents they enrolled lose their credentials)"),
    ):
        t = tsub.add_parser(name, help=text)
        t.add_argument("--db", default="sqlite:///hwnas.db", help="the server's database")
        t.add_argument("--json", action="store_true")
        if name == "create":
            t.add_argument("--name", required=True, help="who or what it is for")
            t.add_argument(
                "--kind",
                choices=["user", "agent"],
                default="user",
                help="user: searches and results; agent: enrolls agents (default user)",
            )
        if name == "revoke":
            t.add_argument("name_or_id")

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
    agent.add_argument(
        "--max-params",
        type=float,
        default=None,
        metavar="N",
        help="refuse specs with more parameters than this, e.g. 5e8 (default: no limit)",
    )
    agent.add_argument(
        "--max-memory-mb",
        type=float,
        default=None,
        metavar="MIB",
        help="refuse jobs whose estimated memory exceeds this many MiB (default: no limit "
        "but the device's free memory)",
    )
    agent.add_argument(
        "--no-device-memory-check",
        action="store_true",
        help="build even what the estimate says would not fit in the device's free memory",
    )
    agent.add_argument(
        "--token",
        default=None,
        help="agent enrollment token (default: $HWNAS_AGENT_TOKEN); needed where the server "
        "has authentication",
    )

    base = sub.add_parser(
        "baseline", help="measure a space's layer-scaled baseline (LTS) on a device class"
    )
    base.add_argument("--server", required=True, help="server URL, e.g. http://127.0.0.1:8000")
    base.add_argument("--device-class", required=True)
    base.add_argument("--kind", default=None, help="space kind (default gpt2)")
    base.add_argument("--space", default=None, help="space settings as JSON")
    base.add_argument("--measurement", default=None, help="measurement settings as JSON")
    base.add_argument("--layers", default="1-16", help="depths, e.g. 1-16 or 1,2,4,8")
    base.add_argument("--wait", action="store_true", help="wait and print the measured table")
    base.add_argument("--poll-interval", type=float, default=2.0)
    base.add_argument("--json", action="store_true")
    base.add_argument("--token", default=None, help=TOKEN_HELP)

    rep = sub.add_parser("report", help="a search's frontier against the layer-scaled baseline")
    rep.add_argument("search_id", type=int)
    rep.add_argument("--server", required=True)
    rep.add_argument("--json", action="store_true")
    rep.add_argument("--token", default=None, help=TOKEN_HELP)

    _add_search_parser(sub)

    proxies = sub.add_parser("proxies", help="proxy tools")
    psub = proxies.add_subparsers(dest="proxies_command", required=True)
    corr = psub.add_parser("correlate", help="Spearman of a proxy vs trained perplexity (LTS logs)")
    corr.add_argument("files", nargs="*", help="LTS log JSON files (default: shared GPT-2 sets)")
    corr.add_argument("--proxy", default="decoder_params")
    corr.add_argument("--json", action="store_true")
    val = psub.add_parser(
        "validate", help="proxies against every published ground-truth set ($HWNAS_GROUND_TRUTH)"
    )
    val.add_argument("--proxy", action="append", help="a proxy (repeatable); default: all")
    val.add_argument("--set", action="append", help="a set (repeatable); default: all")
    val.add_argument("--top-k", type=float, default=0.1, help="top fraction for the common ratio")
    val.add_argument(
        "--text",
        help="data-dependent proxies read minibatches of this text file (default: random tokens)",
    )
    val.add_argument("--batch-size", type=int, default=4, help="minibatch rows (default 4)")
    val.add_argument("--seq-len", type=int, default=32, help="minibatch tokens per row (32)")
    val.add_argument("--seed", type=int, default=0, help="weights and batch seed (default 0)")
    val.add_argument("--json", action="store_true")
    return parser


def _add_search_parser(sub: Any) -> None:
    search = sub.add_parser("search", help="start, follow and read searches on a server")
    ssub = search.add_subparsers(dest="search_command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        p = ssub.add_parser(name, help=help)
        p.add_argument(
            "--server", help="server URL (default: $HWNAS_SERVER, else http://127.0.0.1:8000)"
        )
        p.add_argument("--json", action="store_true", help="print JSON for scripts")
        p.add_argument("--token", default=None, help=TOKEN_HELP)
        return p

    start = command("start", "start a search; fields from --file and/or flags")
    start.add_argument("--file", "-f", help="request JSON file ('-' reads stdin)")
    start.add_argument("--name")
    start.add_argument("--device-class")
    start.add_argument("--strategy", help="lts (default), nsga2 or hwnas")
    start.add_argument("--kind", help="space kind, e.g. gpt2, transxl, flexibert")
    start.add_argument("--budget", type=int, help="measurements to spend")
    start.add_argument("--objectives", help="comma-separated, e.g. decoder_params,latency_ms")
    start.add_argument("--seed", type=int)
    start.add_argument("--wait", action="store_true", help="then wait with a progress bar")
    start.add_argument("--poll-interval", type=float, default=2.0)

    command("list", "every search with its status and progress")
    status = command("status", "one search: progress, best values, frontier size")
    status.add_argument("search_id", type=int)
    wait = command("wait", "wait until a search ends, with a progress bar")
    wait.add_argument("search_id", type=int)
    wait.add_argument("--poll-interval", type=float, default=2.0)
    wait.add_argument("--timeout", type=float, default=None, metavar="SECONDS")
    pareto = command("pareto", "a search's measured Pareto frontier")
    pareto.add_argument("search_id", type=int)
    cancel = command("cancel", "stop a search proposing")
    cancel.add_argument("search_id", type=int)
    export = command("export", "an architecture as spec JSON, ONNX, or a PyTorch module")
    export.add_argument("arch_id")
    export.add_argument("--format", choices=["json", "onnx", "torch"], default="torch")
    export.add_argument("--output", "-o", help="file or folder (default: current folder)")
    export.add_argument("--seq-len", type=int, help="ONNX: the exported input's length")


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
