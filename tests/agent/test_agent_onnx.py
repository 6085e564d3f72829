"""The ONNX Runtime backend with real exports, real ONNX Runtime sessions and fresh processes."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch

from agent import onnx_backend
from agent.in_process import make_inputs
from agent.memory import MIB
from agent.onnx_backend import export_onnx, load_inputs, measure_onnx
from agent.weights import build_fast
from archvocab.registry import get_kind, kind_names, parse_space, set_output
from archvocab.spaces.gpt2.build import build_model
from archvocab.spaces.gpt2.spec import GPT2Spec
from archvocab.wire import MeasurementResult, MeasurementSettings
from tests.factories import TINY_SPACES

SETTINGS = MeasurementSettings(
    runtime="onnxruntime",
    seq_len=16,
    warmup=1,
    warmup_max_s=0.5,
    min_samples=5,
    min_time_s=0,
    max_time_s=0.5,
    timeout_s=120,
)


def tiny(**overrides: Any) -> GPT2Spec:
    """2 layers, d_model 128, 2000 tokens in three adaptive clusters; per-layer heads differ.

    Every table is over 8192 elements, the exporter's constant-folding limit: smaller tied
    tables get folded copies, and the initializers would outgrow the parameters.
    """
    fields: dict[str, Any] = {
        "n_layer": 2,
        "d_model": 128,
        "d_inner": (256, 512),
        "n_head": (2, 4),
        "d_embed": 128,
        "div_val": 1,
        "cutoffs": (200, 1000),
        "vocab_size": 2000,
        "n_positions": 128,
    }
    fields.update(overrides)
    if "n_layer" in overrides:
        fields["d_inner"] = (256,) * fields["n_layer"]
        fields["n_head"] = (2,) * fields["n_layer"]
    return GPT2Spec(**fields)


def parameter_bytes(spec: GPT2Spec) -> int:
    model = build_model(spec)
    return sum(p.numel() * p.element_size() for p in model.parameters())


def measure_in_fresh_process(
    path: Path, spec: GPT2Spec, settings: MeasurementSettings
) -> tuple[MeasurementResult, bool]:
    """measure_onnx in a new interpreter, as the agent runs it; (result, torch was loaded)."""
    script = (
        "import json, sys\n"
        "from agent.onnx_backend import measure_onnx\n"
        "from archvocab.registry import parse_spec\n"
        "from archvocab.wire import MeasurementSettings\n"
        "job = json.loads(sys.stdin.read())\n"
        "result = measure_onnx(job['path'], parse_spec(job['spec']),\n"
        "    MeasurementSettings.model_validate(job['settings']), 1.5)\n"
        "print(json.dumps({'result': result.model_dump(mode='json'),\n"
        "    'torch_loaded': 'torch' in sys.modules}))\n"
    )
    job = {"path": str(path), "spec": spec.to_dict(), "settings": settings.model_dump()}
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return MeasurementResult.model_validate(out["result"]), out["torch_loaded"]


def exported(
    tmp_path: Path,
    spec: GPT2Spec,
    name: str = "model.onnx",
    settings: MeasurementSettings = SETTINGS,
) -> Path:
    path = tmp_path / name
    build_s = export_onnx(spec, settings, str(path))
    assert build_s > 0 and path.is_file()
    return path


@pytest.mark.parametrize(("batch_size", "seq_len"), [(1, 64), (4, 16), (3, 7)])
def test_the_saved_input_is_the_torch_paths_input(
    tmp_path: Path, batch_size: int, seq_len: int
) -> None:
    spec = tiny(cutoffs=())
    settings = SETTINGS.model_copy(update={"batch_size": batch_size, "seq_len": seq_len})
    path = tmp_path / "model.onnx"
    export_onnx(spec, settings, str(path))
    (ours,) = load_inputs(str(path))
    assert ours.dtype == np.int64 and ours.shape == (batch_size, seq_len)
    (theirs,) = make_inputs(spec, settings, torch.device("cpu"))
    np.testing.assert_array_equal(ours, theirs.numpy())


@pytest.mark.parametrize(
    "spec",
    [
        tiny(),  # one table sliced into clusters by the adaptive softmax
        tiny(cutoffs=()),  # plain softmax
        tiny(d_embed=256),  # one table, projected to d_model
        tiny(div_val=2),  # a table and a projection per cluster
        tiny(div_val=4, d_embed=256, cutoffs=(200,)),
    ],
    ids=["div1", "no-cutoffs", "div1-proj", "div2", "div4-wide"],
)
def test_onnx_runtime_output_equals_torch(tmp_path: Path, spec: GPT2Spec) -> None:
    path = exported(tmp_path, spec, settings=SETTINGS.model_copy(update={"output": "all"}))
    model = build_fast(spec, torch.device("cpu"))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (random_tokens,) = load_inputs(str(path))
    input_name = session.get_inputs()[0].name
    # Only the head cluster, and only the last: the other clusters get no tokens at all.
    head_only = np.zeros_like(random_tokens)
    last_only = np.full_like(random_tokens, spec.vocab_size - 1)
    for tokens in (random_tokens, head_only, last_only):
        (ours,) = session.run(None, {input_name: tokens})
        with torch.no_grad():
            expected = model(torch.from_numpy(tokens)).numpy()
        assert ours.shape == (1, SETTINGS.seq_len, spec.vocab_size)
        np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)


def test_measurement_in_a_fresh_process_is_sane_and_loads_no_torch(tmp_path: Path) -> None:
    spec = tiny(div_val=2)
    result, torch_loaded = measure_in_fresh_process(exported(tmp_path, spec), spec, SETTINGS)
    assert not torch_loaded
    lat = result.latency
    assert lat.min_ms <= lat.median_ms <= lat.p90_ms
    assert result.latency_ms == lat.median_ms > 0
    assert lat.samples == len(lat.samples_ms) >= SETTINGS.min_samples
    mem = result.memory
    assert mem.primary == "process_peak"
    assert result.peak_memory_mb == mem.process_peak_mb > 0
    assert mem.weights_mb == pytest.approx(parameter_bytes(spec) / MIB, rel=0.01)
    assert result.build_s == 1.5 and result.load_s > 0 and result.total_s >= result.load_s
    prov = result.provenance
    assert (prov.runtime, prov.runtime_version) == ("onnxruntime", ort.__version__)
    assert prov.torch_version is None and prov.threads == 1 and prov.interop_threads == 1
    assert result.details["providers"] == ["CPUExecutionProvider"]
    assert result.details["opset"] == onnx_backend.OPSET
    assert result.details["n_initializers"] > 0
    assert result.details["external_data"] is False


def test_bigger_model_uses_more_process_memory(tmp_path: Path) -> None:
    small, big = tiny(), tiny(n_layer=4, d_model=256, d_embed=256, vocab_size=8000)
    peaks = {}
    for name, spec in (("small", small), ("big", big)):
        result, _ = measure_in_fresh_process(
            exported(tmp_path, spec, f"{name}.onnx"), spec, SETTINGS
        )
        peaks[name] = result.memory.process_peak_mb
        assert result.memory.weights_mb == pytest.approx(parameter_bytes(spec) / MIB, rel=0.01)
    # Strictly more, by at least half the weights the big model adds.
    extra_mb = (parameter_bytes(big) - parameter_bytes(small)) / MIB
    assert peaks["big"] > peaks["small"] + extra_mb / 2


def test_weights_past_the_limit_go_to_an_external_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(onnx_backend, "EMBEDDED_WEIGHTS_LIMIT", 0)
    spec = tiny(div_val=2)
    path = exported(tmp_path, spec)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["model.onnx", "model.onnx.data", "model.onnx.inputs.npz"]
    assert path.stat().st_size < parameter_bytes(spec) / 4  # the weights are not in the model
    result, _ = measure_in_fresh_process(path, spec, SETTINGS)
    assert result.details["external_data"] is True
    assert result.memory.weights_mb == pytest.approx(parameter_bytes(spec) / MIB, rel=0.01)


def test_torch_runtime_settings_are_refused(tmp_path: Path) -> None:
    settings = SETTINGS.model_copy(update={"runtime": "torch"})
    with pytest.raises(ValueError, match="settings.runtime='onnxruntime'"):
        export_onnx(tiny(), settings, str(tmp_path / "model.onnx"))
    with pytest.raises(ValueError, match="settings.runtime='onnxruntime'"):
        measure_onnx(str(tmp_path / "model.onnx"), tiny(), settings, 0.0)


ORT_KINDS = [n for n in kind_names() if "onnxruntime" in get_kind(n).runtimes]


@pytest.mark.parametrize("output", ["last", "all"])
@pytest.mark.parametrize("kind", ORT_KINDS)
def test_every_kind_that_offers_onnxruntime_exports_what_torch_computes(
    tmp_path: Path, kind: str, output: str
) -> None:
    spec = parse_space(TINY_SPACES[kind]).sample(random.Random(1))
    settings = SETTINGS.model_copy(update={"output": output})
    path = exported(tmp_path, spec, settings=settings)
    inputs = load_inputs(str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [meta.name for meta in session.get_inputs()]
    ours = session.run(None, dict(zip(names, inputs, strict=True)))
    model = build_fast(spec, torch.device("cpu"))
    with torch.inference_mode():
        every = model(*map(torch.from_numpy, inputs))
    every = every if isinstance(every, tuple) else (every,)
    expected = every
    if output == "last" and set_output(model, "all"):  # the scores of the last position
        expected = (every[0][:, -1:], *every[1:])
        assert ours[0].shape[1] == 1
    assert len(ours) == len(expected)
    for got, want in zip(ours, expected):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)
