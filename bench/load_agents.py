"""bench/load.py's workload: what one scenario runs (`Load`), and the simulated agents that
run it, in load-generating processes (asyncio + httpx, one connection per agent).

Each agent registers with the enrollment token and loops claim -> think (a sleep of `think_s`,
0.5x to 1.5x) -> report a synthetic measurement (hwnas.testing.measurements); on 204 it waits
`idle_s`. Every request's latency and status is recorded for bench/load_checks.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import random
import resource
import time
from datetime import datetime
from pathlib import Path

import httpx

from hwnas.testing.measurements import synthetic_measurement

DEVICE_CLASS = "load"
FINGERPRINT = {
    "os": "Linux",
    "cpu_model": "simulated cpu",
    "machine": "x86_64",
    "cores": 4,
    "ram_bytes": 2**33,
    "torch_version": "2.13.0",
    "accelerator": None,
}
# The agents only carry it (they simulate the device): small, as a fast test protocol.
MEASUREMENT = {"seq_len": 16, "warmup": 1, "min_samples": 5, "min_time_s": 0.0, "max_time_s": 0.5}
REPORT_TRIES = 3


@dataclasses.dataclass(frozen=True)
class Load:
    """What one scenario runs; the same for every store and worker count."""

    agents: int = 200
    generators: int = 2
    duration_s: float = 60.0
    results: int | None = None
    searches: int = 4
    budget: int = 1000
    think_s: float = 1.0
    idle_s: float = 1.0
    timeout_s: float = 60.0
    lease_seconds: float = 60.0
    # How long the generators keep an idle connection. httpx's default (5 s) equals uvicorn's
    # keep-alive timeout: a request sent on a connection the server is closing that moment
    # fails with ReadError before the app sees it (a few per 30 s of 200 agents here; see
    # docs/benchmarks.md). Below the server's timeout, the client always closes first.
    keepalive_s: float = 2.0
    space: dict | None = None  # the searches' space (default: LTS's GPT-2 space)
    strategy: str = "lts"  # hwnas: a proposal round after every result, outside the lock
    # Each result also claims the agent's next job (`claim_next`), as `hwnas agent` does.
    claim_next: bool = False
    # A claim may wait this long for work (`claim?wait=`, a long poll) instead of a 204 and
    # `idle_s`; 0: it answers at once.
    claim_wait_s: float = 0.0

    def search_request(self, index: int) -> dict:
        """A search (LTS unless `strategy` says otherwise) whose first generation keeps about
        1.5x the agents' jobs queued."""
        initial = max(4, math.ceil(1.5 * self.agents / self.searches))
        children = max(1, initial * 2 // 5)
        return {
            "name": f"load {index}",
            "strategy": self.strategy,
            "device_class": DEVICE_CLASS,
            "measurement": MEASUREMENT,
            "budget": {"max_evaluations": self.budget},
            "population": {
                "initial": initial,
                "parents": max(2, initial // 5),
                "mutations": children,
                "crossovers": children,
            },
            "seed": index,
            **({"space": self.space} if self.space else {}),
        }


# -- the simulated agents (in the generator processes) ----------------------------------------
class Generator:
    """One process's share of the agents, on one event loop; each agent has an HTTP client
    (and a connection) of its own, as an agent on a device of its own does."""

    def __init__(
        self,
        load: Load,
        clients: dict[int, httpx.AsyncClient],
        enroll: str,
        stop,  # noqa: ANN001 - an Event
    ) -> None:
        self.load, self.clients, self.stop = load, clients, stop
        self.enroll = {"authorization": f"Bearer {enroll}"}
        self.requests: list[tuple] = []  # (kind, status (0: transport error), began, ms, error)
        self.accepted: list[tuple] = []  # (search_id, arch_id, job_id, agent_id, duplicate)
        self.leases: list[int] = []  # job ids, one per lease given
        # Per claim answered with a lease: (began, ms, when its job was queued (time.time()),
        # None from a server that does not say).
        self.claim_leases: list[tuple] = []

    async def call(
        self, http: httpx.AsyncClient, kind: str, path: str, headers: dict, body: dict | None = None
    ):
        began, start = time.time(), time.perf_counter()
        try:
            reply = await http.post(path, headers=headers, json=body)
            status = reply.status_code
            error = "" if status < 300 else reply.text[:300]
        except httpx.HTTPError as exc:
            reply, status, error = None, 0, f"{type(exc).__name__}: {exc}"[:200]
        self.requests.append((kind, status, began, 1000 * (time.perf_counter() - start), error))
        return reply

    async def agent(self, index: int) -> None:
        fingerprint = {**FINGERPRINT, "hostname": f"load-{index:04d}"}
        body = {"device_class": DEVICE_CLASS, "name": f"load-{index}", "fingerprint": fingerprint}
        http = self.clients[index]
        reply = await self.call(http, "register", "/api/v1/agents", self.enroll, body)
        if reply is None or reply.status_code != 201:
            return
        info = reply.json()
        agent_id, auth = info["agent_id"], {"authorization": f"Bearer {info['credential']}"}
        rng = random.Random(index)
        claim_path = f"/api/v1/agents/{agent_id}/claim"
        if self.load.claim_wait_s:
            claim_path += f"?wait={self.load.claim_wait_s:g}"
        lease = None
        # A job the last result brought is measured and reported even after the stop, as
        # `hwnas agent` does, so no lease is left running.
        while not self.stop.is_set() or lease is not None:
            if lease is None:
                asked = time.perf_counter()
                reply = await self.call(http, "claim", claim_path, auth)
                if reply is None or reply.status_code != 200:
                    # A claim that waited its time out asks again at once; one answered
                    # sooner (a server that does not wait) waits `idle_s` as any other.
                    wait_s = self.load.claim_wait_s
                    waited = wait_s > 0 and time.perf_counter() - asked >= wait_s / 2
                    if not (reply is not None and reply.status_code == 204 and waited):
                        await asyncio.sleep(self.load.idle_s)
                    continue
                lease = reply.json()
                began, ms = self.requests[-1][2:4]
                self.claim_leases.append((began, ms, queued_epoch(lease)))
            self.leases.append(lease["job_id"])
            await asyncio.sleep(self.load.think_s * rng.uniform(0.5, 1.5))
            lease = await self.report(http, agent_id, auth, lease)

    async def report(
        self, http: httpx.AsyncClient, agent_id: str, auth: dict, lease: dict
    ) -> dict | None:
        """Report the lease's measurement; a transport error or a 5xx is retried, as an agent
        does (the retry is a request of its own, and the failure stays counted). Returns the
        next job when the answer brought one (`claim_next`)."""
        path = f"/api/v1/jobs/{lease['job_id']}/result"
        if self.load.claim_next and not self.stop.is_set():
            path += "?claim_next=true"
        body = {
            "agent_id": agent_id,
            "lease_id": lease["lease_id"],
            "measurement": synthetic_measurement(lease["spec"]),
        }
        answer_lost = False
        for _ in range(REPORT_TRIES):
            reply = await self.call(http, "result", path, auth, body)
            if reply is not None and reply.status_code == 200:
                got = reply.json()
                ids = (lease["search_id"], lease["arch_id"], lease["job_id"], agent_id)
                # A duplicate after a lost answer is the server's receipt of the first try.
                duplicate = bool(got.get("duplicate")) and not answer_lost
                self.accepted.append((*ids, duplicate))
                return got.get("next")
            if reply is not None and reply.status_code < 500:
                return None  # refused: retrying the same body cannot help
            answer_lost = True
            await asyncio.sleep(1.0)
        return None


def queued_epoch(lease: dict) -> float | None:
    queued = lease.get("queued_at")
    return datetime.fromisoformat(queued).timestamp() if queued else None


async def _generate(load: Load, url: str, enroll: str, indices: list[int], stop, barrier):  # noqa: ANN001 - multiprocessing primitives
    # One client per agent, made before the start: with one pool shared by the process's 100
    # agents, the generators used both cores in the run's first seconds, and the agents' first
    # requests waited on their own process, not on the server (docs/benchmarks.md, "The load's
    # own start"). Each opens its connection on its first request, after the start, as a
    # device does; one TLS context serves them all.
    limits = httpx.Limits(
        max_connections=1, max_keepalive_connections=1, keepalive_expiry=load.keepalive_s
    )
    timeout, tls = httpx.Timeout(load.timeout_s), httpx.create_ssl_context()
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            i: await stack.enter_async_context(
                httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout, verify=tls)
            )
            for i in indices
        }
        generator = Generator(load, clients, enroll, stop)
        barrier.wait()  # every generator starts its agents together
        await asyncio.gather(*(generator.agent(i) for i in indices))
    return generator


def generate(load: Load, url: str, enroll: str, indices: list[int], stop, barrier, out: str):  # noqa: ANN001 - multiprocessing primitives
    """A load-generating process: runs its agents, then writes what they saw to `out`."""
    generator = asyncio.run(_generate(load, url, enroll, indices, stop, barrier))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    Path(out).write_text(
        json.dumps(
            {
                "requests": generator.requests,
                "accepted": generator.accepted,
                "leases": generator.leases,
                "claim_leases": generator.claim_leases,
                "cpu_s": usage.ru_utime + usage.ru_stime,
            }
        )
    )
