"""Real processes for end-to-end tests: `hwnas serve` on a loopback port, `hwnas agent`s, and
HTTP clients for them. Tests start everything through here, so that what a real deployment
needs (credentials, flags) is set up in one place."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Processes:
    """Child processes of one test, each logging to `<tmp_path>/<name>.log`."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen] = []
        self.by_name: dict[str, subprocess.Popen] = {}
        # Tokens made by start_server (hwnas token create): a user's and an agent enrollment
        # token; None on a server started with --no-auth.
        self.user_token: str | None = None
        self.agent_token: str | None = None

    @property
    def user_env(self) -> dict[str, str]:
        """Environment for `hwnas search ...` commands: the user token."""
        return {"HWNAS_TOKEN": self.user_token} if self.user_token else {}

    def client(self, url: str, timeout: float = 30) -> httpx.Client:
        """A user's HTTP client for the server at `url`, with the user token."""
        return api_client(url, self.user_token, timeout)

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = (self.tmp_path / f"{name}.log").open("a")
        proc = subprocess.Popen(
            [sys.executable, "-m", "hwnas", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        log.close()
        self.procs.append(proc)
        self.by_name[name] = proc
        return proc

    def log(self, name: str) -> str:
        path = self.tmp_path / f"{name}.log"
        return path.read_text() if path.exists() else ""

    def kill(self, name: str) -> None:
        """kill -9: no handler runs, nothing is flushed or reported."""
        proc = self.by_name[name]
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_healthy(url: str, procs: Processes, name: str = "server", timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        proc = procs.by_name.get(name)
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{name} did not start:\n" + procs.log(name))


def start_server(
    procs: Processes,
    db: Path | str,
    port: int,
    *extra: str,
    name: str = "server",
    lease_seconds: float = 20,
) -> subprocess.Popen:
    """`hwnas serve` on 127.0.0.1:port over `db` (a file or a URL), with authentication as
    a real deployment has it (unless `--no-auth` is in `extra`); returns once healthy.
    The first call makes a user token and an agent enrollment token in `procs`."""
    if "--no-auth" not in extra and procs.user_token is None:
        procs.user_token = create_token(db, "user", "tests")
        procs.agent_token = create_token(db, "agent", "test-agents")
    proc = procs.start(
        name,
        "serve",
        "--port",
        str(port),
        "--db",
        str(db),
        "--lease-seconds",
        str(lease_seconds),
        *extra,
    )
    wait_healthy(f"http://127.0.0.1:{port}", procs, name)
    return proc


def start_agent(
    procs: Processes, name: str, url: str, *extra: str, device_class: str = "test-cpu"
) -> subprocess.Popen:
    """`hwnas agent` for `url`, polling fast, enrolling with the tests' enrollment token."""
    env = {"HWNAS_AGENT_TOKEN": procs.agent_token} if procs.agent_token else {}
    return procs.start(
        name,
        "agent",
        "--server",
        url,
        "--device-class",
        device_class,
        "--poll-interval",
        "0.2",
        *extra,
        env=env,
    )


def create_token(db: Path | str, kind: str, name: str) -> str:
    """`hwnas token create` on the server's database: the secret."""
    command = ["token", "create", "--db", str(db), "--kind", kind, "--name", name, "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "hwnas", *command], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)["token"]


def api_client(url: str, token: str | None = None, timeout: float = 30) -> httpx.Client:
    """An HTTP client for the server at `url`, sending `token` if given."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=url, timeout=timeout, headers=headers)
