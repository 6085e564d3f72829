"""ONNX Runtime jobs through `measure_candidate`: export in one fresh process, time in another
that never loads torch, under one deadline, leaving no files behind."""

from __future__ import annotations

import importlib.util
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from agent.child import FAULT_ENV
from agent.measure import measure_candidate
from archvocab.wire import Failure, MeasurementResult, MeasurementSettings

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None
    or importlib.util.find_spec("agent.onnx_backend") is None,
    reason="needs onnxruntime and agent.onnx_backend",
)


@pytest.fixture
def ort_settings(fast_settings: MeasurementSettings) -> MeasurementSettings:
    return fast_settings.model_copy(update={"runtime": "onnxruntime"})


def ours(tmp: Path) -> list[str]:
    """What the agent left in `tmp` (multiprocessing's own pymp-* directory aside)."""
    return [p.name for p in tmp.iterdir() if not p.name.startswith("pymp-")]


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The agent's temporary files go here, so the test can see what is left."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_onnx_job_is_measured_without_torch_and_cleans_up(
    tiny_spec: dict[str, Any], ort_settings: MeasurementSettings, private_tmp: Path
) -> None:
    result = measure_candidate(tiny_spec, ort_settings)
    assert isinstance(result, MeasurementResult), result
    assert result.provenance.runtime == "onnxruntime" and result.provenance.torch_version is None
    assert result.details["torch_loaded"] is False  # ORT's memory peak holds no torch copy
    assert result.build_s > 0 and result.load_s > 0  # the export, then the session
    lat = result.latency
    assert lat.samples == len(lat.samples_ms) >= ort_settings.min_samples
    assert lat.ci_low_ms <= result.latency_ms <= lat.ci_high_ms
    assert result.memory.primary == "process_peak" and result.peak_memory_mb > 0
    assert ours(private_tmp) == []  # the exported model went with its temp dir


def test_a_failing_export_is_a_typed_failure_and_cleans_up(
    tiny_spec: dict[str, Any],
    ort_settings: MeasurementSettings,
    private_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(FAULT_ENV, "oom")
    failure = measure_candidate(tiny_spec, ort_settings)
    assert isinstance(failure, Failure) and failure.kind == "out_of_memory"
    assert ours(private_tmp) == []


def test_one_timeout_covers_both_processes(
    tiny_spec: dict[str, Any],
    ort_settings: MeasurementSettings,
    private_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(FAULT_ENV, "hang")  # the export hangs
    settings = ort_settings.model_copy(update={"timeout_s": 1.5})
    started = time.monotonic()
    failure = measure_candidate(tiny_spec, settings)
    assert failure == Failure(kind="timeout", message="no result within timeout_s=1.5; killed")
    assert time.monotonic() - started < 5
    assert ours(private_tmp) == []


def test_invalid_spec_is_rejected_before_exporting(
    tiny_spec: dict[str, Any], ort_settings: MeasurementSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAULT_ENV, "hang")
    failure = measure_candidate({**tiny_spec, "n_head": [3, 2]}, ort_settings)
    assert isinstance(failure, Failure) and failure.kind == "invalid_spec"
