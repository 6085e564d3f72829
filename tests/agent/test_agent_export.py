"""`agent.export`: the user's ONNX file has named inputs and outputs and dynamic batch and
sequence axes, and ONNX Runtime computes what the torch model computes at every shape."""

from __future__ import annotations

import random

import pytest

np = pytest.importorskip("numpy")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch", reason="the exporter needs torch")
pytest.importorskip("onnxscript", reason="torch's dynamo exporter needs onnxscript")

from agent import export  # noqa: E402
from agent.in_process import build_for  # noqa: E402
from archvocab.registry import ArchSpec, kind_names, parse_space  # noqa: E402
from archvocab.wire import MeasurementSettings  # noqa: E402
from tests.factories import TINY_SPACES  # noqa: E402

# (batch, sequence) pairs each graph is run at: two batch sizes, two lengths, none traced.
SHAPES = [(1, 16), (3, 32)]
TRACED = (2, 24)


def reference(spec: ArchSpec, inputs: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    """What the torch model the export starts from returns for `inputs`."""
    settings = MeasurementSettings(runtime="onnxruntime", output="all")
    model, _ = build_for(spec, settings, torch.device("cpu"))
    with torch.no_grad():
        out = model(*inputs)
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.slow
@pytest.mark.parametrize("kind", kind_names())
def test_onnx_runs_at_other_batch_sizes_and_lengths_as_torch_does(kind, tmp_path):
    spec = parse_space(TINY_SPACES[kind]).sample(random.Random(3))
    path = tmp_path / "model.onnx"
    export.export(spec, path, batch_size=TRACED[0], seq_len=TRACED[1])

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inputs, outputs = export.io_names(spec)
    assert [i.name for i in session.get_inputs()] == inputs
    assert [o.name for o in session.get_outputs()] == outputs
    recurrent = kind == "nasbench_nlp"  # unrolled over its steps: only the batch is dynamic
    tokens_shape = session.get_inputs()[0].shape
    assert isinstance(tokens_shape[0], str)
    assert isinstance(tokens_shape[1], str) != recurrent

    generator = torch.Generator().manual_seed(1)
    for batch, length in SHAPES:
        length = TRACED[1] if recurrent else length
        tokens = torch.randint(
            0, spec.to_dict()["vocab_size"], (batch, length), generator=generator
        )
        feed: tuple[torch.Tensor, ...] = (tokens,)
        if recurrent:
            n_states, _, width = session.get_inputs()[1].shape  # (n_states, "batch", width)
            feed = (tokens, torch.randn(n_states, batch, width, generator=generator) * 0.1)
        got = session.run(None, {name: t.numpy() for name, t in zip(inputs, feed)})
        for ours, theirs in zip(got, reference(spec, feed), strict=True):
            assert ours.shape == theirs.shape
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def test_a_graph_is_named_for_what_its_kind_returns():
    names = {
        kind: export.io_names(parse_space(TINY_SPACES[kind]).sample(random.Random(0)))
        for kind in kind_names()
    }
    assert names == {
        "gpt2": (["input_ids"], ["log_probs"]),
        "transxl": (["input_ids"], ["log_probs"]),
        "flexibert": (["input_ids"], ["hidden_states"]),
        "nasbench_nlp": (["input_ids", "states"], ["log_probs", "next_states"]),
    }
