"""bench/large_reads.py and bench/table_growth.py on a small search: every read timed for both
checkouts (this one standing in for the baseline), and a table that joins results one at a
time ends with the frontier a rebuilding one has (no timings asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import large_reads, table_growth
from bench.dashboard_scale import build

pytestmark = pytest.mark.slow
CANDIDATES = 300


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("large_reads")
    build(folder, CANDIDATES, "large")
    return folder


def test_every_read_is_timed_for_both_checkouts(workdir: Path) -> None:
    out = workdir / "result.json"
    here = str(Path(large_reads.__file__).resolve().parent.parent)
    argv = ["--baseline-src", here, "--candidates", str(CANDIDATES), "--repeats", "2"]
    assert (
        large_reads.main([*argv, "--whole", "1", "--workdir", str(workdir), "--json", str(out)])
        == 0
    )
    result = json.loads(out.read_text())
    reads = [*large_reads.READS, *large_reads.WHOLE]
    for name in ("current", "baseline"):
        samples = result["samples"][name]
        assert len(samples["cold ms"]) == 1
        for read in reads:
            rounds = 1 if read in large_reads.WHOLE else 2
            assert len(samples[f"{read} ms"]) == rounds and min(samples[f"{read} ms"]) > 0
            assert len(samples[f"{read} kB"]) == rounds
    # The poll with a token this server gave is a few kB; the whole table is not.
    current = result["medians"]["current"]
    assert current["poll kB"] < current["points kB"] / 5


def test_joining_results_gives_the_frontier_rebuilding_gives(workdir, capsys) -> None:
    db = workdir / f"large-{CANDIDATES}.db"
    assert table_growth.main(["--db", str(db), "--results", "6"]) == 0
    assert "same frontier: True" in capsys.readouterr().out


def test_results_with_readings_and_re_measurements_are_timed(workdir, capsys) -> None:
    db = workdir / f"large-{CANDIDATES}.db"
    argv = ["--db", str(db), "--results", "0", "--readings", "10", "--again", "5"]
    assert table_growth.main(argv) == 0
    out = capsys.readouterr().out
    assert "a result with the agent's latest reading: median" in out and "(10 results)" in out
    assert "a re-measurement of a frontier point: median" in out and "(5 of them)" in out
    assert "choosing the next 2 re-measurements: median" in out
