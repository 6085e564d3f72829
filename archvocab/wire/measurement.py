"""Wire schemas of one measurement: how an agent measures a candidate (`MeasurementSettings`),
what it reports (`MeasurementResult`: latency statistics, memory, provenance, reference
readings), the low-cost proxies it computes and how a measurement fails (`Failure`)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from archvocab.json_value import JsonObject
from archvocab.wire.base import Strict

# "refused": the agent would not build it (over its limits or its free memory; agent.guard).
FAILURE_KINDS = ("invalid_spec", "out_of_memory", "timeout", "error", "refused")


RUNTIMES = ("torch", "onnxruntime")
Runtime = Literal["torch", "onnxruntime"]


class MeasurementSettings(Strict):
    """How an agent measures one candidate: what it runs, and the latency protocol.

    Warm-up runs until the per-run time is stable (and at least `warmup` runs and
    `warmup_min_s` seconds), or `warmup_max_s` is spent. Timed samples are then taken until the
    `confidence` interval of the median is within +-`ci_target` of it (after at least
    `min_samples` samples and `min_time_s` seconds), or `max_time_s` / `max_samples` is hit.
    A sample times enough consecutive runs to last `min_sample_ms` (inner repetition), so
    sub-millisecond models are not timed at the clock's resolution.
    """

    runtime: Runtime = Field("torch", description="torch (eager PyTorch) or onnxruntime (CPU)")
    device: Literal["cpu", "cuda"] = "cpu"
    output: Literal["last", "all"] = Field(
        "last",
        description="what the timed forward returns for a space whose output is a vocabulary "
        "distribution: last = the next-token logits of the last position (what generation and "
        "serving run); all = scores at every position (LTS's training-style forward)",
    )
    batch_size: int = Field(1, ge=1, le=256)
    seq_len: int = Field(64, ge=1, le=8192)
    threads: int = Field(1, ge=1, le=256)
    warmup: int = Field(3, ge=0, le=1000, description="minimum warm-up runs")
    warmup_min_s: float = Field(0.1, ge=0, le=3600)
    warmup_max_s: float = Field(10.0, ge=0, le=3600)
    min_samples: int = Field(10, ge=3, le=10000)
    max_samples: int = Field(2000, ge=3, le=10000)
    ci_target: float = Field(0.02, gt=0, le=1, description="relative half-width of the CI")
    confidence: float = Field(0.95, ge=0.5, le=0.999)
    min_time_s: float = Field(2.0, ge=0, le=3600, description="minimum timed duration")
    max_time_s: float = Field(20.0, gt=0, le=3600, description="time cap of the timed phase")
    min_sample_ms: float = Field(1.0, ge=0, le=10000, description="inner repetition target")
    timeout_s: float = Field(300.0, gt=0, le=24 * 3600)

    @model_validator(mode="after")
    def _consistent(self) -> MeasurementSettings:
        if self.min_samples > self.max_samples:
            raise ValueError("min_samples must be <= max_samples")
        if self.warmup_min_s > self.warmup_max_s:
            raise ValueError("warmup_min_s must be <= warmup_max_s")
        if self.min_time_s > self.max_time_s:
            raise ValueError("min_time_s must be <= max_time_s")
        if self.runtime == "onnxruntime" and self.device != "cpu":
            raise ValueError("runtime 'onnxruntime' runs on device 'cpu' only (CPU provider)")
        if self.timeout_s <= self.warmup_max_s + self.max_time_s:
            raise ValueError(
                "timeout_s must exceed warmup_max_s + max_time_s "
                f"({self.warmup_max_s + self.max_time_s:g}) to leave time for the build"
            )
        return self

    def cache_key(self) -> str:
        """What makes two measurements comparable: every setting but the timeout."""
        fields = self.model_dump(mode="json", exclude={"timeout_s"})
        return json.dumps(fields, sort_keys=True, separators=(",", ":"))


class LatencyStats(Strict):
    """The timed phase of one measurement. Sample values are per run (inner repeats divided out)."""

    median_ms: float = Field(ge=0)
    p90_ms: float = Field(ge=0)
    min_ms: float = Field(ge=0)
    iqr_ms: float = Field(ge=0)
    ci_low_ms: float = Field(ge=0)
    ci_high_ms: float = Field(ge=0)
    ci_rel: float = Field(ge=0, description="CI half-width relative to the median")
    confidence: float = Field(gt=0, lt=1)
    samples: int = Field(ge=1)
    inner_repeats: int = Field(ge=1, description="consecutive runs timed as one sample")
    samples_ms: list[float] = Field(min_length=1, max_length=10000)
    stop_reason: Literal["ci_target", "time_cap", "max_samples"]
    warmup_runs: int = Field(ge=0)
    warmup_s: float = Field(ge=0)
    warmup_stable: bool
    timed_s: float = Field(ge=0, description="wall time of the timed phase")


MEMORY_KINDS = ("process_peak", "cuda_allocated_peak", "cuda_reserved_peak")


class MemoryReport(Strict):
    """Peak memory by kind, in MiB above the baseline taken just before the build."""

    primary: Literal["process_peak", "cuda_allocated_peak", "cuda_reserved_peak"] = Field(
        description="the kind used as the memory objective"
    )
    process_peak_mb: float | None = Field(
        None, ge=0, description="resident-memory high-water mark minus the pre-build baseline"
    )
    process_method: str = Field(max_length=200)
    process_baseline_mb: float = Field(ge=0)
    cuda_allocated_peak_mb: float | None = Field(None, ge=0)
    cuda_reserved_peak_mb: float | None = Field(None, ge=0)
    weights_mb: float = Field(ge=0, description="the parameters alone")


class Provenance(Strict):
    """Where and under what conditions a measurement was taken."""

    runtime: str = Field(max_length=64)
    runtime_version: str = Field(max_length=64)
    torch_version: str | None = Field(None, max_length=64)
    torch_build: str | None = Field(None, max_length=500)
    python_version: str = Field(max_length=64)
    hostname: str = Field(max_length=255)
    machine: str = Field(max_length=64)
    cpu_model: str = Field(max_length=255)
    threads: int = Field(ge=1)
    interop_threads: int | None = Field(None, ge=1)
    cpu_affinity: list[int] = Field(default_factory=list, max_length=4096)
    governor: str | None = Field(None, max_length=64)
    cpu_mhz_before: float | None = Field(None, ge=0)
    cpu_mhz_after: float | None = Field(None, ge=0)
    cpu_max_mhz: float | None = Field(None, ge=0)
    load_avg_before: list[float] = Field(default_factory=list, max_length=3)
    load_avg_after: list[float] = Field(default_factory=list, max_length=3)
    cpu_share: float | None = Field(
        None, ge=0, description="process CPU time / (wall time x threads) while timing"
    )
    temperature_c_before: float | None = None
    temperature_c_after: float | None = None
    accelerator: str | None = Field(None, max_length=255)
    accelerator_driver: str | None = Field(None, max_length=255)
    cuda_version: str | None = Field(None, max_length=64)
    busy: bool = Field(False, description="the machine looked busy: see busy_reasons")
    busy_reasons: list[str] = Field(default_factory=list, max_length=20)


class ReferenceReading(Strict):
    """One measurement of the search's reference architecture on the agent that measured a
    result: the nearest one before it (the agent re-measures the reference at intervals).
    The server learns each device class's noise and drift from these readings."""

    arch_id: str = Field(max_length=64)
    latency_ms: float = Field(ge=0)
    peak_memory_mb: float = Field(ge=0)
    measured_at: datetime = Field(description="when the reference measurement ended (UTC)")
    busy: bool = False


class BusyAttempt(Strict):
    """A measurement the agent threw away because the machine looked busy, and measured again."""

    latency_ms: float = Field(ge=0)
    peak_memory_mb: float = Field(ge=0)
    busy_reasons: list[str] = Field(default_factory=list, max_length=20)


class MeasurementResult(Strict):
    """What an agent reports for a candidate it measured."""

    latency_ms: float = Field(ge=0, description="median latency per forward pass")
    peak_memory_mb: float = Field(ge=0, description="memory.primary's value: the objective")
    latency: LatencyStats
    memory: MemoryReport
    build_s: float = Field(ge=0, description="model build (torch) or build + ONNX export")
    load_s: float = Field(0.0, ge=0, description="runtime load, e.g. ONNX Runtime session")
    total_s: float = Field(ge=0, description="the measuring process's whole time")
    provenance: Provenance
    proxies: dict[str, float] = Field(
        default_factory=dict, description="the low-cost proxies the job asked for, by name"
    )
    proxy_inputs: str | None = Field(
        None, max_length=200, description="ProxyInputSettings.key() of the proxies' minibatch"
    )
    details: JsonObject = Field(default_factory=dict)
    reference: ReferenceReading | None = Field(
        None, description="the nearest earlier reading of the search's reference architecture"
    )
    busy_attempts: list[BusyAttempt] = Field(
        default_factory=list,
        max_length=10,
        description="earlier attempts at this job that were flagged busy and measured again",
    )


# -- data-dependent proxies ------------------------------------------------------------------
class ProxyInputSettings(Strict):
    """The seeded random-token minibatch low-cost proxies of a search are computed on."""

    batch_size: int = Field(4, ge=1, le=256)
    seq_len: int = Field(32, ge=2, le=4096)
    seed: int = Field(0, ge=0, le=2**31 - 1)

    def key(self) -> str:
        """Names the inputs beside a stored value (the format of proxies.inputs.ProxyInputs)."""
        return f"random:{self.batch_size}x{self.seq_len}:seed{self.seed}"


class ProxyRequest(Strict):
    """Low-cost proxies an agent computes for the candidate it measures."""

    names: list[str] = Field(max_length=64)
    inputs: ProxyInputSettings = Field(default_factory=ProxyInputSettings)


class Failure(Strict):
    kind: Literal["invalid_spec", "out_of_memory", "timeout", "error", "refused"]
    message: str = Field("", max_length=4000)

    @field_validator("message", mode="before")
    @classmethod
    def _printable(cls, value: Any) -> Any:
        # Text captured from a crash may hold NULs: an agent's report is cleaned, not refused.
        return value.replace("\x00", "\ufffd") if isinstance(value, str) else value
