"""The ONNX Runtime backend: export a candidate with torch, measure it with ONNX Runtime (CPU).

Two steps, each run by the agent in its own fresh process: `export_onnx` builds the torch
model and writes an .onnx file; `measure_onnx` loads that file into an InferenceSession and
times it with the shared latency protocol. The measuring process never imports torch, so its
memory high-water mark is ONNX Runtime's alone (torch is imported lazily by the export).

Exporter: torch's torch.export-based exporter (``dynamo=True``, needs onnx + onnxscript); the
TorchScript exporter is deprecated, and tracing would freeze data-dependent branches.
"""

from __future__ import annotations

import time
import warnings
from types import MethodType
from typing import TYPE_CHECKING, Any

import numpy as np

from agent.latency_protocol import TimeRuns, run_protocol
from agent.memory import MIB, MemoryProbe, fixed_heap, keep_heap, release_free_heap
from agent.provenance import build_provenance, snapshot
from archvocab.registry import ArchSpec
from archvocab.wire import MeasurementResult, MeasurementSettings, MemoryReport

if TYPE_CHECKING:
    import torch

INPUT_SEED = 0  # = agent.in_process.INPUT_SEED: both runtimes time the same input (saved by export)
OPSET = 20  # pinned so a torch upgrade does not silently change the graph; ORT >= 1.17 runs it
# Protobuf cannot serialise a message over 2 GiB; above this the weights go to an external
# data file next to the model (same folder, which the caller removes).
EMBEDDED_WEIGHTS_LIMIT = 1536 * MIB
MEMORY_RUNS = 3  # = agent.in_process.MEMORY_RUNS (this module must not import torch)
_GRAPH_OPTIMIZATION = "ORT_ENABLE_ALL"
_PROVIDERS = ["CPUExecutionProvider"]


def inputs_path(model_path: str) -> str:
    """Where the export step leaves the measurement input for the timing step."""
    return model_path + ".inputs.npz"


def load_inputs(model_path: str) -> list[np.ndarray]:
    """The export step's measurement input, in the model's input order."""
    with np.load(inputs_path(model_path)) as saved:
        return [saved[f"input_{i}"] for i in range(len(saved.files))]


def export_onnx(spec: ArchSpec, settings: MeasurementSettings, path: str) -> float:
    """Build `spec` as the torch path does (`agent.in_process.build_for`: seeded, eval mode,
    the settings' output mode) and export it to `path` for the settings' (batch_size,
    seq_len) input, which is saved beside it (`inputs_path`): the kind's own input
    (`agent.in_process.make_inputs`), value for value the torch path's.

    Returns the build + export seconds.

    Weights are stored in `path`, or beyond EMBEDDED_WEIGHTS_LIMIT in ``path + ".data"``.
    """
    _check_runtime(settings)
    import torch  # here, not at the top: the measuring process must not load torch

    from agent.in_process import build_for, make_inputs

    start = time.perf_counter()
    # The torch path's model, value for value, with the settings' output mode.
    model, _ = build_for(spec, settings, torch.device("cpu"))
    make_exportable(model)  # the model is ours and thrown away after
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    inputs = make_inputs(spec, settings, torch.device("cpu"))
    names = [f"input_{i}" for i in range(len(inputs))]
    np.savez(inputs_path(path), **{n: t.numpy() for n, t in zip(names, inputs)})
    with warnings.catch_warnings(), torch.no_grad():
        # torch 2.13's exporter trips its own pytree deprecation; nothing we can change.
        warnings.filterwarnings(
            "ignore", message=r"`isinstance\(treespec, LeafSpec\)`", category=FutureWarning
        )
        torch.onnx.export(
            model,
            inputs,
            path,
            dynamo=True,
            opset_version=OPSET,
            input_names=names,
            external_data=weight_bytes > EMBEDDED_WEIGHTS_LIMIT,
            verbose=False,
        )
    return time.perf_counter() - start


def make_exportable(model: torch.nn.Module) -> None:
    """Give the modules torch.export cannot trace as they are a forward it can, in place: the
    same values (`_adaptive_embedding_for_export`)."""
    from archvocab.spaces.gpt2.build import AdaptiveEmbedding

    for module in model.modules():
        if isinstance(module, AdaptiveEmbedding):
            module.forward = MethodType(_adaptive_embedding_for_export, module)


def _adaptive_embedding_for_export(self: Any, tokens: torch.Tensor) -> torch.Tensor:
    """`AdaptiveEmbedding.forward` without its ``if index.numel():`` shortcut.

    torch.export cannot branch on a data-dependent size; gathering and copying an empty
    cluster is a no-op, so the result is the same (tests compare ORT with torch).
    """
    from torch.nn import functional as F

    if len(self.layers) == 1:  # no data-dependent branch on this path
        return type(self).forward(self, tokens)
    flat = tokens.reshape(-1)
    out = flat.new_zeros(flat.numel(), self.d_model, dtype=self.projs[0].dtype)
    for i, (lo, hi) in enumerate(zip(self.bounds, self.bounds[1:])):
        index = ((flat >= lo) & (flat < hi)).nonzero().squeeze(1)
        out = out.index_copy(0, index, F.linear(self.layers[i](flat[index] - lo), self.projs[i]))
    return out.view(*tokens.shape, self.d_model) * self.scale


def measure_onnx(
    path: str, spec: ArchSpec, settings: MeasurementSettings, build_s: float
) -> MeasurementResult:
    """Load the model at `path` into ONNX Runtime (CPU) and measure latency and peak memory.

    Memory is the process's RSS high-water mark above a baseline taken just before the
    session is created (`agent.memory`), so it includes ONNX Runtime's loading of the file.
    weights_mb is the initializers' bytes: the parameters, give or take what the exporter's
    constant folding copied or trimmed (tensors under 8192 elements only). `build_s` is what
    `export_onnx` returned.

    Models over EMBEDDED_WEIGHTS_LIMIT keep their weights in an external file, which ONNX
    Runtime memory-maps rather than copies: their peak reads lower than the same model's
    embedded would (8 x 512 GPT-2: 358 vs 503 MiB), so `details["external_data"]` says which.
    """
    started = time.perf_counter()
    _check_runtime(settings)
    import onnxruntime as ort

    # As the torch path (agent.in_process): memory in its own pass under fixed_heap, then
    # keep_heap for the timing (ORT's arena aside, its output buffers use malloc).
    memory_heap = fixed_heap()
    session, probe, load_s = _open_session(ort, path, settings)
    time_runs = _timer(session, load_inputs(path))
    time_runs(MEMORY_RUNS)
    peak_mb = probe.peak_above_baseline_bytes() / MIB
    heap = keep_heap()
    before = snapshot()
    latency = run_protocol(time_runs, settings)
    after = snapshot()
    graph = _graph_facts(path)  # after the peak is read: it parses the whole file
    memory = MemoryReport(
        primary="process_peak",
        process_peak_mb=peak_mb,
        process_method=probe.method,
        process_baseline_mb=probe.baseline_bytes / MIB,
        weights_mb=graph.pop("initializer_bytes") / MIB,
    )
    provenance = build_provenance(
        runtime="onnxruntime",
        runtime_version=ort.__version__,
        threads=settings.threads,
        interop_threads=1,
        before=before,
        after=after,
    )
    return MeasurementResult(
        latency_ms=latency.median_ms,
        peak_memory_mb=peak_mb,
        latency=latency,
        memory=memory,
        build_s=build_s,
        load_s=load_s,
        total_s=time.perf_counter() - started,
        provenance=provenance,
        details={
            "providers": session.get_providers(),
            "graph_optimization_level": _GRAPH_OPTIMIZATION,
            "execution_mode": "ORT_SEQUENTIAL",
            "input_seed": INPUT_SEED,
            "heap": heap,
            "memory_pass": f"own pass before timing ({memory_heap}): session + {MEMORY_RUNS} runs",
            **graph,
        },
    )


def _open_session(
    ort: Any, path: str, settings: MeasurementSettings
) -> tuple[Any, MemoryProbe, float]:
    """(session, memory probe started just before it, seconds the session took to create)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = settings.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _GRAPH_OPTIMIZATION)
    _warm_up_runtime(ort, options)
    release_free_heap()  # what the warm-up freed must not be silently reused by the model
    probe = MemoryProbe.start()
    start = time.perf_counter()
    session = ort.InferenceSession(path, sess_options=options, providers=_PROVIDERS)
    return session, probe, time.perf_counter() - start


def _timer(session: Any, inputs: list[np.ndarray]) -> TimeRuns:
    # IO binding keeps the per-run conversion of the outputs to numpy out of the timing (the
    # torch path has none); ORT still allocates the outputs on every run, as torch does.
    binding = session.io_binding()
    for meta, value in zip(session.get_inputs(), inputs, strict=True):
        binding.bind_cpu_input(meta.name, value)
    for meta in session.get_outputs():
        binding.bind_output(meta.name, "cpu")

    def time_runs(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            session.run_with_iobinding(binding)
        return time.perf_counter() - start

    return time_runs


def _check_runtime(settings: MeasurementSettings) -> None:
    if settings.runtime != "onnxruntime":  # a result is cached under its settings' runtime
        raise ValueError(
            f"the ONNX Runtime backend needs settings.runtime='onnxruntime', "
            f"got {settings.runtime!r}"
        )


def _warm_up_runtime(ort: Any, options: Any) -> None:
    """Run a throwaway one-MatMul session, so that ONNX Runtime's one-off setup (about 10 MiB
    on the first session) is not charged to the candidate, as the torch path does."""
    from onnx import TensorProto, helper

    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "warm_up",
        [value("x", TensorProto.FLOAT, [1, 2])],
        [value("y", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1.0, 0.0, 0.0, 1.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=9)
    session = ort.InferenceSession(
        model.SerializeToString(), sess_options=options, providers=_PROVIDERS
    )
    session.run(None, {"x": np.ones((1, 2), dtype=np.float32)})


def _graph_facts(path: str) -> dict[str, Any]:
    """Opset, initializer count and the initializers' tensor bytes (not the file size)."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    sizes = [
        int(np.prod(init.dims, dtype=np.int64))
        * onnx.helper.tensor_dtype_to_np_dtype(init.data_type).itemsize
        for init in model.graph.initializer
    ]
    return {
        "opset": next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
        "n_initializers": len(sizes),
        "initializer_bytes": sum(sizes),
        "external_data": any(init.external_data for init in model.graph.initializer),
    }
