"""Real `hwnas agent` processes for a server started with hwnas.testing.servers."""

from __future__ import annotations

import subprocess

from hwnas.testing.processes import Processes


def start_agent(
    procs: Processes,
    name: str,
    url: str,
    *extra: str,
    device_class: str = "test-cpu",
    poll_interval: float = 0.2,
) -> subprocess.Popen:
    """`hwnas agent` for `url` as `name` of `procs`, polling fast, enrolling with the token
    the server was started with (in its environment, as a deployment passes it)."""
    args = ["agent", "--server", url, "--device-class", device_class]
    args += ["--poll-interval", str(poll_interval), *extra]
    return procs.start(name, *args, env=procs.agent_env)
