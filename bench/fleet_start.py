"""A fleet starting at once (issue 20, item 5): `--agents` agents register and claim their first
job, all at the same moment, against a fresh real server. What bench/load.py's whole-run claim
figures carry from the run's first second, measured apart.

Per round, a fresh `hwnas serve` (SQLite, authentication on, JSON log) holds bench/load.py's
searches (their first generations queue more jobs than there are agents). `--generators`
processes each make a client per agent, then wait at a barrier; at it, every agent registers
with the enrollment token and, once registered, claims once (no wait), as `hwnas agent` starts.
Per agent: the registration's latency, the claim's, and its time to its first job (from
sending the registration to the claim's answer); per round, the server's CPU (/proc) from the
barrier to the last answer. With `--baseline-pythonpath` a second server runs another
checkout's code (a worktree); the two alternate round by round, so that the machine's drift
falls on both. Reported: each figure per round, and its median over the rounds.

    .venv/bin/python -m bench.fleet_start [--agents 200] [--rounds 4]
        [--baseline-pythonpath /tmp/before] [--json bench/results/fleet_start.json]

Exits 1 when a registration or a claim was not answered 201 or 200 (with a job).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.load import start_search
from bench.load_agents import DEVICE_CLASS, FINGERPRINT, Load
from bench.load_checks import latency_stats
from bench.machine import commit, machine, tree_cpu_s
from bench.script import command_line, served_from, write_json
from hwnas.testing.servers import serve

HERE = Path(__file__).resolve().parent


async def _start(url: str, enroll: str, indices: list[int]) -> list[tuple]:
    """Each agent registers, then claims once; per agent (sent, registered, claimed: time.time(),
    registration status, claim status)."""
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    tls = httpx.create_ssl_context()
    clients = [
        httpx.AsyncClient(base_url=url, limits=limits, timeout=60, verify=tls) for _ in indices
    ]
    seen: list[tuple] = []

    async def agent(index: int, http: httpx.AsyncClient) -> None:
        fingerprint = {**FINGERPRINT, "hostname": f"start-{index:04d}"}
        body = {"device_class": DEVICE_CLASS, "name": f"start-{index}", "fingerprint": fingerprint}
        sent = time.time()
        reply = await http.post(
            "/api/v1/agents", json=body, headers={"authorization": f"Bearer {enroll}"}
        )
        registered = time.time()
        if reply.status_code != 201:
            seen.append((sent, registered, registered, reply.status_code, 0))
            return
        info = reply.json()
        claim = await http.post(
            f"/api/v1/agents/{info['agent_id']}/claim",
            headers={"authorization": f"Bearer {info['credential']}"},
        )
        seen.append((sent, registered, time.time(), 201, claim.status_code))

    try:
        await asyncio.gather(*(agent(i, http) for i, http in zip(indices, clients, strict=True)))
    finally:
        for http in clients:
            await http.aclose()
    return seen


def generate(url: str, enroll: str, indices: list[int], barrier, out: str) -> None:  # noqa: ANN001 - a multiprocessing Barrier
    """A generating process: its agents start at the barrier; what they saw goes to `out`."""
    loop = asyncio.new_event_loop()
    barrier.wait()
    Path(out).write_text(json.dumps(loop.run_until_complete(_start(url, enroll, indices))))
    loop.close()


def one_round(agents: int, generators: int, env: dict | None) -> dict:
    """A fresh server, the load's searches, the agents started at once; the round's figures."""
    load = Load(agents=agents, generators=generators)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with (
            serve(folder, folder / "s.db", "--log-format", "json", env=env) as server,
            server.client(timeout=120) as http,
        ):
            for index in range(load.searches):
                start_search(http, load.search_request(index))
            ctx = multiprocessing.get_context("spawn")
            barrier = ctx.Barrier(generators + 1)
            outs = [folder / f"generator-{g}.json" for g in range(generators)]
            procs = [
                ctx.Process(
                    target=generate,
                    args=(
                        server.url,
                        server.procs.agent_token,
                        list(range(g, agents, generators)),
                        barrier,
                        str(outs[g]),
                    ),
                )
                for g in range(generators)
            ]
            for proc in procs:
                proc.start()
            barrier.wait(timeout=120)
            cpu_before = tree_cpu_s(server.proc.pid)
            for proc in procs:
                proc.join(timeout=300)
            cpu_s = tree_cpu_s(server.proc.pid) - cpu_before
        seen = [tuple(agent) for out in outs for agent in json.loads(out.read_text())]
    return summarise(seen, cpu_s, agents)


def summarise(seen: list[tuple], cpu_s: float, agents: int) -> dict:
    began = min(sent for sent, *_ in seen)
    ms = lambda later, earlier: 1000 * (later - earlier)  # noqa: E731
    first_jobs = [ms(claimed, sent) for sent, _, claimed, _, _ in seen]
    return {
        "agents": len(seen),
        "failed": agents - sum(r == 201 and c == 200 for *_, r, c in seen),
        "server_cpu_ms_per_agent": round(1000 * cpu_s / agents, 2),
        "registration_ms": latency_stats([ms(done, sent) for sent, done, *_ in seen]),
        "claim_ms": latency_stats([ms(claimed, done) for _, done, claimed, _, _ in seen]),
        "first_job_ms": {
            "mean": round(statistics.fmean(first_jobs), 1),
            **latency_stats(first_jobs),
        },
        "last_answer_ms": round(max(ms(claimed, began) for _, _, claimed, _, _ in seen), 1),
    }


# Per round, the figures whose medians over the rounds are reported.
FIGURES = {
    "registration p50": ("registration_ms", "p50"),
    "registration max": ("registration_ms", "max"),
    "claim p50": ("claim_ms", "p50"),
    "claim p99": ("claim_ms", "p99"),
    "claim max": ("claim_ms", "max"),
    "first job mean": ("first_job_ms", "mean"),
    "first job max": ("first_job_ms", "max"),
    "server CPU per agent": ("server_cpu_ms_per_agent", None),
}


def medians(rounds: list[dict]) -> dict:
    def value(round_: dict, key: str, part: str | None) -> float:
        return round_[key] if part is None else round_[key][part]

    return {
        name: round(statistics.median(value(r, key, part) for r in rounds), 1)
        for name, (key, part) in FIGURES.items()
    }


def run(args: argparse.Namespace, argv: list[str] | None) -> dict:
    versions: dict[str, dict | None] = {"this": None}
    if args.baseline_pythonpath:
        versions["baseline"] = served_from(args.baseline_pythonpath)
    rounds: dict[str, list[dict]] = {name: [] for name in versions}
    for r in range(args.rounds):
        for name in list(versions) if r % 2 == 0 else list(reversed(versions)):
            rounds[name].append(one_round(args.agents, args.generators, versions[name]))
    return {
        "command": command_line(["python", "-m", "bench.fleet_start"], argv),
        "commit": commit(),
        "machine": machine(),
        "agents": args.agents,
        "baseline_pythonpath": args.baseline_pythonpath,
        "medians_ms": {name: medians(done) for name, done in rounds.items()},
        "rounds": rounds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--generators", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--baseline-pythonpath", help="another checkout, served the same way")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "fleet_start.json")
    args = parser.parse_args(argv)
    if args.agents < 1 or args.rounds < 1 or args.generators < 1:
        parser.error("--agents, --rounds and --generators must be at least 1")
    out = run(args, argv)
    for name, figures in out["medians_ms"].items():
        print(name + ": " + ", ".join(f"{k} {v:g}" for k, v in figures.items()))
    write_json(args.json, out, indent=1)
    failed = sum(r["failed"] for done in out["rounds"].values() for r in done)
    if failed:
        print(f"{failed} agents did not get a first job", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
