"""`hwnas agent`: build the HTTP client and the worker from the command line, then run.

Its arguments are in `agent.args`; this is where logging and signal handling are set up.
SIGTERM or SIGINT once: finish and report the current job (or wait out the claim waiting for
work, and measure a job it brings), then exit. Twice: kill the measurement, or end the waiting
claim, and exit at once.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

import httpx
from pydantic import ValidationError

from agent.args import AGENT_TOKEN_ENV
from agent.client import AgentClient
from agent.fingerprint import device_fingerprint
from agent.guard import MIB, Guard, Limits
from agent.launch import warm_forkserver
from agent.worker import StopWaiting, Worker
from archvocab.wire import MAX_CLAIM_WAIT_S, AgentInfo, AgentRegistration, JobLease

logger = logging.getLogger("agent")
HTTP_TIMEOUT_S = 30.0
WARM_WAIT_S = 120.0  # the longest the first claim waits for the forkserver


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
    if not 0 <= args.claim_wait <= MAX_CLAIM_WAIT_S:
        wrong = f"--claim-wait must be 0 to {MAX_CLAIM_WAIT_S:g} s, got {args.claim_wait:g}"
        print(f"hwnas agent: {wrong}", file=sys.stderr)
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
    with httpx.Client(base_url=args.server.rstrip("/"), timeout=HTTP_TIMEOUT_S) as http:
        token = args.token or os.environ.get(AGENT_TOKEN_ENV) or None
        client = ClaimWhenReady(http, enrollment_token=token)
        worker = Worker(
            client,
            registration,
            poll_interval=args.poll_interval,
            claim_wait=args.claim_wait,
            max_jobs=args.max_jobs,
            once=args.once,
            exit_when_idle=args.exit_when_idle,
            guard=guard,
        )
        client.stopping = lambda: worker.stopping
        with stop_on_signals(worker):
            return worker.run()


def start_warming(ready: threading.Event) -> None:
    """Warm the measuring processes' forkserver (it imports torch: seconds) in a background
    thread; `ready` is set when it is ready, or when warming failed (then the first job
    starts the forkserver itself, as without warming)."""

    def warm() -> None:
        try:
            logger.info("measuring processes ready in %.1f s", warm_forkserver())
        except Exception:  # the first job tries again and reports what goes wrong
            logger.exception("could not warm the measuring processes' forkserver")
        finally:
            ready.set()

    threading.Thread(target=warm, name="forkserver-warm-up", daemon=True).start()


class ClaimWhenReady(AgentClient):
    """An AgentClient that claims no job before `ready` is set (the forkserver warm): a job's
    lease and timeout must not run while torch is imported, and its process start must be as
    short as any other's. Warming starts once the server has accepted the agent: an agent
    whose token is refused exits at once instead of after torch's import. While waiting, a
    stop (SIGTERM) makes the claim answer "no work"."""

    def __init__(
        self,
        http: httpx.Client,
        *,
        enrollment_token: str | None,
        wait_s: float = WARM_WAIT_S,
        warm: Callable[[threading.Event], None] = start_warming,
    ) -> None:
        super().__init__(http, enrollment_token=enrollment_token)
        self.ready, self.wait_s, self._warm = threading.Event(), wait_s, warm
        self._warming = False
        self.stopping: Callable[[], bool] = lambda: False

    def register(self, registration: AgentRegistration) -> AgentInfo:
        info = super().register(registration)
        if not self._warming:
            self._warming = True
            self._warm(self.ready)
        return info

    def claim(self, agent_id: str, wait_s: float = 0.0) -> JobLease | None:
        deadline = time.monotonic() + self.wait_s
        while not self.ready.wait(0.1) and time.monotonic() < deadline:
            if self.stopping():
                return None
        return super().claim(agent_id, wait_s)


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
    """SIGTERM/SIGINT: first stop() (finish the job, or the claim waiting for work: a job it
    brings is measured), then abort() (a claim waiting for work ends at once:
    `agent.worker.StopWaiting`); handlers restored after."""

    received = 0

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal received
        received += 1
        first = received == 1
        logger.warning(
            "%s: %s",
            signal.Signals(signum).name,
            "finishing the current job (or the claim waiting for work), then exiting; again to "
            "exit at once"
            if first
            else "aborting the current job",
        )
        # Event.set() takes a lock the interrupted main thread may hold; set it from a thread.
        threading.Thread(target=worker.stop if first else worker.abort, daemon=True).start()
        if not first and worker.waiting_for_work:  # the main thread waits in a claim: end it
            raise StopWaiting

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
