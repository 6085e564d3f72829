"""bench/reproducibility.py: the --quick run end to end (a real server, agent and
re-measurements) and its JSON's structure and ranges; no timings asserted."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import background_load
from bench import reproducibility as rp

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    out = tmp_path_factory.mktemp("reproducibility") / "quick.json"
    done = subprocess.run(
        [sys.executable, "bench/reproducibility.py", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text()), done.stdout


def between(value: float | None, low: float, high: float) -> bool:
    return value is not None and low <= value <= high


@pytest.mark.slow
def test_the_command_comes_first_and_the_search_ran_to_its_budget(
    quick: tuple[dict[str, Any], str],
) -> None:
    payload, stdout = quick
    assert stdout.splitlines()[0] == payload["command"]
    assert payload["command"].startswith(".venv/bin/python bench/reproducibility.py ")
    assert "--quick" in payload["command"]
    search = payload["search"]
    assert search["measured"] + search["failed"] == rp.QUICK["budget"]
    assert search["measured"] >= 3
    assert search["agent_counters"]["measurements_reported"] == search["measured"]
    assert search["noise"]["reference_readings"] >= 1
    assert {"search", "remeasure"} <= set(payload["load"]["phases"])


@pytest.mark.slow
def test_every_candidate_was_measured_again(quick: tuple[dict[str, Any], str]) -> None:
    payload, _ = quick
    again = payload["remeasure"]
    assert again["measurements"] == payload["search"]["measured"] * again["repeats"]
    assert again["reference_readings"] >= 3
    for row in payload["candidates"]:
        assert len(row["again"]) == again["repeats"]
        for metric in ("latency_ms", "memory_mb"):
            low, high = row["intervals"][metric]
            assert low <= row[metric] <= high


@pytest.mark.slow
def test_shares_and_spreads_are_in_range(quick: tuple[dict[str, Any], str]) -> None:
    payload, _ = quick
    for which in ("all", "quiet"):
        for metric, cov in payload["coverage"][which].items():
            assert cov["n"] == 0 or between(cov["hwnas"], 0, 1)
            assert (metric == "memory_mb") == (cov["today"] is None) or cov["n"] == 0
    assert payload["coverage"]["all"]["latency_ms"]["n"] >= payload["search"]["measured"] - 1
    spread = payload["spread"]
    # hwnas's intervals come from the between-process noise model: wider than one process's CI.
    assert spread["latency_ms"]["hwnas_rel_width"] > spread["latency_ms"]["today_rel_width"] > 0
    assert between(spread["memory_mb"]["between_median_abs_log"], 0, 1)
    memory = payload["memory"]
    assert between(memory["candidates"]["median"], 0, 1)
    assert between(memory["reference"]["all_cv"], 0, 1)
    assert set(payload["targets"]) == {
        "latency_coverage_ge_90",
        "memory_coverage_ge_90",
        "memory_cv_le_3pct",
        "noise_frontier_keeps_ge_90",
        "noise_flips_le_half_plain",
        "noise_decision_flips_le_half_plain",
    }


@pytest.mark.slow
def test_frontiers_and_cost_add_up(quick: tuple[dict[str, Any], str]) -> None:
    payload, _ = quick
    frontier = payload["frontier"]
    # The script's frontier beyond noise, on the first measurements, is the server's.
    assert frontier["server_disagreements"] == 0
    for kind in ("plain", "noise_aware"):
        f = frontier[kind]
        assert f["kept"] <= f["size_before"] <= frontier["pool"]
        assert f["flips"] == f["left"] + f["entered"]
    # Beyond noise keeps every nominal frontier point, and maybe more.
    assert frontier["noise_aware"]["size_before"] >= frontier["plain"]["size_before"]
    decided = frontier["decisions"]
    size = frontier["noise_aware"]["size_before"]
    assert decided["certain_before"] + decided["cannot_tell_before"] == size
    assert decided["certain_before"] <= frontier["plain"]["size_before"]
    assert sum(frontier["per_repeat"][0]["decisions"]["transitions"].values()) == frontier["pool"]
    assert set(frontier["pairs"]) == {"latency_ms", "memory_mb"}
    for pair in frontier["pairs"].values():
        assert pair["pool"] == frontier["pool"]
        assert pair["noise_aware"]["size_before"] >= pair["plain"]["size_before"]
    cost = payload["cost"]
    assert cost["candidates_s"] > 0 and cost["reference_each_s"] > 0
    assert cost["busy_retries"] == cost["busy_retries_counter"]
    assert cost["reference_measurements"] >= cost["reference_readings_carried"] >= 1


def test_agent_counters_are_read_from_its_last_stop_line() -> None:
    log = "x INFO agent: agent stopped: {'jobs_done': 1}\ny INFO agent: agent stopped: {'a': 2}\n"
    assert rp.agent_counters(log) == {"a": 2}
    assert rp.agent_counters("nothing here") == {}


def test_busy_loops_run_only_inside_the_block() -> None:
    with background_load.busy_loops(2) as procs:
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
    assert all(p.poll() is not None for p in procs)


def test_memory_streams_run_only_inside_the_block() -> None:
    with background_load.memory_streams(1, mb=1) as procs:
        assert len(procs) == 1 and procs[0].poll() is None
    assert procs[0].poll() is not None


def test_load_processes_stop_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), background_load.busy_loops(1) as procs:
        raise RuntimeError("the run failed")
    assert procs[0].poll() is not None


def test_the_load_kind_is_parsed_and_named_in_the_command() -> None:
    assert rp.parse_args([]).load_kind == "spin"
    args = rp.parse_args(["--quick", "--load", "1", "--load-kind", "memory"])
    assert args.load_kind == "memory"
    assert "--load 1 --load-kind memory" in rp.command(args)


def test_latency_shift_reads_bands_and_misses_from_saved_rows() -> None:
    from bench.reproducibility_analysis import latency_shift

    def row(first: float, again: float) -> dict[str, Any]:
        return {
            "latency_ms": first,
            "intervals": {"latency_ms": [first * 0.95, first * 1.05]},
            "again": [{"latency_ms": again}],
        }

    got = latency_shift([row(10.0, 9.0), row(50.0, 50.0), row(100.0, 110.0), row(100.0, 100.0)])
    assert got["n"] == 4 and got["misses_below"] == 1 and got["misses_above"] == 1
    assert got["bands"]["0-30 ms"] == {"n": 1, "median_log": pytest.approx(math.log(0.9))}
    assert got["bands"]["30-80 ms"]["median_log"] == 0.0
    assert got["bands"]["80-inf ms"]["n"] == 2
