"""bench/part_insert.py at a tiny size: each way writes its parts quiet and beside a busy
thread, and every part's rows are in the file (counts and order, not timings, asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import part_insert


def test_a_tiny_run_times_both_ways_quiet_and_busy(tmp_path: Path) -> None:
    out = tmp_path / "parts.json"
    assert part_insert.main(["--parts", "3", "--rows", "7", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert (result["parts"], result["rows"]) == (3, 7)
    assert set(result["ms"]) == {
        f"{way}_{beside}" for way in ("per_row", "one_statement") for beside in ("quiet", "busy")
    }
    for summary in result["ms"].values():
        assert 0 < summary["p50"] <= summary["p90"] <= summary["max"]
    assert result["written"] == {"architectures": 4 * 4 * 7, "candidates": 4 * 4 * 7}
