"""Replay agents as processes beside a real server on loopback (`python -m
bench.replay_agent`: the agent's own Worker over HTTP, whose device replays recorded real
measurements): their command line, starting several, waiting until every one has registered,
and stopping them."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

DEVICE_CLASS = "replay-cpu"
API = "/api/v1"


def replay_agent_args(
    url: str,
    name: str,
    time_scale: float,
    *,
    poll_interval: float | None = 0.1,
    table: Path | None = None,
) -> list[str]:
    """`python -m bench.replay_agent` for `url`, polling fast (None: the agent's own
    interval), replaying `table` (None: the default table)."""
    args = [sys.executable, "-m", "bench.replay_agent", "--server", url]
    args += ["--device-class", DEVICE_CLASS, "--name", name, "--time-scale", str(time_scale)]
    if poll_interval is not None:
        args += ["--poll-interval", str(poll_interval)]
    if table is not None:
        args += ["--table", str(table)]
    return args


def start_agents(
    url: str, count: int, time_scale: float, table: Path, logs: Path
) -> list[subprocess.Popen]:
    """`count` replay agents named replay-0, replay-1, ..., logging to `logs`/agent-N.log."""
    procs = []
    for index in range(count):
        cmd = replay_agent_args(url, f"replay-{index}", time_scale, poll_interval=None, table=table)
        with (logs / f"agent-{index}.log").open("w") as log:
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
    return procs


def wait_for_agents(http: httpx.Client, count: int, procs: Sequence[subprocess.Popen]) -> None:
    """Until every agent has registered (so the search sees all its slots from the start)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        dead = [p.args for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"an agent exited before registering: {dead[0]}")
        agents = http.get(f"{API}/agents").json()
        if sum(a["device_class"] == DEVICE_CLASS for a in agents) >= count:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{count} agents did not register within 120 s")


def stop_processes(procs: Sequence[subprocess.Popen], grace_s: float = 10.0) -> None:
    """SIGTERM twice (the agent's abort), then SIGKILL whatever is left; always reaps."""
    for sig in (signal.SIGTERM, signal.SIGTERM):
        for proc in procs:
            if proc.poll() is None:
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    pass
        time.sleep(0.1)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
