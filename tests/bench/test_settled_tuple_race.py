"""bench/settled_tuple_race.py at a tiny size, in a process of its own (its collector's
threshold is low, and the suite's heap is large): both ways run, with full collections, and
their SystemErrors are counted (counts, not whether the race was hit, asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_tiny_run_counts_each_way(tmp_path: Path) -> None:
    out = tmp_path / "race.json"
    command = [sys.executable, "-m", "bench.settled_tuple_race", "--seconds", "0.5"]
    subprocess.run([*command, "--json", str(out)], cwd=ROOT, check=True, timeout=120)
    result = json.loads(out.read_text())
    assert result["seconds"] == 0.5
    for way in ("keep_settled", "plain"):
        assert result[way]["full_collections"] > 0
        assert isinstance(result[way]["system_errors"], int)
