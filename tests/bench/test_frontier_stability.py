"""bench/frontier_stability.py: membership and decision flips on small constructed pools,
and the re-analysis of a saved run from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import frontier_stability as fs

ROOT = Path(__file__).resolve().parents[2]
REL = {"latency_ms": [0.9, 1.1], "memory_mb": [0.97, 1.03]}


def rows(latencies: list[float], again: list[float] | None = None) -> list[dict[str, Any]]:
    """Candidates with params rising with their index, memory rising too (so latency
    decides), and one re-measurement each (`again`, or the same latency)."""
    again = again or latencies
    return [
        {
            "decoder_params": 1e6 * (i + 1),
            "latency_ms": first,
            "memory_mb": 100.0 + i,
            "busy": False,
            "feasible": True,
            "again": [{"latency_ms": later, "memory_mb": 100.0 + i, "busy": False}],
        }
        for i, (first, later) in enumerate(zip(latencies, again))
    ]


def test_identical_re_measurements_flip_nothing() -> None:
    pool = rows([10.0 + 3 * i + (i % 3) for i in range(8)])
    got = fs.stability(pool, REL, repeats=1)
    for kind in ("plain", "noise_aware"):
        assert got[kind]["flips"] == 0 and got[kind]["kept_share"] == 1.0
    assert got["decisions"]["flips"] == 0
    # A busy re-measurement takes its candidate out of the pool, as the server would.
    pool[0]["again"][0]["busy"] = True
    assert fs.stability(pool, REL, repeats=1)["pool"] == 7


def test_a_certain_point_pushed_far_off_is_a_decision_flip() -> None:
    # Params and latency: latencies 10, 20, 30 for params 1, 2, 3 are all certain.
    latency = ("latency_ms",)
    first = fs.stability(rows([10.0, 20.0, 30.0]), REL, 1, latency)
    assert first["decisions"]["certain_before"] == 3
    # Re-measured, the 2nd reads 40: the 3rd (more params, at most 33) beats it beyond noise.
    moved = fs.stability(rows([10.0, 20.0, 30.0], [10.0, 40.0, 30.0]), REL, 1, latency)
    assert moved["plain"]["flips"] == 1
    assert moved["decisions"]["flips"] == 1
    assert moved["per_repeat"][0]["decisions"]["transitions"]["certain->off"] == 1


def test_a_move_into_cannot_tell_is_not_a_decision_flip() -> None:
    # Equal memory; latencies 10 and 20 for params 1 and 2: both certain. Re-measured, the
    # second reads 9.5: nominally it now dominates the first, within the noise.
    pool = [
        {**r, "memory_mb": 100.0, "again": [{**r["again"][0], "memory_mb": 100.0}]}
        for r in rows([10.0, 20.0], [10.0, 9.5])
    ]
    got = fs.stability(pool, REL, repeats=1)
    assert got["plain"]["flips"] == 1  # the first left the plain frontier
    transitions = got["per_repeat"][0]["decisions"]["transitions"]
    assert transitions["certain->cannot_tell"] == 1 and transitions["certain->certain"] == 1
    assert got["decisions"]["flips"] == 0


def test_a_saved_run_is_re_analysed_from_the_command_line(tmp_path: Path) -> None:
    saved = {
        "search": {"noise": {"interval_rel": REL}},
        "remeasure": {"repeats": 1},
        "candidates": rows([10.0, 20.0, 30.0, 25.0]),
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(saved))
    done = subprocess.run(
        [sys.executable, "-m", "bench.frontier_stability", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "4 candidates quiet in both" in done.stdout
    assert "| params+latency_ms, noise_aware |" in done.stdout


def test_refit_recomputes_intervals_from_the_saved_reference_readings(tmp_path: Path) -> None:
    readings = [{"latency_ms": 10.0 + 0.1 * (i % 3), "peak_memory_mb": 50.0} for i in range(12)]
    saved = {
        "search": {
            "noise": {"interval_rel": REL, "confidence": 0.95},
            "measurement": {"device": "cpu"},
        },
        "remeasure": {"repeats": 1},
        "agent_reference_readings": readings,
        "candidates": rows([10.0, 20.0, 30.0, 25.0], [10.0, 20.0, 30.0, 40.0]),
    }
    rel, model = fs.refit(saved)
    assert rel["latency_ms"][0] < 1 < rel["latency_ms"][1]
    assert model.sigma["latency_ms"] > model.reference_sigma["latency_ms"]  # the extra
    # 40 against 25 is outside any interval this model states; the other three repeat exactly
    assert fs.coverage(saved["candidates"], rel)["latency_ms"] == 0.75
    path = tmp_path / "run.json"
    path.write_text(json.dumps(saved))
    done = subprocess.run(
        [sys.executable, "-m", "bench.frontier_stability", "--refit", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "latency_ms coverage of the first re-measurements: 75.0%" in done.stdout
