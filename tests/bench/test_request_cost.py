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
    _some_of_each_cycle_under_the_write_lock(result)
    assert "submit_result" in result["profile"] and "claim" in result["profile"]
    # A new reference reading every 5 results, as agents send: 5 + 8 + 8 + 2 results
    assert result["reference_readings"] == 5
    assert request_cost.main([*argv[:-2], "--readings", "0", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["reference_readings"] == 0


def test_with_credentials_and_a_real_server_the_cycles_still_do_work(tmp_path: Path) -> None:
    """--auth sends credentials as deployed agents do; --served times a real `hwnas serve`
    (its CPU per cycle comes from /proc: positive, one figure per round), and with
    --baseline-pythonpath a second one (here the same code) in the same rounds."""
    out = tmp_path / "cost.json"
    argv = ["--warm", "3", "--cycles", "4", "--idle", "3", "--profile", "1", "--auth"]
    # 20 cycles a round: well above the 10 ms ticks that /proc counts CPU in
    argv += ["--served", "40", "--rounds", "2", "--json", str(out)]
    argv += ["--baseline-pythonpath", str(Path(request_cost.__file__).parents[1])]
    assert request_cost.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["auth"] is True and result["worked"] == 4
    for kind in ("served_cycle_cpu_ms", "served_claim_next_cycle_cpu_ms"):
        served = result[kind]
        assert len(served["rounds"]) == 2 and served["median"] > 0
    assert result["served_idle_claim_cpu_ms"] >= 0
    baseline = result["served_baseline_claim_next_cycle_cpu_ms"]
    assert len(baseline["rounds"]) == 2 and baseline["median_ratio"] > 0
    # both began from the one warmed search
    assert result["served_start_results"] == {"this": 3, "baseline": 3}


def test_the_results_of_re_measurements_at_a_search_s_end_are_timed_apart(tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    argv = ["--warm", "60", "--cycles", "2", "--idle", "2", "--profile", "1"]
    argv += ["--remeasure", "3", "--json", str(out)]
    assert request_cost.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["remeasure_first_ms"]["n"] == 60  # the search's budget, all first results
    again = result["remeasure_again_ms"]
    assert again["n"] == 3 and again["max"] >= again["median"] > 0
    assert result["remeasure_again_claim_ms"]["n"] == result["remeasure_again_settle_ms"]["n"] == 3
    held = result["remeasure_again_write_lock_held_ms"]
    assert held["n"] >= 6 and held["max"] >= held["median"] > 0  # a claim's and a result's


def test_on_postgresql_the_cycles_run_on_a_throwaway_cluster(tmp_path: Path, postgres_cluster):
    """--store postgresql: the same cycles on a cluster of its own."""
    out = tmp_path / "cost.json"
    argv = ["--store", "postgresql", "--warm", "3", "--cycles", "4", "--idle", "3"]
    assert request_cost.main([*argv, "--profile", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["store"] == "postgresql" and result["worked"] == 4
    assert result["idle_claim_statements"]["writes"] == 0
    _some_of_each_cycle_under_the_write_lock(result)


def _some_of_each_cycle_under_the_write_lock(result: dict) -> None:
    """A result is recorded holding the write lock: some of each cycle's statements and time
    are under it, never more than all of them."""
    under = result["cycle_statements_under_lock"]
    assert 0 < under <= sum(result["cycle_statements"].values())
    assert result["cycle_write_lock_ms"]["median"] > 0
