"""bench/create_blocking.py at a tiny size: the create succeeds with its first generation
queued, or the next generation is queued after the first is measured, and registrations are
timed before and during it (counts, not timings, asserted); with `--part-trace`, each part
of the round is timed in the server, and `--idle-claimers` claim meanwhile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import create_blocking
from bench.proposal_cost import ROOT_PATH


def test_a_tiny_run_times_registrations_beside_a_create(tmp_path: Path) -> None:
    out = tmp_path / "create.json"
    argv = ["--population", "300", "--quiet", "3", "--head-start", "0", "--json", str(out)]
    argv += ["--server-pythonpath", ROOT_PATH, "--workdir", str(tmp_path)]
    assert create_blocking.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["create"]["status"] == 201 and result["create"]["queued"] == 300
    assert result["register_quiet_ms"]["n"] == 3
    during, slowest = result["register_during_create_ms"], result["slowest_during_create"]
    assert len(slowest) == min(5, during["n"])
    assert all(s["began_s"] >= 0 for s in slowest)
    assert [s["ms"] for s in slowest] == sorted((s["ms"] for s in slowest), reverse=True)
    assert list(tmp_path.glob("*.log"))  # the server's log is kept


def test_a_tiny_run_times_registrations_beside_a_next_generation(tmp_path: Path) -> None:
    out = tmp_path / "next.json"
    argv = ["--round", "next", "--population", "200", "--initial", "6", "--quiet", "2"]
    argv += ["--head-start", "0", "--json", str(out), "--server-pythonpath", ROOT_PATH]
    assert create_blocking.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["round"] == "next" and result["initial"] == 6
    assert result["create"]["queued"] == 200 and result["create"]["result_s"] > 0
    assert result["register_during_create_ms"]["n"] >= 1


def test_a_traced_run_beside_an_idle_claimer_reports_each_part_and_its_steps(
    tmp_path: Path,
) -> None:
    out = tmp_path / "traced.json"
    argv = ["--round", "next", "--population", "230", "--initial", "6", "--quiet", "2"]
    argv += ["--head-start", "0", "--json", str(out), "--server-pythonpath", ROOT_PATH]
    assert create_blocking.main([*argv, "--part-trace", "--idle-claimers", "1"]) == 0
    result = json.loads(out.read_text())
    assert result["idle_claimers"] == 1 and result["idle_claims_made"][0] > 0
    parts = result["part_holds"]
    # 230 proposals, at most 50 to a part (server.services.searches.ROUND_CHUNK)
    assert parts["n"] >= 5
    steps = ("wait_ms", "held_ms", "search_row_ms", "lookup_ms", "insert_ms", "commit_ms")
    for step in (*steps, "driver_commit_ms"):
        assert 0 < parts[step]["p50"] <= parts[step]["p90"] <= parts[step]["max"], step
    # the driver's COMMIT is inside the part's commit; each part wrote pages to the log
    assert all(part["driver_commit_ms"] <= part["commit_ms"] for part in parts["longest"])
    assert parts["log_pages_max"] >= 1
    held = [part["held_ms"] for part in parts["longest"]]
    assert held == sorted(held, reverse=True)
    assert held[0] == pytest.approx(parts["held_ms"]["max"], abs=0.01)
    assert all(part["insert_ms"] < part["held_ms"] for part in parts["longest"])
