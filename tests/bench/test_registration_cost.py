"""bench/registration_cost.py small, against the same code as its baseline: both servers
register every agent, and the report has a figure per round and their ratio."""

from __future__ import annotations

import json
from pathlib import Path

from bench import registration_cost
from bench.proposal_cost import ROOT_PATH


def test_both_servers_register_and_the_rounds_are_reported(tmp_path: Path) -> None:
    out = tmp_path / "reg.json"
    argv = ["--rounds", "2", "--per-round", "5", "--baseline-pythonpath", ROOT_PATH]
    assert registration_cost.main([*argv, "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    for name in ("this", "baseline"):
        figures = result["cpu_ms_per_registration"][name]
        assert len(figures["rounds"]) == 2 and all(ms > 0 for ms in figures["rounds"])
    assert result["median_ratio"] > 0 and "--per-round 5" in result["command"]
