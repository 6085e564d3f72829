"""bench/engine_catch_up.py at a tiny size: both paths end where the live engine is (the
script asserts it per repeat), and the table has a row per strategy; no timings asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import engine_catch_up


def test_a_tiny_run_reports_a_row_per_strategy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "catch_up.json"
    assert engine_catch_up.main(["--sizes", "60", "--repeats", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["strategy"] for r in rows] == list(engine_catch_up.STRATEGIES)
    assert all(r["told"] == 60 and r["restore_ms"] > 0 and r["catch_up_ms"] > 0 for r in rows)
    assert "| nsga2 | 60 |" in capsys.readouterr().out
