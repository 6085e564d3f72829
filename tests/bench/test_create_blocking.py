"""bench/create_blocking.py at a tiny size: the create succeeds with its first generation
queued, and registrations are timed before it (counts, not timings, asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import create_blocking


def test_a_tiny_run_times_registrations_beside_a_create(tmp_path: Path) -> None:
    out = tmp_path / "create.json"
    argv = ["--population", "300", "--quiet", "3", "--head-start", "0", "--json", str(out)]
    assert create_blocking.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["create"]["status"] == 201 and result["create"]["queued"] == 300
    assert result["register_quiet_ms"]["n"] == 3
