"""Measuring candidates: the in-process numbers, the child protocol, and typed failures."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import torch

from agent import memory
from agent.child import FAULT_ENV, run_job
from agent.failures import classify_exception
from agent.in_process import latency_stats, measure_spec
from agent.measure import MeasurementCancelled, measure_candidate
from archvocab.errors import InvalidSpec
from archvocab.spec import parse_spec
from archvocab.wire import Failure, MeasurementResult, MeasurementSettings

BIG_SPEC_CHANGES: dict[str, Any] = {
    "n_layer": 4,
    "d_model": 512,
    "d_inner": [2048] * 4,
    "n_head": [8] * 4,
    "d_embed": 512,
    "vocab_size": 10000,
}


def check_sane(result: MeasurementResult, settings: MeasurementSettings) -> None:
    samples = result.latency_samples_ms
    assert len(samples) == settings.repeats == result.details["samples"]
    assert min(samples) <= result.latency_ms <= max(samples)
    assert 0 <= result.latency_iqr_ms <= max(samples) - min(samples)
    assert all(s > 0 for s in samples)
    assert result.build_s > 0
    assert result.weights_mb > 0
    assert result.details["threads"] == settings.threads
    assert result.details["torch_version"] == torch.__version__


# -- pure helpers -----------------------------------------------------------------------------
def test_latency_stats_median_and_iqr() -> None:
    assert latency_stats([5.0, 1.0, 4.0, 2.0, 3.0]) == (3.0, 2.0)
    assert latency_stats([7.0]) == (7.0, 0.0)
    with pytest.raises(ValueError, match="at least one sample"):
        latency_stats([])


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (InvalidSpec("d_model", "must be a positive integer"), "invalid_spec"),
        (MemoryError(), "out_of_memory"),
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "out_of_memory"),
        (
            RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate"),
            "out_of_memory",
        ),
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), "error"),
        (KeyError("settings"), "error"),
    ],
)
def test_classify_exception(exc: BaseException, kind: str) -> None:
    failure = classify_exception(exc)
    assert failure.kind == kind
    assert type(exc).__name__ in failure.message


def test_read_status_kib_parses_proc_status(tmp_path: Any) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmHWM:\t  223820 kB\nVmRSS:\t  1024 kB\n")
    assert memory.read_status_kib("VmHWM", status) == 223820
    assert memory.read_status_kib("VmRSS", status) == 1024
    assert memory.read_status_kib("VmSwap", status) is None
    assert memory.read_status_kib("VmRSS", tmp_path / "missing") is None


# -- in process -------------------------------------------------------------------------------
def test_measure_spec_in_process_gives_sane_numbers(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings
) -> None:
    result = measure_spec(parse_spec(tiny_spec), fast_settings)
    check_sane(result, fast_settings)
    assert result.details["device"] == "cpu"
    assert result.details["seq_len"] == 16
    assert result.details["n_parameters"] > 0


def test_child_protocol_in_process(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings
) -> None:
    outcome = run_job({"spec": tiny_spec, "settings": fast_settings.model_dump()})
    check_sane(MeasurementResult.model_validate(outcome["measurement"]), fast_settings)
    bad = run_job({"spec": {**tiny_spec, "n_head": [3, 2]}, "settings": fast_settings.model_dump()})
    assert bad["failure"]["kind"] == "invalid_spec"
    assert "n_head" in bad["failure"]["message"]


# -- in a child process -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_and_big(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings
) -> tuple[MeasurementResult | Failure, MeasurementResult | Failure]:
    tiny = measure_candidate(tiny_spec, fast_settings)
    big = measure_candidate({**tiny_spec, **BIG_SPEC_CHANGES}, fast_settings)
    return tiny, big


def test_child_measurement_is_sane(tiny_and_big: tuple[Any, Any]) -> None:
    tiny, _ = tiny_and_big
    assert isinstance(tiny, MeasurementResult), tiny
    check_sane(tiny, MeasurementSettings(seq_len=16, warmup=1, repeats=5, timeout_s=120))
    assert tiny.peak_memory_mb > 0
    assert tiny.baseline_memory_mb > 0
    assert tiny.memory_method.startswith(("rss_hwm", "ru_maxrss"))


def test_bigger_model_uses_more_memory(tiny_and_big: tuple[Any, Any]) -> None:
    tiny, big = tiny_and_big
    assert isinstance(big, MeasurementResult), big
    assert big.weights_mb > 50 * tiny.weights_mb
    # the high-water mark must at least hold the weights, and dwarf the tiny model's
    assert big.peak_memory_mb >= big.weights_mb
    assert big.peak_memory_mb > tiny.peak_memory_mb + 40


def test_invalid_spec_is_rejected_before_spawning(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a child would hang: a quick answer proves none was started
    monkeypatch.setenv(FAULT_ENV, "hang")
    started = time.monotonic()
    failure = measure_candidate({**tiny_spec, "n_head": [3, 2]}, fast_settings)
    assert failure == Failure(kind="invalid_spec", message=failure.message)
    assert "n_head" in failure.message and "divide d_model=64" in failure.message
    unknown = measure_candidate({**tiny_spec, "activation": "relu"}, fast_settings)
    assert unknown.kind == "invalid_spec" and "activation" in unknown.message
    too_long = measure_candidate(tiny_spec, fast_settings.model_copy(update={"seq_len": 65}))
    assert too_long.kind == "invalid_spec" and "settings.seq_len" in too_long.message
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    ("fault", "kind", "text"),
    [
        ("oom", "out_of_memory", "MemoryError"),
        ("oom_kill", "out_of_memory", "SIGKILL"),
        ("crash", "error", "status 70"),
        ("error", "error", "RuntimeError: injected"),
    ],
)
def test_child_faults_become_typed_failures(
    fault: str,
    kind: str,
    text: str,
    tiny_spec: dict[str, Any],
    fast_settings: MeasurementSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(FAULT_ENV, fault)
    failure = measure_candidate(tiny_spec, fast_settings)
    assert isinstance(failure, Failure)
    assert failure.kind == kind
    assert text in failure.message


def test_hanging_child_is_killed_at_the_timeout(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAULT_ENV, "hang")
    started = time.monotonic()
    failure = measure_candidate(tiny_spec, fast_settings.model_copy(update={"timeout_s": 1.5}))
    elapsed = time.monotonic() - started
    assert failure == Failure(kind="timeout", message="no result within timeout_s=1.5; killed")
    assert 1.5 <= elapsed < 5


def test_cancel_kills_the_child(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAULT_ENV, "hang")
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(MeasurementCancelled):
        measure_candidate(tiny_spec, fast_settings, cancel=cancel)
    assert time.monotonic() - started < 3


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_measurement(tiny_spec: dict[str, Any], fast_settings: MeasurementSettings) -> None:
    settings = fast_settings.model_copy(update={"device": "cuda"})
    result = measure_candidate(tiny_spec, settings)
    assert isinstance(result, MeasurementResult), result
    check_sane(result, settings)
    assert result.memory_method == "cuda_max_memory_allocated"
    assert result.peak_memory_mb >= result.weights_mb
    assert result.details["device_name"] == torch.cuda.get_device_name(0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_cuda_job_without_cuda_is_an_error(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings
) -> None:
    outcome = run_job(
        {"spec": tiny_spec, "settings": {**fast_settings.model_dump(), "device": "cuda"}}
    )
    assert outcome["failure"]["kind"] == "error"
    assert "no usable CUDA device" in outcome["failure"]["message"]
