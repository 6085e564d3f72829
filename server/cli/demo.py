"""`hwnas demo`: a server on SQLite, one local agent process, a short LTS search, the frontier.

Everything runs for real: uvicorn on a loopback port, the agent as its own process measuring
PyTorch models, the search over the REST API. The space is LTS's GPT-2 space narrowed so the
demo finishes in a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from server.app.factory import create_app
from server.services import auth
from server.settings import Settings

DEVICE_CLASS = "local-cpu"


def demo_request(budget: int, seed: int) -> dict:
    """A narrowed GPT-2 space: the full vocabulary, shallow and narrow enough for a laptop."""
    per_generation = max(2, budget // 3)
    return {
        "name": "hwnas demo",
        "device_class": DEVICE_CLASS,
        "space": {
            "n_layer": {"min": 2, "max": 6},
            "d_model": {"min": 128, "max": 384, "step": 64},
            "d_inner": {"min": 256, "max": 1536, "step": 64},
        },
        # A short protocol for a demo: at most 1 s of warm-up and 2 s of timing per candidate.
        "measurement": {
            "batch_size": 1,
            "seq_len": 32,
            "threads": 1,
            "warmup_max_s": 1.0,
            "max_time_s": 2.0,
            "min_time_s": 0.2,
        },
        "budget": {"max_evaluations": budget},
        "population": {
            "initial": per_generation,
            "parents": max(2, per_generation // 2),
            "mutations": per_generation // 2,
            "crossovers": per_generation - per_generation // 2,
        },
        "seed": seed,
    }


def loopback_socket(port: int) -> socket.socket:
    """127.0.0.1:`port` bound for the server (0: a port the OS picks). uvicorn serves on this
    very socket, so no other process can take the port between choosing and listening."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


@dataclass
class DemoServer:
    """The demo's server, in a thread of this process, and its own tokens."""

    server: uvicorn.Server
    thread: threading.Thread
    user: str  # a user token
    enrollment: str  # an agent enrollment token

    def stop(self, timeout_s: float = 30) -> None:
        """End the server and wait for its shutdown to finish: an interpreter that exits
        while the thread still shuts the app down crashed at exit (SIGSEGV) in about one
        `hwnas demo` in a dozen."""
        self.server.should_exit = True
        self.thread.join(timeout_s)


def start_server(db_path: Path, sock: socket.socket) -> DemoServer:
    """The server on `sock`, with authentication on as `hwnas serve` has it, and the demo's
    own tokens."""
    settings = Settings(
        database_url=Settings.database_url_from(str(db_path)), lease_seconds=60, auth=True
    )
    app = create_app(settings)
    with app.state.store.write() as session:
        now = settings.clock()
        _, user = auth.create_token(session, "demo", "user", now)
        _, enrollment = auth.create_token(session, "demo-agent", "agent", now)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server did not start on port {port}")
        time.sleep(0.05)
    return DemoServer(server, thread, user, enrollment)


def start_agent(url: str, log_path: Path, token: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "hwnas",
        "agent",
        "--server",
        url,
        "--device-class",
        DEVICE_CLASS,
        "--name",
        "demo-agent",
        "--poll-interval",
        "0.5",
    ]
    log = log_path.open("w")
    env = {**os.environ, auth.AGENT_TOKEN_ENV: token}  # not on the command line, which `ps` shows
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)


def wait_for(client: httpx.Client, search_id: int, console: Console, quiet: bool) -> dict:
    columns = (
        TextColumn("[bold]search {task.fields[sid]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("gen {task.fields[gen]}  failed {task.fields[failed]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, disable=quiet, transient=True) as bar:
        task = bar.add_task("search", total=None, sid=search_id, gen=0, failed=0)
        while True:
            info = client.get(f"/api/v1/searches/{search_id}").raise_for_status().json()
            p = info["progress"]
            bar.update(
                task,
                total=p["budget"],
                completed=p["measured"] + p["failed"],
                gen=p["generation"],
                failed=p["failed"],
            )
            if info["status"] != "running":
                return info
            time.sleep(0.5)


def summary(info: dict) -> str:
    """How the search ended and what its results cost: measured on this machine now, or
    reused from the measurement cache (a second demo on the same database reuses them all)."""
    p = info["progress"]
    fresh = p["measured"] - p["reused"]
    reused = (
        f"{p['reused']} reused from earlier measurements in this database"
        if p["reused"]
        else "none reused"
    )
    return (
        f"Search {info['id']} {info['status']} ({info['finish_reason']}): {fresh} measured "
        f"now, {reused}, {p['failed']} failed, {p['generation'] + 1} generations."
    )


def frontier_table(points: list[dict]) -> Table:
    table = Table(title=f"Pareto frontier ({len(points)} architectures)")
    table.caption = (
        "L layers, d d_model, d_inner and heads: the per-layer values' range and set, "
        "k adaptive-embedding factor, params: decoder parameters, "
        "ms: median latency, CI: its 95% interval's half-width, MB: peak memory above the "
        "pre-build baseline (busy: measured while the machine was busy)"
    )
    for name in ("arch_id", "L", "d", "d_inner", "heads", "k", "params", "ms", "CI", "MB"):
        left = name in ("arch_id", "d_inner", "heads")
        table.add_column(name, justify="left" if left else "right", no_wrap=True)
    for p in sorted(points, key=lambda p: p["objectives"]["decoder_params"]):
        s, m = p["spec"], p["measurement"]
        inner = str(s["d_inner"][0])
        if len(set(s["d_inner"])) > 1:
            inner = f"{min(s['d_inner'])}-{max(s['d_inner'])}"
        table.add_row(
            p["arch_id"][:8],
            str(s["n_layer"]),
            str(s["d_model"]),
            inner,
            "/".join(map(str, sorted(set(s["n_head"])))),
            str(s["div_val"]),
            f"{p['objectives']['decoder_params'] / 1e6:.2f}M",
            f"{m['latency_ms']:.1f}",
            f"±{m['latency']['ci_rel'] * 100:.0f}%",
            f"{m['peak_memory_mb']:.1f}" + (" busy" if m["provenance"]["busy"] else ""),
        )
    return table


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=args.json)
    db_path = Path(args.db).resolve()
    try:
        sock = loopback_socket(args.port)
    except OSError as exc:
        print(f"hwnas demo: cannot listen on 127.0.0.1:{args.port}: {exc}", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    served = start_server(db_path, sock)
    token = served.user
    # The agent's log goes to a folder of its own, not the working directory: it is for when
    # something goes wrong, and the end of the run says where it is.
    agent_log = Path(tempfile.mkdtemp(prefix="hwnas-demo-")) / "agent.log"
    agent = start_agent(url, agent_log, served.enrollment)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, timeout=30, headers=headers) as client:
            created = client.post("/api/v1/searches", json=demo_request(args.budget, args.seed))
            search_id = created.raise_for_status().json()["id"]
            console.print(f"Search {search_id} started on {url} with 1 agent ({DEVICE_CLASS}).")
            console.print(f"Watch it live:   {url}/dashboard/#/search/{search_id}")
            console.print(f"The agent's log: {agent_log}")
            info = wait_for(client, search_id, console, quiet=False)
            points = client.get(f"/api/v1/searches/{search_id}/pareto").raise_for_status().json()
        if args.json:
            print(json.dumps({"search": info, "pareto": points}, indent=2))
        console.print(summary(info), soft_wrap=True)  # on stderr with --json
        if not args.json:
            console.print(frontier_table(points))
        stored = f"Everything is stored in {db_path}; the agent's log is {agent_log}."
        console.print(stored, soft_wrap=True)  # paths to copy: never wrapped
        if args.keep_serving:
            console.print(f"Dashboard:       {url}/dashboard/#/search/{search_id}")
            console.print(f"All candidates:  {url}/api/v1/searches/{search_id}/candidates")
            console.print(f"Frontier as CSV: {url}/api/v1/searches/{search_id}/pareto?format=csv")
            console.print(f"API docs:        {url}/docs   (serving until Ctrl-C)")
            console.print(f"Your user token: export HWNAS_TOKEN={token}")
            while True:
                time.sleep(3600)
        console.print(
            f"Browse it again: hwnas serve --db {db_path}, then "
            f"http://127.0.0.1:8000/dashboard/#/search/{search_id}",
            soft_wrap=True,
        )
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        agent.terminate()
        try:
            agent.wait(timeout=60)
        except subprocess.TimeoutExpired:
            agent.kill()
        served.stop()
