"""bench/request_cost.py at a tiny size: every cycle did work, the profile names the service
functions, and idle claims wrote nothing (statement counts, not timings, are asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import request_cost


def test_a_tiny_run_counts_statements_and_idle_claims_write_nothing(tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    argv = ["--warm", "5", "--cycles", "8", "--idle", "6", "--profile", "2", "--json", str(out)]
    assert request_cost.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["worked"] == 8 and result["cycle_cpu_ms"]["n"] == 8
    assert result["cycle_statements"]["writes"] > 0  # a claim leases, a result records
    assert result["idle_claim_statements"]["writes"] == 0
    assert "submit_result" in result["profile"] and "claim" in result["profile"]
