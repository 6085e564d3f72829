"""bench/fleet_start.py small, against the same code as its baseline: every agent of both servers
registers and gets a first job, and each round's figures and their medians are reported."""

from __future__ import annotations

import json
from pathlib import Path

from bench import fleet_start
from bench.proposal_cost import ROOT_PATH


def test_every_agent_registers_and_gets_a_first_job_on_both_servers(tmp_path: Path) -> None:
    out = tmp_path / "start.json"
    argv = ["--agents", "6", "--rounds", "2", "--baseline-pythonpath", ROOT_PATH]
    assert fleet_start.main([*argv, "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    for name in ("this", "baseline"):
        rounds = result["rounds"][name]
        assert len(rounds) == 2
        for round_ in rounds:
            assert round_["agents"] == 6 and round_["failed"] == 0
            first_job, claim = round_["first_job_ms"], round_["claim_ms"]
            # an agent's first job comes after its registration and its claim
            assert first_job["max"] >= claim["max"] > 0
            assert round_["last_answer_ms"] >= first_job["max"] * 0.99
        assert set(result["medians_ms"][name]) == set(fleet_start.FIGURES)
    assert "--agents 6" in result["command"]


def test_an_agent_left_without_a_first_job_fails_the_run(tmp_path: Path, monkeypatch) -> None:
    # 4 searches of one job each for 6 agents: two claims find nothing
    real = fleet_start.Load.search_request

    def one_job(load: fleet_start.Load, index: int) -> dict:
        return {**real(load, index), "budget": {"max_evaluations": 1}}

    monkeypatch.setattr(fleet_start.Load, "search_request", one_job)
    out = tmp_path / "start.json"
    assert fleet_start.main(["--agents", "6", "--rounds", "1", "--json", str(out)]) == 1
    assert json.loads(out.read_text())["rounds"]["this"][0]["failed"] == 2
