"""Child processes of one test or benchmark run, each logging to a file of its own.

`Processes(folder)` starts commands by name (`start`: an `hwnas` subcommand; `spawn`: any
command line) with their output in `<folder>/<name>.log`: the first start of a name begins the
file afresh, a restart under the same name appends to it. `stop_all` ends them all: SIGTERM,
then SIGKILL for whatever is still running after the grace period. hwnas.testing.servers and
hwnas.testing.agents start servers and agents through it and keep the tokens a server was
started with here, where the run's agents and clients find them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx


def hwnas_command(*args: str) -> list[str]:
    """The command line of `hwnas ARGS` in this interpreter (its virtual environment)."""
    return [sys.executable, "-m", "hwnas", *args]


def stop(proc: subprocess.Popen, grace_s: float = 60.0) -> None:
    """SIGTERM (a server or agent finishes what it is doing), SIGKILL after `grace_s`."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Processes:
    """Named child processes, each logging to `<folder>/<name>.log`."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.procs: list[subprocess.Popen] = []
        self.by_name: dict[str, subprocess.Popen] = {}
        # Set by hwnas.testing.servers.start_server (`hwnas token create`): a user token and an
        # agent enrollment token; None for a server started with --no-auth.
        self.user_token: str | None = None
        self.agent_token: str | None = None

    @property
    def user_env(self) -> dict[str, str]:
        """Environment for `hwnas search ...` commands: the user token."""
        return {"HWNAS_TOKEN": self.user_token} if self.user_token else {}

    @property
    def agent_env(self) -> dict[str, str]:
        """Environment for agents: the enrollment token (never on the command line)."""
        return {"HWNAS_AGENT_TOKEN": self.agent_token} if self.agent_token else {}

    def client(self, url: str, timeout: float = 30) -> httpx.Client:
        """A user's HTTP client for the server at `url`, with the user token."""
        headers = {"Authorization": f"Bearer {self.user_token}"} if self.user_token else {}
        return httpx.Client(base_url=url, timeout=timeout, headers=headers)

    def log_path(self, name: str) -> Path:
        return self.folder / f"{name}.log"

    def log(self, name: str) -> str:
        """Everything `name` has written so far ('' before it started)."""
        path = self.log_path(name)
        return path.read_text(errors="replace") if path.exists() else ""

    def spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        """Start `argv` as `name`, with `env` added to this process's environment."""
        mode = "a" if name in self.by_name else "w"
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.log_path(name).open(mode) as log:
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
            )
        self.procs.append(proc)
        self.by_name[name] = proc
        return proc

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start `hwnas ARGS` as `name`."""
        return self.spawn(name, hwnas_command(*args), env)

    def kill(self, name: str) -> None:
        """kill -9: no handler runs, nothing is flushed or reported."""
        proc = self.by_name[name]
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop_all(self, grace_s: float = 60.0) -> None:
        """SIGTERM to every process still running, then wait for each (SIGKILL after
        `grace_s`)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            stop(proc, grace_s)
