"""The arguments of `hwnas agent` (run by agent.cli).

Apart from agent.cli because that imports httpx, pydantic and the worker, and
`hwnas agent --help` need not. Standard library only.
"""

from __future__ import annotations

import argparse

AGENT_TOKEN_ENV = "HWNAS_AGENT_TOKEN"  # the enrollment token, where --token is not given
# The CLI always passes it to agent.worker.Worker, whose own default (for tests and embedding)
# tests/hwnas/test_cli.py holds equal to this one.
POLL_INTERVAL_S = 1.0
# An idle agent's claim waits this long on the server for work before it asks again: a
# thousand idle agents cost the server a request a second each when they poll instead
# (docs/benchmarks.md, "Claims that wait for work"). Unlike the poll interval, the Worker's own
# default stays 0 (poll), for tests and embedding that script the server's answers.
CLAIM_WAIT_S = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", required=True, help="server URL, e.g. http://127.0.0.1:8000")
    parser.add_argument(
        "--device-class", required=True, help="the class of device this agent serves"
    )
    parser.add_argument("--name", default=None)
    parser.add_argument("--once", action="store_true", help="measure at most one job, then exit")
    parser.add_argument("--max-jobs", type=int, default=None)
    parser.add_argument(
        "--exit-when-idle",
        type=float,
        default=None,
        metavar="SECONDS",
        help="exit after this long without work",
    )
    parser.add_argument("--poll-interval", type=float, default=POLL_INTERVAL_S)
    parser.add_argument(
        "--claim-wait",
        type=float,
        default=CLAIM_WAIT_S,
        metavar="SECONDS",
        help="hold each claim open on the server up to this long (at most 30) for work, "
        "answered as soon as a job comes, instead of asking again every --poll-interval. A "
        "stop lets the claim be answered first; a second stop ends it. 0: poll "
        "(default: %(default)g)",
    )
    parser.add_argument(
        "--max-params",
        type=float,
        default=None,
        metavar="N",
        help="refuse specs with more parameters than this, e.g. 5e8 (default: no limit)",
    )
    parser.add_argument(
        "--max-memory-mb",
        type=float,
        default=None,
        metavar="MIB",
        help="refuse jobs whose estimated memory exceeds this many MiB (default: no limit "
        "but the device's free memory)",
    )
    parser.add_argument(
        "--no-device-memory-check",
        action="store_true",
        help="build even what the estimate says would not fit in the device's free memory",
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"agent enrollment token (default: ${AGENT_TOKEN_ENV}); needed where the server "
        "has authentication",
    )
