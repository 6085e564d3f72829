"""Measure one candidate in this process with eager PyTorch: build it, time it, read memory.

Pure functions: values in, values out, no HTTP. The agent runs `measure_spec` in a fresh
process per candidate (`agent.child`, forked from a server that has torch loaded) so that the
CPU memory high-water mark is this candidate's alone; called elsewhere it still works, but the
CPU peak can under-read because memory freed by earlier work is reused without raising RSS.

Order matters: a throwaway forward of a tiny model of the same family first (so the runtime's
one-off initialisation - lazily loaded kernels, allocator pools, the thread pool - lands in
the memory baseline, not in the candidate's peak), then the memory pass (the baseline, the
build, MEMORY_RUNS forward passes, the peak), and only then the latency pass: `keep_heap()`
and the latency protocol (`agent.latency_protocol`) on the same model.

Why two passes: `keep_heap` (no mmap, no trim) keeps the latency steady, but under it the
peak RSS depends on how the heap happens to fragment: one GPT-2 read 233 or 270 MB in fresh
processes. Memory is read first, under `fixed_heap` (glibc's default thresholds with the
sliding mmap threshold turned off: every large tensor a mapping of its own), where the peak
repeats between fresh processes (bench/memory_repeat.py); then the heap is pinned for timing.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any

import torch

from agent import nvml, provenance
from agent.latency_protocol import TimeRuns, run_protocol
from agent.memory import (
    MIB,
    MemoryProbe,
    fixed_heap,
    keep_heap,
    process_report,
    release_free_heap,
)
from agent.weights import WEIGHT_SEED, build_fast
from archvocab.registry import ArchSpec, kind_of_spec, set_output
from archvocab.wire import MeasurementResult, MeasurementSettings, MemoryReport, Provenance

INPUT_SEED = 0  # the input batch is the same for every candidate of a given shape
# Forward passes of the memory pass: the first allocates every activation, the later ones
# show whether freed buffers come back (they should: a steady peak).
MEMORY_RUNS = 3
# Benchmark switch (bench/memory_repeat.py), read by the measuring process: "after_latency"
# reads memory after the latency protocol under keep_heap, as before the separate pass.
MEMORY_PASS_ENV = "HWNAS_MEMORY_PASS"
# Enough of the protocol to go through every code path once, in a few milliseconds.
_QUICK_PROTOCOL = {
    "warmup": 6,
    "warmup_min_s": 0.0,
    "warmup_max_s": 0.05,
    "min_samples": 3,
    "max_samples": 12,
    "min_time_s": 0.0,
    "max_time_s": 0.05,
    "min_sample_ms": 0.0,
}


def parameter_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's distinct parameters (tied tensors counted once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def make_inputs(
    spec: ArchSpec, settings: MeasurementSettings, device: torch.device
) -> tuple[torch.Tensor, ...]:
    """The space kind's measurement input for (batch_size, seq_len), from a seeded generator."""
    generator = torch.Generator().manual_seed(INPUT_SEED)
    builder = kind_of_spec(spec).load_builder()
    inputs = builder.example_inputs(spec, settings.batch_size, settings.seq_len, generator)
    return tuple(t.to(device) for t in inputs)


def make_tokens(
    vocab_size: int, settings: MeasurementSettings, device: torch.device
) -> torch.Tensor:
    """A random (batch_size, seq_len) token batch drawn from a seeded generator (GPT-2's input;
    the ONNX Runtime path reproduces it without torch)."""
    generator = torch.Generator().manual_seed(INPUT_SEED)
    shape = (settings.batch_size, settings.seq_len)
    return torch.randint(0, vocab_size, shape, generator=generator).to(device)


def build_for(
    spec: ArchSpec, settings: MeasurementSettings, device: torch.device
) -> tuple[torch.nn.Module, str]:
    """The model the settings measure (`build_fast`) with the settings' output mode; and what
    its forward returns, for the details. The one place the output mode is applied: the
    torch path and the ONNX export both build through here."""
    model = build_fast(spec, device)
    if set_output(model, settings.output):
        return model, settings.output
    return model, "hidden states (no vocabulary output)"


def device_for(settings: MeasurementSettings) -> torch.device:
    if settings.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "the job asks for device 'cuda' but this agent has no usable CUDA device"
        )
    return torch.device(settings.device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- runtime initialisation -------------------------------------------------------------------
def primer_spec(spec: ArchSpec, seq_len: int) -> ArchSpec:
    """A tiny spec of `spec`'s kind taking the same code paths (the kind's builder says)."""
    return kind_of_spec(spec).load_builder().primer_spec(spec, seq_len)


def prime_runtime(spec: ArchSpec, settings: MeasurementSettings, device: torch.device) -> None:
    """Run the whole harness once on a throwaway tiny model, before the memory baseline.

    Without it every CPU candidate reads about 13 MB too much: the first forward pass loads
    kernels, grows allocator pools and starts the thread pool, and the protocol's first
    statistics load numpy code, whatever the candidate's size.
    """
    primer = primer_spec(spec, settings.seq_len)
    model, _ = build_for(primer, settings, device)
    inputs = make_inputs(primer, settings, device)
    quick = settings.model_copy(update=_QUICK_PROTOCOL)
    with torch.inference_mode():
        provenance.snapshot()
        run_protocol(make_timer(model, inputs), quick)
    _sync(device)
    del model, inputs
    gc.collect()


# -- memory -----------------------------------------------------------------------------------
class MemoryWatch:
    """Baselines taken just before the build; `report` reads the peaks above them."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        gc.collect()
        if self.cuda:
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
            self.allocated0 = torch.cuda.memory_allocated(device)
            self.reserved0 = torch.cuda.memory_reserved(device)
        release_free_heap()
        self.probe = MemoryProbe.start()

    def report(self, weights_bytes: int) -> MemoryReport:
        cpu = process_report(self.probe, weights_bytes)
        if not self.cuda:
            return cpu
        _sync(self.device)
        allocated = torch.cuda.max_memory_allocated(self.device) - self.allocated0
        reserved = torch.cuda.max_memory_reserved(self.device) - self.reserved0
        return cpu.model_copy(
            update={
                "primary": "cuda_allocated_peak",
                "cuda_allocated_peak_mb": max(0, allocated) / MIB,
                "cuda_reserved_peak_mb": max(0, reserved) / MIB,
            }
        )


def primary_value(memory: MemoryReport) -> float:
    """The value of the memory kind chosen as the objective."""
    value = getattr(memory, f"{memory.primary}_mb")
    return 0.0 if value is None else float(value)


# -- latency ----------------------------------------------------------------------------------
def make_timer(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> TimeRuns:
    """`n` back-to-back forward passes; seconds. CUDA: events around the queued work."""
    device = inputs[0].device
    if device.type != "cuda":

        def time_cpu(n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                model(*inputs)
            return time.perf_counter() - start

        return time_cpu

    def time_cuda(n: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)  # nothing earlier queued inside the window
        start.record()
        for _ in range(n):
            model(*inputs)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0

    return time_cuda


# -- provenance -------------------------------------------------------------------------------
def torch_build() -> str:
    """A short description of this torch build: commit, CUDA, parallel backend, oneDNN."""
    parts = [f"git {(torch.version.git_version or 'unknown')[:10]}"]
    parts.append(f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU build")
    for line in torch.__config__.parallel_info().splitlines():
        if line.startswith("ATen parallel backend"):
            parts.append(line.strip())
    parts.append(f"mkldnn {'on' if torch.backends.mkldnn.is_available() else 'off'}")
    return ", ".join(parts)


def gpu_watch(device: torch.device) -> nvml.GpuWatch | None:
    """NVML readings of the CUDA device, where pynvml can read them (None on the CPU)."""
    if device.type != "cuda":
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    return nvml.GpuWatch(str(uuid) if uuid is not None else None, index)


def _provenance(
    settings: MeasurementSettings,
    device: torch.device,
    before: provenance.Snapshot,
    after: provenance.Snapshot,
    gpu: nvml.GpuWatch | None,
) -> Provenance:
    cuda = device.type == "cuda"
    return provenance.build_provenance(
        runtime="torch",
        runtime_version=torch.__version__,
        threads=torch.get_num_threads(),
        interop_threads=torch.get_num_interop_threads(),
        before=before,
        after=after,
        torch_version=torch.__version__,
        torch_build=torch_build(),
        accelerator=torch.cuda.get_device_name(device) if cuda else None,
        accelerator_driver=provenance.nvidia_driver() if cuda else None,
        cuda_version=torch.version.cuda if cuda else None,
        accelerator_reasons=gpu.busy_reasons() if gpu is not None else (),
    )


def _details(
    model: torch.nn.Module, settings: MeasurementSettings, device: torch.device
) -> dict[str, Any]:
    return {
        "device": str(device),
        "batch_size": settings.batch_size,
        "seq_len": settings.seq_len,
        "input_seed": INPUT_SEED,
        "weight_seed": WEIGHT_SEED,
        "weights": "tiled draws of each tensor's init distribution (agent.weights)",
        "n_parameters": sum(p.numel() for p in model.parameters()),
    }


# -- the measurement ---------------------------------------------------------------------------
def _forward_passes(
    model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], runs: int
) -> list[int]:
    """Run the model `runs` times; the shape of its scores (for the details)."""
    with torch.inference_mode():
        for _ in range(runs):
            out = model(*inputs)
    _sync(inputs[0].device)
    scores = out[0] if isinstance(out, (tuple, list)) else out  # recurrent: (scores, state)
    return list(scores.shape)


def _memory_pass_kind() -> str:
    kind = os.environ.get(MEMORY_PASS_ENV, "separate")
    return kind if kind in ("separate", "after_latency") else "separate"


def measure_spec(
    spec: ArchSpec, settings: MeasurementSettings, *, started: float | None = None
) -> MeasurementResult:
    """Build `spec` and measure its latency and peak memory as `settings` says.

    `started`: perf_counter() when the measuring process began the job (for total_s).
    """
    started = time.perf_counter() if started is None else started
    device = device_for(settings)
    torch.set_num_threads(settings.threads)
    gpu = gpu_watch(device)
    if gpu is not None:
        gpu.take("start", own_context=False)  # before our own kernels: other work's load
    separate = _memory_pass_kind() == "separate"
    heap = fixed_heap() if separate else keep_heap()
    memory_heap = heap
    prime_runtime(spec, settings, device)
    watch = MemoryWatch(device)
    build_start = time.perf_counter()
    model, output = build_for(spec, settings, device)
    _sync(device)
    build_s = time.perf_counter() - build_start
    inputs = make_inputs(spec, settings, device)
    output_shape = _forward_passes(model, inputs, MEMORY_RUNS)
    memory = watch.report(parameter_bytes(model)) if separate else None
    if separate:  # pinned for the latency pass only (see the module's docstring)
        heap = keep_heap()
    if gpu is not None:
        gpu.take("before")
    with torch.inference_mode():
        before = provenance.snapshot()
        stats = run_protocol(make_timer(model, inputs), settings)
        after = provenance.snapshot()
    if gpu is not None:
        gpu.take("after")
    if memory is None:
        memory = watch.report(parameter_bytes(model))
    return MeasurementResult(
        latency_ms=stats.median_ms,
        peak_memory_mb=primary_value(memory),
        latency=stats,
        memory=memory,
        build_s=build_s,
        load_s=0.0,
        provenance=_provenance(settings, device, before, after, gpu),
        details={
            **_details(model, settings, device),
            **({"gpu": gpu.details()} if gpu is not None else {}),
            "output": output,
            "output_shape": output_shape,
            "heap": heap,
            "memory_pass": _memory_pass_note(separate, memory_heap),
        },
        total_s=time.perf_counter() - started,
    )


def _memory_pass_note(separate: bool, heap: str) -> str:
    if separate:
        return f"own pass before timing ({heap}): build + {MEMORY_RUNS} forward passes"
    return f"after the latency protocol, under keep_heap ({MEMORY_PASS_ENV}=after_latency)"
