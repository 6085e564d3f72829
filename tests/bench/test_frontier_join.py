"""bench/frontier_join.py: both ways of joining are timed, agree, and the choice is reported."""

from __future__ import annotations

import json

from bench import frontier_join
from server.services.results import joins_together


def test_the_bench_times_both_ways_and_reports_the_choice(tmp_path) -> None:
    out = tmp_path / "join.json"
    argv = ["--rows", "300", "--new", "2,60", "--repeats", "1", "--json", str(out)]
    assert frontier_join.main(argv) == 0
    runs = json.loads(out.read_text())["runs"]
    assert [r["new"] for r in runs] == [2, 60]
    for run in runs:
        assert run["one_at_a_time_ms"] > 0 and run["together_ms"] > 0
        together = joins_together(run["new"], run["members"])
        assert run["chosen"] == ("together" if together else "one at a time")
    assert [r["chosen"] for r in runs] == ["one at a time", "together"]
