"""bench/proposal_cost.py small: a run tells what it was asked to, the same run proposes the
same architectures, and a comparison against the same code finds the same proposals and
scores every run under one normalisation (counts and identities, not timings, asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import proposal_cost
from bench.proposal_cost import ROOT_PATH


def test_a_run_tells_its_results_and_repeats_itself() -> None:
    first = proposal_cost.run_engine(slots=4, seed=0, results=90)
    assert len(first["told"]) == 90 and first["proposed"] >= 90 and first["cpu_s"] > 0
    assert proposal_cost.run_engine(slots=4, seed=0, results=90)["digest"] == first["digest"]
    assert proposal_cost.run_engine(slots=4, seed=1, results=90)["digest"] != first["digest"]


def test_against_the_same_code_the_proposals_and_volumes_agree(tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    argv = ["--slots", "4,45", "--results", "85", "--seeds", "0"]
    argv += ["--baseline-pythonpath", ROOT_PATH, "--json", str(out)]
    assert proposal_cost.main(argv) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [row["slots"] for row in rows] == [4, 45]
    for row in rows:
        assert row["same_proposals"] is True
        assert row["this"]["hypervolume"] == row["baseline"]["hypervolume"]
        assert 0 < row["this"]["hypervolume"][0] < 1
