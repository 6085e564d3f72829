"""Refuse a job in the agent's own process, before anything is built or a process started.

What the server sends is data. A lease's spec is read by the vocabulary's validating parser
(`archvocab.registry.parse_spec`: a fixed table of kinds, each a frozen dataclass whose
constructor checks every field) and built by the kind's own builder; nothing in it names code
to run or a module to import. The agent and the vocabulary never `eval`, `exec`, unpickle or
`torch.load` what they receive, and import modules by name only from fixed tables of their
own (the kind registry; the export's torch, onnx, onnxscript); tests/agent/test_agent_guard.py
scans their sources to keep it so.

Then the guard estimates, from the spec alone (analytic parameter counts and activation
bounds of `archvocab.footprint`: no model built), what each process of the job needs:

    need = ceil(SAFETY_FACTOR x (weight copies x weight bytes + activation bytes)) + reserve

- torch: 1 copy of the weights, the activations of the job's (batch_size, seq_len), on the
  job's device;
- onnxruntime: 4 copies (the export holds the model, its traced graph and the serialised
  file; ONNX Runtime's session holds about 2), on the CPU;
- low-cost proxies (when the job asks for them): 7 copies (gradients, a copy for synflow, the
  second-order graph of grasp) and twice the activations of the proxies' minibatch, on the
  CPU.

Weights are float32 (4 bytes per parameter) for every kind and runtime. The copies and the
reserves (the runtime's own memory) were measured on models of every kind
(docs/agent-guard.md); SAFETY_FACTOR is the margin on top.

A job is refused (a Failure of kind "refused", naming the estimate, the limit and the flag)
when its parameters exceed `Limits.max_params`, a process's need exceeds
`Limits.max_memory_bytes`, or a process's need exceeds the memory free on its device now
(`agent.available`; skipped when that cannot be read or `check_device` is off).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agent.available import available_bytes
from agent.failures import classify_exception, parse_job_spec, short
from archvocab import footprint
from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec
from archvocab.wire import Failure, MeasurementSettings, ProxyRequest

logger = logging.getLogger(__name__)

MIB = 1024 * 1024
SAFETY_FACTOR = 1.25
# The torch process: one copy of the weights; what its runtime adds, by device (a CPU child's
# own pages measured ~40 MiB; CUDA: the context and cuBLAS's workspace on the GPU).
_TORCH_RESERVE = {"cpu": 128 * MIB, "cuda": 1024 * MIB}
# (weight copies, activation multiplier, runtime reserve) of the CPU-only processes
_ONNX = (4, 1, 512 * MIB)
_PROXIES = (7, 2, 256 * MIB)

AvailableFn = Callable[[str], "int | None"]


@dataclass(frozen=True)
class StepNeed:
    """What one process of a job needs, by the estimate."""

    step: str  # "torch", "onnxruntime" or "proxies"
    device: str  # "cpu" or "cuda"
    weight_copies: int
    weight_bytes: int
    activation_bytes: int
    reserve_bytes: int
    shape: str  # the input the activations are for, e.g. "batch 1 x seq 64"

    @property
    def bytes(self) -> int:
        tensors = self.weight_copies * self.weight_bytes + self.activation_bytes
        return math.ceil(SAFETY_FACTOR * tensors) + self.reserve_bytes

    def describe(self) -> str:
        return (
            f"{self.step} on {self.device} needs an estimated {_mib(self.bytes)} "
            f"({self.weight_copies} x {_mib(self.weight_bytes)} of float32 weights + "
            f"{_mib(self.activation_bytes)} of activations for {self.shape}, "
            f"x{SAFETY_FACTOR:g} safety, + {_mib(self.reserve_bytes)} for the runtime)"
        )


@dataclass(frozen=True)
class Estimate:
    """A job's parameter count and the needs of the processes it will start."""

    params: int
    steps: tuple[StepNeed, ...]

    @property
    def peak(self) -> StepNeed:
        return max(self.steps, key=lambda step: step.bytes)


def estimate_job(
    spec: ArchSpec, settings: MeasurementSettings, proxies: ProxyRequest | None = None
) -> Estimate:
    """The estimate for measuring `spec` as `settings` says (and computing `proxies`)."""
    weights = footprint.weight_bytes(spec)
    batch, seq = settings.batch_size, settings.seq_len
    activations = footprint.activation_bytes(spec, batch, seq, output=settings.output)
    shape = f"batch {batch} x seq {seq}, output {settings.output}"
    if settings.runtime == "onnxruntime":
        copies, factor, reserve = _ONNX
        steps = [
            StepNeed("onnxruntime", "cpu", copies, weights, factor * activations, reserve, shape)
        ]
    else:
        reserve = _TORCH_RESERVE[settings.device]
        steps = [StepNeed("torch", settings.device, 1, weights, activations, reserve, shape)]
    if proxies is not None and proxies.names:
        copies, factor, reserve = _PROXIES
        p_batch, p_seq = proxies.inputs.batch_size, proxies.inputs.seq_len + 1  # + targets
        p_activations = factor * footprint.activation_bytes(spec, p_batch, p_seq)
        p_shape = f"batch {p_batch} x seq {p_seq}"
        steps.append(StepNeed("proxies", "cpu", copies, weights, p_activations, reserve, p_shape))
    return Estimate(spec.total_params(), tuple(steps))


@dataclass(frozen=True)
class Limits:
    """This agent's own limits (`hwnas agent --max-params / --max-memory-mb`); None: none."""

    max_params: int | None = None
    max_memory_bytes: int | None = None


class Guard:
    """Checks a job before anything is built; `check` gives the Failure to report, or None.

    `available(device)` says how many bytes are free on "cpu" or "cuda" now (None: unknown);
    tests pass their own value.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        check_device: bool = True,
        available: AvailableFn = available_bytes,
    ) -> None:
        self.limits = limits or Limits()
        self.check_device = check_device
        self.available = available

    def check(
        self,
        spec: Mapping[str, Any],
        settings: MeasurementSettings,
        proxies: ProxyRequest | None = None,
    ) -> Failure | None:
        """invalid_spec if the spec does not validate, refused if it must not be built."""
        try:
            parsed = parse_job_spec(spec, settings)
        except (InvalidSpec, ValidationError) as exc:
            return classify_exception(exc)
        reason = self.refusal(estimate_job(parsed, settings, proxies))
        if reason is None:
            return None
        return Failure(kind="refused", message=short(f"refused before building: {reason}", 4000))

    def refusal(self, estimate: Estimate) -> str | None:
        """Why a job with this estimate is refused, or None."""
        limits = self.limits
        if limits.max_params is not None and estimate.params > limits.max_params:
            return (
                f"{estimate.params:,} parameters exceed this agent's limit of "
                f"{limits.max_params:,} (raise it with --max-params)"
            )
        peak = estimate.peak
        if limits.max_memory_bytes is not None and peak.bytes > limits.max_memory_bytes:
            return (
                f"{peak.describe()}, over this agent's limit of "
                f"{_mib(limits.max_memory_bytes)} (raise it with --max-memory-mb)"
            )
        return self._device_refusal(estimate) if self.check_device else None

    def _device_refusal(self, estimate: Estimate) -> str | None:
        free: dict[str, int | None] = {}
        for step in estimate.steps:
            if step.device not in free:
                free[step.device] = self.available(step.device)
                if free[step.device] is None:
                    logger.debug("free memory on %s unknown: not checked", step.device)
            available = free[step.device]
            if available is not None and step.bytes > available:
                return (
                    f"{step.describe()}, more than the {_mib(available)} free on {step.device} "
                    "now (a device with more free memory can measure it; "
                    "--no-device-memory-check skips this check)"
                )
        return None


def _mib(n: int) -> str:
    return f"{n / MIB:,.0f} MiB"
