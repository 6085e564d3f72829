"""What the measuring process times and where it reads memory: the output mode (the last
position's scores, or every position's), the memory pass before the heap is pinned, and LTS's
own configurations at LTS's own sequence length."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from agent.in_process import _QUICK_PROTOCOL, MEMORY_PASS_ENV, MEMORY_RUNS, measure_spec
from agent.memory import FIXED_HEAP, STEADY_HEAP, keep_heap
from archvocab.registry import parse_space, parse_spec
from archvocab.spaces.gpt2.spec import GPT2Spec
from archvocab.spaces.transxl.spec import TransXLSpec
from archvocab.wire import MeasurementSettings
from hwnas.ground_truth import ground_truth_dir
from tests.factories import TINY_SPACES

LTS_DIR = ground_truth_dir() / "lts"
QUICK = MeasurementSettings(seq_len=16, **_QUICK_PROTOCOL)


@pytest.mark.parametrize("output", ["last", "all"])
def test_the_output_mode_decides_what_the_timed_forward_returns(
    tiny_spec: dict[str, Any], output: str
) -> None:
    settings = QUICK.model_copy(update={"output": output})
    result = measure_spec(parse_spec(tiny_spec), settings)
    positions = 1 if output == "last" else settings.seq_len
    assert result.details["output"] == output
    assert result.details["output_shape"] == [1, positions, tiny_spec["vocab_size"]]


def test_an_encoder_is_timed_with_every_positions_hidden_state() -> None:
    spec = parse_space(TINY_SPACES["flexibert"]).sample(random.Random(0))
    result = measure_spec(spec, QUICK)
    assert result.details["output"] == "hidden states (no vocabulary output)"
    assert result.details["output_shape"][:2] == [1, QUICK.seq_len]


def test_memory_is_read_in_its_own_pass_then_the_heap_is_pinned_for_timing(
    tiny_spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MEMORY_PASS_ENV, raising=False)
    result = measure_spec(parse_spec(tiny_spec), QUICK)
    assert result.details["memory_pass"].startswith(f"own pass before timing ({FIXED_HEAP})")
    assert f"{MEMORY_RUNS} forward passes" in result.details["memory_pass"]
    assert result.details["heap"] == keep_heap() == STEADY_HEAP  # what the timing ran under
    assert result.peak_memory_mb > 0


def test_the_old_order_is_there_for_the_benchmark(
    tiny_spec: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MEMORY_PASS_ENV, "after_latency")
    result = measure_spec(parse_spec(tiny_spec), QUICK)
    assert result.details["memory_pass"].startswith("after the latency protocol")
    assert result.peak_memory_mb > 0


def _smallest_lts(name: str, parse: Any) -> Any:
    path = LTS_DIR / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"shared LTS log {path} not found ($HWNAS_GROUND_TRUTH/lts)")
    specs = [parse(m["config"]) for m in json.loads(path.read_text())["models"]]
    return min(specs, key=lambda s: s.total_params())


@pytest.mark.parametrize(
    ("name", "parse"),
    [
        ("random_GPT2_wt103", GPT2Spec.from_lts_config),
        ("random_TransXL_wt103", TransXLSpec.from_lts_config),
    ],
)
def test_an_lts_config_is_measured_at_lts_sequence_length_as_it_comes(
    name: str, parse: Any
) -> None:
    spec = _smallest_lts(name, parse)
    assert spec.max_seq_len == 192  # LTS's tgt_len: no widening by hand
    settings = MeasurementSettings(seq_len=192, **_QUICK_PROTOCOL)
    result = measure_spec(spec, settings)
    assert result.details["output_shape"] == [1, 1, spec.vocab_size]
    assert result.latency_ms > 0 and result.peak_memory_mb > 0
