"""Bad neighbours (issue 20, "Bad input"): does an agent that misbehaves hold up the others,
or lose or double a measurement?

A real `hwnas serve` (SQLite, authentication on, JSON log, leases of `--lease-s`) holds two LTS
searches, one for each of two device classes. A probe agent, in this process, loops claim ->
result with one client, timing each request. Phase by phase, a neighbour agent in a process
of its own misbehaves in a tight loop, with no pause between its requests:

- `quiet`: no neighbour;
- `idle_claims`: claims by an agent of a class no search serves, each answered "no work";
- `hoarding_claims`: claims that each take a job of the neighbour's search and never report
  it; at the phase's end the neighbour reports every lease it got, oldest first, so that
  those whose leases expired arrive late (and a job leased again, twice);
- `repeated_results`: each job's result sent, then sent again `--repeats` times at once.

Reported per phase (the probe goes on until the neighbour is done): the probe's claim and
result latency (p50, p99, max) and its cycles, and the neighbour's requests a second and
their statuses. Then exactly-once over the API
(bench.load_checks.verify): every accepted result is one job's, each measured candidate holds
the first accepted result for it, jobs_done agree.

    .venv/bin/python -m bench.bad_neighbours [--phase-s 10] [--repeats 3]
        [--json bench/results/bad_neighbours.json]

Exits 1 when a request failed (a transport error or a 5xx), exactly-once did not hold, or a
repeated result was not answered as a duplicate.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from bench.load import start_search
from bench.load_agents import FINGERPRINT, MEASUREMENT
from bench.load_checks import Seen, latency_stats, scan_log, verify
from bench.machine import commit, machine
from bench.script import command_line, write_json
from hwnas.testing.measurements import synthetic_measurement
from hwnas.testing.servers import serve

HERE = Path(__file__).resolve().parent
PHASES = ("quiet", "idle_claims", "hoarding_claims", "repeated_results")
PROBE_CLASS, NEIGHBOUR_CLASS, NOBODYS_CLASS = "probe", "neighbour", "served-by-no-search"


def search_request(device_class: str) -> dict:
    return {
        "name": device_class,
        "strategy": "lts",
        "device_class": device_class,
        "measurement": MEASUREMENT,
        "budget": {"max_evaluations": 100_000},
        "population": {"initial": 200, "parents": 40, "mutations": 80, "crossovers": 80},
    }


class Agent:
    """One registered agent with a client of its own; what it saw."""

    def __init__(self, url: str, enroll: str, device_class: str, name: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=60)
        fingerprint = {**FINGERPRINT, "hostname": name}
        body = {"device_class": device_class, "name": name, "fingerprint": fingerprint}
        reply = self.http.post(
            "/api/v1/agents", json=body, headers={"authorization": f"Bearer {enroll}"}
        )
        reply.raise_for_status()
        info = reply.json()
        self.agent_id = info["agent_id"]
        self.auth = {"authorization": f"Bearer {info['credential']}"}
        self.requests: list[tuple[str, int, float]] = []  # (kind, status (0: failed), ms)
        self.accepted: list[tuple] = []  # (search, arch, job, agent, duplicate)
        self.leases: list[int] = []

    def close(self) -> None:
        self.http.close()

    def post(self, kind: str, path: str, body: dict | None = None) -> httpx.Response | None:
        start = time.perf_counter()
        try:
            reply = self.http.post(path, json=body, headers=self.auth)
        except httpx.HTTPError:
            reply = None
        status = 0 if reply is None else reply.status_code
        self.requests.append((kind, status, 1000 * (time.perf_counter() - start)))
        return reply

    def claim(self) -> dict | None:
        reply = self.post("claim", f"/api/v1/agents/{self.agent_id}/claim")
        if reply is None or reply.status_code != 200:
            return None
        lease = reply.json()
        self.leases.append(lease["job_id"])
        return lease

    def report(self, lease: dict) -> dict | None:
        """The lease's synthetic measurement; the answer's body when it was accepted."""
        body = {
            "agent_id": self.agent_id,
            "lease_id": lease["lease_id"],
            "measurement": synthetic_measurement(lease["spec"]),
        }
        reply = self.post("result", f"/api/v1/jobs/{lease['job_id']}/result", body)
        if reply is None or reply.status_code != 200:
            return None
        got = reply.json()
        ids = (lease["search_id"], lease["arch_id"], lease["job_id"], self.agent_id)
        self.accepted.append((*ids, bool(got.get("duplicate"))))
        return got


def misbehave(url: str, enroll: str, phase: str, seconds: float, repeats: int, out: str) -> None:
    """The neighbour, in a process of its own: `phase`'s misbehaviour for `seconds`."""
    device_class = NOBODYS_CLASS if phase == "idle_claims" else NEIGHBOUR_CLASS
    agent = Agent(url, enroll, device_class, f"neighbour-{phase}")
    end, hoarded, repeated = time.monotonic() + seconds, [], []
    while time.monotonic() < end:
        lease = agent.claim()
        if phase == "hoarding_claims" and lease is not None:
            hoarded.append(lease)
        elif phase == "repeated_results" and lease is not None and agent.report(lease):
            repeated += [bool((agent.report(lease) or {}).get("duplicate")) for _ in range(repeats)]
    for lease in hoarded:  # oldest first: an expired lease's result arrives late
        agent.report(lease)
    agent.close()
    Path(out).write_text(
        json.dumps(
            {
                "requests": agent.requests,
                "accepted": agent.accepted,
                "leases": agent.leases,
                "repeats_answered_duplicate": repeated,
                "hoarded": len(hoarded),
            }
        )
    )


def probe_phase(probe: Agent, seconds: float, neighbour) -> dict:  # noqa: ANN001 - a Process
    """The probe's claim -> result loop for `seconds`, and on while the neighbour (if any)
    still runs, so that what it does last (a hoarder's reports) falls in the phase; the
    probe's latencies."""
    first = len(probe.requests)
    end = time.monotonic() + seconds
    while time.monotonic() < end or (neighbour is not None and neighbour.is_alive()):
        lease = probe.claim()
        if lease is None:
            time.sleep(0.05)  # its search's next generation is on its way
        else:
            probe.report(lease)
    seen = probe.requests[first:]
    return {
        kind: latency_stats([ms for k, status, ms in seen if k == kind and status])
        for kind in ("claim", "result")
    }


def run(args: argparse.Namespace, argv: list[str] | None) -> dict:
    phases: dict[str, dict] = {}
    seen, repeats = Seen(), []
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.workdir or Path(tmp)
        extra = ("--log-format", "json")
        with (
            serve(folder, folder / "n.db", *extra, lease_seconds=args.lease_s) as server,
            server.client(timeout=120) as http,
        ):
            search_ids = [
                start_search(http, search_request(c)) for c in (PROBE_CLASS, NEIGHBOUR_CLASS)
            ]
            enroll = server.procs.agent_token
            probe = Agent(server.url, enroll, PROBE_CLASS, "probe")
            ctx = multiprocessing.get_context("spawn")
            for phase in PHASES:
                out = folder / f"{phase}.json"
                neighbour = None
                if phase != "quiet":
                    neighbour = ctx.Process(
                        target=misbehave,
                        args=(server.url, enroll, phase, args.phase_s, args.repeats, str(out)),
                    )
                    neighbour.start()
                    time.sleep(1.0)  # the neighbour registered and under way
                phases[phase] = {"probe_ms": probe_phase(probe, args.phase_s, neighbour)}
                if neighbour is not None:
                    neighbour.join(timeout=args.phase_s + args.lease_s + 120)
                    part = json.loads(out.read_text())
                    statuses = Counter(f"{kind} {status}" for kind, status, _ in part["requests"])
                    phases[phase]["neighbour"] = {
                        "requests_per_s": round(len(part["requests"]) / args.phase_s, 1),
                        "statuses": dict(statuses),
                        "hoarded": part["hoarded"],
                    }
                    seen.requests += part["requests"]
                    seen.accepted += [a for a in part["accepted"] if not a[-1]]
                    seen.leases += part["leases"]
                    repeats += part["repeats_answered_duplicate"]
            probe.close()
            seen.requests += probe.requests
            seen.accepted += probe.accepted
            seen.leases += probe.leases
            once = verify(http, search_ids, seen)
        log = scan_log(folder / "server.log")
    failed = sum(1 for _, status, _ in seen.requests if status == 0 or status >= 500)
    return {
        "command": command_line(["python", "-m", "bench.bad_neighbours"], argv),
        "commit": commit(),
        "machine": machine(),
        "phase_s": args.phase_s,
        "lease_s": args.lease_s,
        "phases": phases,
        "failed_requests": failed,
        "repeats": {"sent": len(repeats), "answered_duplicate": sum(repeats)},
        "exactly_once": once,
        "server_log": log,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase-s", type=float, default=10.0)
    parser.add_argument("--lease-s", type=float, default=3.0, help="the server's leases")
    parser.add_argument("--repeats", type=int, default=3, help="each result sent again")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "bad_neighbours.json")
    parser.add_argument("--workdir", type=Path, help="keep the database and the server's log")
    args = parser.parse_args(argv)
    if args.phase_s <= 0 or args.lease_s <= 0 or args.repeats < 1:
        parser.error("--phase-s and --lease-s must be positive, --repeats at least 1")
    out = run(args, argv)
    for phase, figures in out["phases"].items():
        probe = figures["probe_ms"]
        line = ", ".join(
            f"{kind} p50 {s.get('p50', 0):.1f} / p99 {s.get('p99', 0):.1f} / max "
            f"{s.get('max', 0):.1f} ms (n={s['n']})"
            for kind, s in probe.items()
        )
        rate = figures.get("neighbour", {}).get("requests_per_s")
        print(f"{phase}: probe {line}" + (f"; neighbour {rate} requests/s" if rate else ""))
    write_json(args.json, out, indent=1)
    ok = (
        out["failed_requests"] == 0
        and out["exactly_once"]["ok"]
        and out["repeats"]["sent"] == out["repeats"]["answered_duplicate"]
    )
    if not ok:
        print("failed: see failed_requests, exactly_once and repeats", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
