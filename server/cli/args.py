"""The arguments of `hwnas serve`, `hwnas token` and `hwnas demo`.

Apart from the commands themselves (serve, tokens, demo) because those import uvicorn,
SQLAlchemy and FastAPI, and `hwnas <command> --help` must not. This module imports the
standard library and `server.settings` only. The server's defaults are `Settings`'s own, so
each is written once.
"""

from __future__ import annotations

import argparse

from server.settings import Settings

MIB = 2**20
DEFAULT_DB = Settings.database_url  # the dataclass field's default


def serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--db", default=DEFAULT_DB, help="database URL or SQLite file path")
    parser.add_argument("--lease-seconds", type=float, default=Settings.lease_seconds)
    parser.add_argument(
        "--max-request-mb",
        type=float,
        default=Settings.max_request_bytes / MIB,
        help="refuse request bodies over this many MiB with 413 (default %(default)g)",
    )
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="json: one JSON object per line, for log shippers (default text)",
    )
    parser.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], default="info"
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="accept requests without tokens (only on a trusted network or a single machine)",
    )
    parser.add_argument(
        "--private-reads", action="store_true", help="reads need a user token too, not only writes"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes sharing the port and the database (PostgreSQL, or SQLite on "
        "one machine)",
    )


TOKEN_COMMANDS = {
    "create": "a new token, printed once",
    "list": "every token: id, name, kind, created, revoked",
    "revoke": "revoke tokens by name or id (agents they enrolled lose their credentials)",
}


def token_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="token_command", required=True)
    for name, text in TOKEN_COMMANDS.items():
        command = sub.add_parser(name, help=text)
        command.add_argument("--db", default=DEFAULT_DB, help="the server's database")
        command.add_argument("--json", action="store_true")
        if name == "create":
            command.add_argument("--name", required=True, help="who or what it is for")
            command.add_argument(
                "--kind",
                choices=["user", "agent"],
                default="user",
                help="user: searches and results; agent: enrolls agents (default user)",
            )
        if name == "revoke":
            command.add_argument("name_or_id")


def demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default="hwnas-demo.db", help="SQLite file for the demo's store")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--budget", type=int, default=24, help="candidates to measure")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the frontier as JSON")
    parser.add_argument("--keep-serving", action="store_true", help="keep the server up afterwards")
