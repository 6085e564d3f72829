"""Measure one candidate in the current process: build it, time forward passes, read memory.

Pure functions: values in, values out, no HTTP. The agent runs `measure_spec` in a fresh
child process (`agent.child`) so that the CPU memory high-water mark is this candidate's
alone; called elsewhere it still works, but the CPU peak can under-read because memory freed
by earlier work is reused without raising the process's RSS.
"""

from __future__ import annotations

import gc
import platform
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from agent.memory import MIB, MemoryProbe
from archvocab.build import build_model
from archvocab.spec import GPT2Spec
from archvocab.wire import MeasurementResult, MeasurementSettings

INPUT_SEED = 0  # the token batch is the same for every candidate of a given shape
WEIGHT_SEED = 0


def latency_stats(samples_ms: Sequence[float]) -> tuple[float, float]:
    """(median, interquartile range) of latency samples, in the samples' unit."""
    if not samples_ms:
        raise ValueError("latency_stats needs at least one sample")
    q1, median, q3 = np.percentile(np.asarray(samples_ms, dtype=float), [25, 50, 75])
    return float(median), float(q3 - q1)


def parameter_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's distinct parameters (tied tensors counted once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def make_tokens(
    spec: GPT2Spec, settings: MeasurementSettings, device: torch.device
) -> torch.Tensor:
    """A random (batch_size, seq_len) token batch drawn from a seeded generator."""
    generator = torch.Generator().manual_seed(INPUT_SEED)
    shape = (settings.batch_size, settings.seq_len)
    return torch.randint(0, spec.vocab_size, shape, generator=generator).to(device)


def time_forward(
    model: torch.nn.Module, tokens: torch.Tensor, warmup: int, repeats: int
) -> list[float]:
    """`warmup` untimed then `repeats` timed forward passes; milliseconds per timed pass."""
    cuda = tokens.device.type == "cuda"
    samples: list[float] = []
    with torch.inference_mode():
        for _ in range(warmup):
            model(tokens)
        for _ in range(repeats):
            if cuda:
                torch.cuda.synchronize(tokens.device)
            start = time.perf_counter()
            model(tokens)
            if cuda:
                torch.cuda.synchronize(tokens.device)
            samples.append((time.perf_counter() - start) * 1000.0)
    return samples


def _device(settings: MeasurementSettings) -> torch.device:
    if settings.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            "the job asks for device 'cuda' but this agent has no usable CUDA device"
        )
    return torch.device(settings.device)


def _build(spec: GPT2Spec, device: torch.device) -> tuple[torch.nn.Module, float]:
    start = time.perf_counter()
    torch.manual_seed(WEIGHT_SEED)
    with device:  # allocate the weights where they will run, without a CPU copy first
        model = build_model(spec)
    model.eval()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return model, time.perf_counter() - start


def measure_spec(spec: GPT2Spec, settings: MeasurementSettings) -> MeasurementResult:
    """Build `spec` and measure latency and peak memory with `settings`.

    Peak memory is the high-water mark above a baseline taken just before the build: process
    RSS on the CPU (see `agent.memory`), ``torch.cuda.max_memory_allocated`` on CUDA.
    """
    device = _device(settings)
    torch.set_num_threads(settings.threads)
    gc.collect()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        method, baseline = "cuda_max_memory_allocated", torch.cuda.memory_allocated(device)
    else:
        probe = MemoryProbe.start()
        method, baseline = probe.method, probe.baseline_bytes
    model, build_s = _build(spec, device)
    samples = time_forward(
        model, make_tokens(spec, settings, device), settings.warmup, settings.repeats
    )
    peak = torch.cuda.max_memory_allocated(device) if cuda else probe.peak_bytes()
    median, iqr = latency_stats(samples)
    return MeasurementResult(
        latency_ms=median,
        latency_iqr_ms=iqr,
        latency_samples_ms=samples,
        peak_memory_mb=max(0, peak - baseline) / MIB,
        memory_method=method,
        baseline_memory_mb=baseline / MIB,
        weights_mb=parameter_bytes(model) / MIB,
        build_s=build_s,
        details=_details(model, settings, device),
    )


def _details(
    model: torch.nn.Module, settings: MeasurementSettings, device: torch.device
) -> dict[str, Any]:
    details: dict[str, Any] = {
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "device": str(device),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "batch_size": settings.batch_size,
        "seq_len": settings.seq_len,
        "warmup": settings.warmup,
        "samples": settings.repeats,
        "input_seed": INPUT_SEED,
        "n_parameters": sum(p.numel() for p in model.parameters()),
    }
    if device.type == "cuda":
        details["device_name"] = torch.cuda.get_device_name(device)
        details["max_memory_reserved_mb"] = torch.cuda.max_memory_reserved(device) / MIB
    return details
