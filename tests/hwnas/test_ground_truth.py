"""hwnas.ground_truth: the one setting that says where the published data lives."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwnas.ground_truth import (
    DEFAULT_DIR,
    GROUND_TRUTH_ENV,
    GroundTruthMissing,
    ground_truth_dir,
    require_ground_truth,
)


def test_the_default_is_the_shared_data_beside_the_checkout() -> None:
    checkout = Path(__file__).resolve().parents[2]
    assert ground_truth_dir({}) == DEFAULT_DIR == checkout.parent / "shared" / "data"


def test_the_setting_names_another_folder(tmp_path: Path) -> None:
    (tmp_path / "lts").mkdir()
    (tmp_path / "lts" / "x.json").write_text("{}")
    environ = {GROUND_TRUTH_ENV: str(tmp_path)}
    assert ground_truth_dir(environ) == tmp_path
    assert require_ground_truth("lts", "x.json", environ=environ) == tmp_path / "lts" / "x.json"


def test_missing_data_names_the_setting_and_the_path(tmp_path: Path) -> None:
    environ = {GROUND_TRUTH_ENV: str(tmp_path)}
    with pytest.raises(GroundTruthMissing) as info:
        require_ground_truth("lts", "nope.json", environ=environ)
    message = str(info.value)
    assert GROUND_TRUTH_ENV in message and str(tmp_path / "lts" / "nope.json") in message
    assert isinstance(info.value, FileNotFoundError)
