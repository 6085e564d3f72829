"""Factories shared by the server and end-to-end tests."""

from __future__ import annotations

import threading
from typing import Any

import httpx

# The synthetic device lives in the harness (bench/load.py reports with it too); tests import
# it from here with the other factories.
from hwnas.testing.measurements import FINGERPRINT, synthetic_measurement

TINY_SPACE = {
    "n_layer": {"min": 2, "max": 3},
    "d_model": {"min": 64, "max": 128, "step": 64},
    "d_inner": {"min": 128, "max": 512, "step": 64},
    "d_embed": [64, 128],
    "cutoffs": [200, 500],
    "vocab_size": 1000,
    "n_positions": 64,
}

# A small space of every registered kind, so that real agents measure any kind in a second.
TINY_SPACES: dict[str, dict[str, Any]] = {
    "gpt2": {"kind": "gpt2", **TINY_SPACE},
    "transxl": {
        "kind": "transxl",
        **{k: v for k, v in TINY_SPACE.items() if k != "n_positions"},
        "tgt_len": 64,
        "mem_len": 16,
    },
    "flexibert": {
        "kind": "flexibert",
        "hidden_size": [128],
        "n_layer": [2],
        "feed_forward_dimension": [512],
        "vocab_size": 1000,
        "max_position_embeddings": 64,
    },
    "nasbench_nlp": {
        "kind": "nasbench_nlp",
        "max_nodes": 8,
        "d_embed": 32,
        "d_hidden": 48,
        "vocab_size": 1000,
    },
}

# A short latency protocol so that real agents finish a candidate in about a second.
FAST_MEASUREMENT = {
    "seq_len": 16,
    "warmup": 1,
    "warmup_max_s": 0.5,
    "min_samples": 5,
    "min_time_s": 0.0,
    "max_time_s": 0.5,
}


def search_request(**overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "name": "test",
        "device_class": "test-cpu",
        "space": dict(TINY_SPACE),
        "measurement": FAST_MEASUREMENT,
        "budget": {"max_evaluations": 12},
        "population": {"initial": 4, "parents": 2, "mutations": 2, "crossovers": 2},
        "seed": 7,
    }
    request.update(overrides)
    return request


def dominates(a: list[float], b: list[float]) -> bool:
    """a dominates b (all objectives minimised)."""
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def minimised(point: dict[str, Any], objectives: list[str]) -> list[float]:
    from archvocab.wire import OBJECTIVE_SENSE

    return [
        (-1.0 if OBJECTIVE_SENSE[o] == "max" else 1.0) * point["objectives"][o] for o in objectives
    ]


def check_frontier_beyond_noise(
    candidates: list[dict[str, Any]], front: list[dict[str, Any]], objectives: list[str]
) -> set[str]:
    """The API's frontier is the frontier beyond noise: a measured candidate is on it exactly
    when no other's worst case (the far ends of its intervals) dominates its best case, and a
    frontier point that another dominates nominally is grouped with a nominal frontier point
    that does; it is certain exactly when no other's best case dominates its worst case. Returns
    the nominal frontier's arch ids."""

    def bound(c: dict[str, Any], end: int) -> list[float]:
        values = dict(c["objectives"])
        for metric, interval in c["intervals"].items():
            values[metric] = interval[end]
        return minimised({"objectives": values}, objectives)

    measured = [c for c in candidates if c["status"] == "measured" and c["measurements"]]
    nominal = {c["arch_id"]: minimised(c, objectives) for c in measured}
    plain = {a for a, v in nominal.items() if not any(dominates(o, v) for o in nominal.values())}
    by_id = {p["arch_id"]: p for p in front}
    assert plain <= set(by_id), "a nominal frontier point is off the frontier"
    for c in measured:
        beyond = any(dominates(bound(o, 1), bound(c, 0)) for o in measured if o is not c)
        assert (c["arch_id"] in by_id) == (not beyond), c["arch_id"]
    for arch_id, point in by_id.items():
        doubted = any(
            dominates(bound(o, 0), bound(point, 1)) for o in measured if o["arch_id"] != arch_id
        )
        assert point["frontier_certain"] is (not doubted), arch_id
        group = point["frontier_group"]
        assert group in plain, (arch_id, group)
        if arch_id in plain:
            assert group == arch_id
        else:
            assert dominates(nominal[group], nominal[arch_id])
    return plain


def register(
    client: Any, device_class: str = "test-cpu", fingerprint: dict[str, Any] | None = None
) -> str:
    """Register an agent over HTTP (client: TestClient or httpx.Client); returns its id."""
    response = client.post(
        "/api/v1/agents",
        json={"device_class": device_class, "fingerprint": fingerprint or FINGERPRINT},
    )
    assert response.status_code == 201, response.text
    return response.json()["agent_id"]


def play_agent(client: Any, agent_id: str, max_jobs: int = 10_000, busy: bool = False) -> int:
    """Claim and report synthetic results until no work is left; returns jobs done."""
    done = 0
    while done < max_jobs:
        claimed = client.post(f"/api/v1/agents/{agent_id}/claim")
        if claimed.status_code == 204:
            return done
        assert claimed.status_code == 200, claimed.text
        lease = claimed.json()
        result = {
            "agent_id": agent_id,
            "lease_id": lease["lease_id"],
            "measurement": synthetic_measurement(lease["spec"], busy=busy),
        }
        reported = client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=result)
        assert reported.status_code == 200, reported.text
        done += 1
    return done


def agent_registration(name: str | None = None) -> Any:
    """An agent's registration for the worker's own tests (a one-core x86 test machine)."""
    from archvocab.wire import AgentRegistration, DeviceFingerprint

    return AgentRegistration(
        device_class="cpu-test",
        name=name,
        fingerprint=DeviceFingerprint(
            hostname="test",
            os="Linux",
            cpu_model="test cpu",
            machine="x86_64",
            cores=1,
            ram_bytes=2**30,
            torch_version="2",
            accelerator=None,
        ),
    )


def claim_waiting(url: str, agent: str, wait_s: float = 25) -> tuple[threading.Thread, list]:
    """An agent's claim at the server at `url` that may wait `wait_s` for work, sent from a
    thread of its own (started): the thread, and the list its answer lands in."""
    answers: list[httpx.Response] = []

    def claim() -> None:
        with httpx.Client(base_url=url, timeout=wait_s + 35) as waiting:
            answers.append(waiting.post(f"/api/v1/agents/{agent}/claim", params={"wait": wait_s}))

    waiter = threading.Thread(target=claim)
    waiter.start()
    return waiter, answers
