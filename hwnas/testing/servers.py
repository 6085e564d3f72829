"""A real `hwnas serve` on loopback, over a SQLite file or a PostgreSQL URL.

`start_server` starts one under a `Processes` and returns once it answers /healthz, with
authentication as a deployment has it: unless `--no-auth` is among its arguments, the first
server of a `Processes` gets a user token and an agent enrollment token, kept on the
`Processes` for its clients and agents: those its first start on a new database printed (a
user token 'admin', an enrollment token 'agents'), else made with `hwnas token create`.
`serve` is the same for a with-block that owns the server. A server that does not come up
raises `ServerDidNotStart` with the end of its log.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from hwnas.testing.ports import free_port, loopback_url
from hwnas.testing.processes import Processes, hwnas_command

# Leases in tests: short, so that a killed agent's job is leased again within the test.
TEST_LEASE_SECONDS = 20.0


class ServerDidNotStart(RuntimeError):
    """`hwnas serve` exited or did not answer /healthz in time; the message ends with its log."""


def create_token(db: Path | str, kind: str, name: str) -> str:
    """`hwnas token create` on the server's database, as an admin makes one: the secret."""
    command = hwnas_command("token", "create", "--db", str(db), "--kind", kind, "--name", name)
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["token"]


# How `hwnas serve` shows the tokens it makes at its first start (server.cli.serve).
_FIRST_START_TOKENS = {
    "user": re.compile(r"^\s+export HWNAS_TOKEN=(hwnas_u_\S+)$", re.M),
    "agent": re.compile(r"^\s+hwnas agent --token (hwnas_e_\S+) ", re.M),
}


def first_start_tokens(log: str) -> dict[str, str]:
    """kind -> the secret of each token a server's first start printed to `log`."""
    return {kind: m.group(1) for kind, p in _FIRST_START_TOKENS.items() if (m := p.search(log))}


def api_client(url: str, token: str | None = None, timeout: float = 30) -> httpx.Client:
    """An HTTP client for the server at `url`, sending `token` if given."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=url, timeout=timeout, headers=headers)


def wait_healthy(
    url: str,
    proc: subprocess.Popen | None = None,
    log: Path | None = None,
    timeout: float = 60,
    poll_s: float = 0.05,
) -> None:
    """Return once `url`/healthz answers 200; ServerDidNotStart if `proc` exits first or
    `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(poll_s)
    tail = log.read_text(errors="replace")[-5000:] if log is not None and log.exists() else ""
    exited = proc is not None and proc.poll() is not None
    why = "exited" if exited else f"was not healthy within {timeout} s"
    raise ServerDidNotStart(f"hwnas serve at {url} {why}; its log ends:\n{tail}")


def start_server(
    procs: Processes,
    db: Path | str,
    port: int,
    *extra: str,
    name: str = "server",
    lease_seconds: float | None = TEST_LEASE_SECONDS,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """`hwnas serve` on 127.0.0.1:`port` over `db` (a file or a URL) with the arguments
    `extra`, as `name` of `procs`, `env` added to its environment; returns once healthy.
    `lease_seconds=None` leaves the server's default lease. Starting it again under the same
    name (a restart) keeps the tokens and appends to the log."""
    needs_tokens = "--no-auth" not in extra and procs.user_token is None
    args = ["serve", "--port", str(port), "--db", str(db), *extra]
    if lease_seconds is not None:
        args += ["--lease-seconds", str(lease_seconds)]
    proc = procs.start(name, *args, env=env)
    try:
        wait_healthy(loopback_url(port), proc, procs.log_path(name))
    except ServerDidNotStart:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise
    if needs_tokens:
        # Taken from the first start's lines, as a deployment's admin does: two processes
        # fewer per server than `hwnas token create` twice (seconds each in the suite).
        printed = first_start_tokens(procs.log(name))
        procs.user_token = printed.get("user") or create_token(db, "user", "tests")
        procs.agent_token = printed.get("agent") or create_token(db, "agent", "test-agents")
    return proc


@dataclass(frozen=True)
class RunningServer:
    """What `serve` yields: the base URL, the process, and the `Processes` holding the
    tokens (None on a server without authentication)."""

    url: str
    proc: subprocess.Popen
    procs: Processes

    def client(self, timeout: float = 30) -> httpx.Client:
        """A user's HTTP client for this server."""
        return self.procs.client(self.url, timeout)


@contextlib.contextmanager
def serve(
    folder: Path,
    db: Path | str,
    *extra: str,
    name: str = "server",
    lease_seconds: float | None = None,
    grace_s: float = 30.0,
    env: dict[str, str] | None = None,
) -> Iterator[RunningServer]:
    """`start_server` on a free port for the with-block, logging to `folder`/`name`.log;
    stopped (SIGTERM, SIGKILL after `grace_s`) when the block ends."""
    procs = Processes(folder)
    port = free_port()
    try:
        proc = start_server(
            procs, db, port, *extra, name=name, lease_seconds=lease_seconds, env=env
        )
        yield RunningServer(loopback_url(port), proc, procs)
    finally:
        procs.stop_all(grace_s)
