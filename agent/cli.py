"""`hwnas agent`: build the HTTP client and the worker from the command line, then run.

The parser lives in `hwnas.cli`; this is where logging and signal handling are set up.
SIGTERM or SIGINT once: finish and report the current job, then exit. Twice: kill the
measurement and exit at once.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import httpx
from pydantic import ValidationError

from agent.client import AgentClient
from agent.fingerprint import device_fingerprint
from agent.guard import MIB, Guard, Limits
from agent.launch import start_forkserver
from agent.worker import Worker
from archvocab.wire import AgentRegistration

logger = logging.getLogger("agent")
HTTP_TIMEOUT_S = 30.0
AGENT_TOKEN_ENV = "HWNAS_AGENT_TOKEN"  # the enrollment token, where --token is not given


def run(args: argparse.Namespace) -> int:
    """Run an agent as `args` (the `hwnas agent` namespace) says; the process exit code."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.max_jobs is not None and args.max_jobs < 1:
        print("hwnas agent: --max-jobs must be >= 1", file=sys.stderr)
        return 2
    guard = guard_from_args(args)
    if isinstance(guard, str):
        print(f"hwnas agent: {guard}", file=sys.stderr)
        return 2
    if not args.server.startswith(("http://", "https://")):
        print(
            f"hwnas agent: --server needs http:// or https://, got {args.server!r}", file=sys.stderr
        )
        return 2
    try:
        registration = AgentRegistration(
            device_class=args.device_class, name=args.name, fingerprint=device_fingerprint()
        )
    except ValidationError as exc:
        print(f"hwnas agent: invalid argument: {exc}", file=sys.stderr)
        return 2
    logger.info("device: %s", registration.fingerprint.model_dump())
    # The measuring processes fork from a server that imports torch: pay that now, not on the
    # first job's clock.
    start_forkserver()
    with httpx.Client(base_url=args.server.rstrip("/"), timeout=HTTP_TIMEOUT_S) as http:
        token = args.token or os.environ.get(AGENT_TOKEN_ENV) or None
        worker = Worker(
            AgentClient(http, enrollment_token=token),
            registration,
            poll_interval=args.poll_interval,
            max_jobs=args.max_jobs,
            once=args.once,
            exit_when_idle=args.exit_when_idle,
            guard=guard,
        )
        with stop_on_signals(worker):
            return worker.run()


def guard_from_args(args: argparse.Namespace) -> Guard | str:
    """The job guard `--max-params`, `--max-memory-mb` and `--no-device-memory-check` ask
    for, or what is wrong with them."""
    max_params, max_mb = args.max_params, args.max_memory_mb
    for flag, value in (("--max-params", max_params), ("--max-memory-mb", max_mb)):
        if value is not None and not (math.isfinite(value) and value >= 1):
            return f"{flag} must be a finite number >= 1, got {value:g}"
    limits = Limits(
        max_params=int(max_params) if max_params is not None else None,
        max_memory_bytes=int(max_mb * MIB) if max_mb is not None else None,
    )
    return Guard(limits, check_device=not args.no_device_memory_check)


@contextmanager
def stop_on_signals(worker: Worker) -> Iterator[None]:
    """SIGTERM/SIGINT: first stop() (finish the job), then abort(); handlers restored after."""

    received = 0

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal received
        received += 1
        first = received == 1
        logger.warning(
            "%s: %s",
            signal.Signals(signum).name,
            "finishing the current job, then exiting" if first else "aborting the current job",
        )
        # Event.set() takes a lock the interrupted main thread may hold; set it from a thread.
        threading.Thread(target=worker.stop if first else worker.abort, daemon=True).start()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
