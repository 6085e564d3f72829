"""A finished search of any size in a SQLite file, for what reads searches: the API, the
dashboard, the CLI.

Measuring 20,000 candidates takes days on a device and minutes even through the replay
agents, so this writes the rows directly through the server's own tables: a finished LTS
search over LTS's GPT-2 space whose N distinct architectures were sampled from the space and
"measured" by the replay of this machine's real measurements (`bench/replay.py`, as the
replay agent reports them), in generations of 100, with the measured frontier's normalised
hypervolume after every result, as the server records it.

    .venv/bin/python -m bench.large_search --db /tmp/big.db --candidates 20000

It is a fixture for measurements (bench/dashboard_scale.py), not a test.
"""

from __future__ import annotations

import argparse
import random
from datetime import timedelta
from pathlib import Path

import numpy as np

from archvocab.registry import parse_space
from archvocab.wire import MeasurementSettings, SearchCreate
from bench.replay import DeviceReplay
from bench.replay_agent import ReplayDevice
from proxies.registry import zero_cost_scores
from search.hypervolume import Normaliser, hypervolume
from search.pareto import non_dominated_mask
from server.settings import Settings, utcnow
from server.store.cache import fingerprint_key
from server.store.rows import (
    AgentRow,
    ArchitectureRow,
    CandidateRow,
    MeasurementRow,
    SearchRow,
)
from server.store.store import Store

AGENT_ID = "replay-agent-0"
DEVICE_CLASS = "replay"
GENERATION = 100
OBJECTIVES = ("decoder_params", "latency_ms", "memory_mb")


def fill(db_path: Path, candidates: int, seed: int = 0, name: str | None = None) -> int:
    """Write a finished search of `candidates` measured architectures; returns its id."""
    replay = DeviceReplay.load()
    device = ReplayDevice(replay, time_scale=0.0)
    settings = MeasurementSettings.model_validate(replay.settings)
    request = SearchCreate.model_validate(
        {
            "name": name or f"{candidates} candidates (replayed)",
            "device_class": DEVICE_CLASS,
            "measurement": settings.model_dump(mode="json"),
            "budget": {"max_evaluations": candidates},
            "seed": seed,
        }
    )
    store = Store(Settings(database_url=f"sqlite:///{db_path}"))
    try:
        with store.write() as session:
            start = utcnow() - timedelta(seconds=candidates)
            agent = _agent(session, device, start)
            search = _search(session, request, start)
            _measure(session, search, request, device, agent, start)
            return search.id
    finally:
        store.close()


def _agent(session, device: ReplayDevice, at) -> AgentRow:
    agent = session.get(AgentRow, AGENT_ID)
    if agent is None:
        fp = device.fingerprint
        agent = AgentRow(
            id=AGENT_ID,
            name="replay",
            device_class=DEVICE_CLASS,
            fingerprint=fp.model_dump(mode="json"),
            fingerprint_key=fingerprint_key(fp),
            registered_at=at,
            last_seen_at=at,
        )
        session.add(agent)
    return agent


def _search(session, request: SearchCreate, start) -> SearchRow:
    search = SearchRow(
        name=request.name,
        status="finished",
        device_class=request.device_class,
        runtime=request.measurement.runtime,
        device=request.measurement.device,
        request=request.model_dump(mode="json"),
        created_at=start,
        finished_at=start + timedelta(seconds=request.budget.max_evaluations),
        finish_reason="budget",
    )
    session.add(search)
    session.flush()
    return search


def _measure(session, search, request, device, agent, start) -> None:
    space = parse_space(request.space)
    rng = random.Random(request.seed)
    seen: set[str] = set()
    front = np.empty((0, len(OBJECTIVES)))
    norm: Normaliser | None = None
    volume = 0.0
    while len(seen) < request.budget.max_evaluations:
        spec = space.sample(rng)
        if spec.arch_id in seen:
            continue
        seen.add(spec.arch_id)
        at = start + timedelta(seconds=len(seen))
        scores = zero_cost_scores(spec)
        if session.get(ArchitectureRow, spec.arch_id) is None:
            session.add(
                ArchitectureRow(
                    arch_id=spec.arch_id,
                    spec=spec.to_dict(),
                    decoder_params=int(scores["decoder_params"]),
                    total_params=int(scores["total_params"]),
                )
            )
        result = device(spec.to_dict(), request.measurement)
        measurement = MeasurementRow(
            arch_id=spec.arch_id,
            settings_key=request.measurement.cache_key(),
            fingerprint_key=agent.fingerprint_key,
            runtime="torch",
            agent_id=agent.id,
            search_id=search.id,
            latency_ms=result.latency_ms,
            peak_memory_mb=result.peak_memory_mb,
            busy=False,
            result=result.model_dump(mode="json"),
            created_at=at,
        )
        values = {
            "decoder_params": scores["decoder_params"],
            "latency_ms": result.latency_ms,
            "memory_mb": result.peak_memory_mb,
        }
        if norm is None:
            norm = _normaliser(space, values)
        point = norm(values)[None, :]
        if not (front <= point).all(axis=1).any():  # not weakly dominated: the front changes
            front = np.vstack([front, point])
            front = front[non_dominated_mask(front)]
            volume = hypervolume(front)
        session.add(
            CandidateRow(
                search_id=search.id,
                arch_id=spec.arch_id,
                generation=(len(seen) - 1) // GENERATION,
                status="measured",
                agent_id=agent.id,
                attempts=1,
                finished_at=at,
                measurement=measurement,
                result_seq=len(seen),
                hypervolume=volume,
            )
        )
        agent.jobs_done += 1
    search.normalisation = norm.to_dict() if norm else None


def _normaliser(space, first: dict[str, float]) -> Normaliser:
    """The proxy over a sample of the space; the hardware from 0 to 4x the first result (the
    server takes 2x the largest of the first ten)."""
    sample = [zero_cost_scores(space.sample(random.Random(i)))["decoder_params"] for i in range(64)]
    ideal = {"decoder_params": max(sample), "latency_ms": 0.0, "memory_mb": 0.0}
    reference = {
        "decoder_params": min(sample),
        "latency_ms": 4 * first["latency_ms"],
        "memory_mb": 4 * first["memory_mb"],
    }
    return Normaliser(list(OBJECTIVES), ideal, reference)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, type=Path, help="SQLite file (created if absent)")
    parser.add_argument("--candidates", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    search_id = fill(args.db, args.candidates, args.seed)
    print(f"search {search_id}: {args.candidates} candidates in {args.db}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
