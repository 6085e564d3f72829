"""bench/bad_neighbours.py at a small size: every phase runs with its neighbour misbehaving as
named, repeated results are answered as duplicates, and exactly-once holds (counts, not
timings, asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import bad_neighbours


def test_each_neighbour_misbehaves_as_named_and_nothing_is_lost_or_doubled(tmp_path: Path):
    out = tmp_path / "bad.json"
    argv = ["--phase-s", "1.5", "--lease-s", "1", "--repeats", "2", "--json", str(out)]
    assert bad_neighbours.main([*argv, "--workdir", str(tmp_path)]) == 0
    result = json.loads(out.read_text())
    phases = result["phases"]
    assert list(phases) == list(bad_neighbours.PHASES)
    assert all(p["probe_ms"]["claim"]["n"] > 0 for p in phases.values())
    assert "neighbour" not in phases["quiet"]
    idle = phases["idle_claims"]["neighbour"]["statuses"]
    assert set(idle) == {"claim 204"}
    assert phases["hoarding_claims"]["neighbour"]["hoarded"] > 0
    repeats = result["repeats"]
    assert repeats["sent"] > 0 and repeats["sent"] == repeats["answered_duplicate"]
    assert result["exactly_once"]["ok"] and result["failed_requests"] == 0
    assert (tmp_path / "server.log").exists()
