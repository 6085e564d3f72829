"""What an NVIDIA GPU is doing, read through NVML: clocks, power, temperature, utilisation,
throttle reasons, other processes; and whether that makes a CUDA measurement suspect.

Optional: NVML is read through the `pynvml` module (the nvidia-ml-py package) when it can be
imported, and nothing is read otherwise; no hard dependency. Standard library otherwise, so it
needs no torch. Every call is guarded on its own: a reading NVML refuses (a field a GPU does
not support, a permission) is None, never an error for the measurement.

A measuring process on CUDA takes three readings (`agent.in_process`): at its start, before
it has run anything on the GPU (the utilisation then is other work's), just before the timed
phase, and just after it. They go to `MeasurementResult.details["gpu"]`; `busy_reasons`
turns them into sentences for `Provenance.busy_reasons`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

# NVML's clocks-event (throttle) reason bits, nvml.h's nvmlClocksEventReason*.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# The reasons that slow kernels down against the clocks a quiet GPU would run at.
SLOWING = (
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)
BUSY_UTILIZATION_PCT = 20  # other work kept the GPU this busy before we started
# nvml.h: NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU
_CLOCK_SM, _CLOCK_MEM, _TEMPERATURE_GPU = 1, 2, 0


def decode_throttle(mask: int | None) -> list[str]:
    """The names of the bits set in an NVML clocks-event (throttle) reasons mask."""
    if mask is None:
        return []
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    return [*names, f"unknown_0x{unknown:x}"] if unknown else names


@dataclass(frozen=True)
class GpuReading:
    """One moment of one GPU; None where NVML did not say."""

    sm_mhz: int | None = None
    mem_mhz: int | None = None
    sm_max_mhz: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    utilization_gpu_pct: int | None = None
    utilization_mem_pct: int | None = None
    throttle_mask: int | None = None
    throttle_reasons: list[str] = field(default_factory=list)
    processes: int | None = None  # compute and graphics processes holding the GPU
    other_processes: int | None = None  # ... of which not this one

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def load_nvml() -> Any | None:
    """The `pynvml` module, initialised; None where it is not installed or finds no driver."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError: no driver, no GPU, no permission
        return None
    return pynvml


def handle(nvml: Any, uuid: str | None, index: int) -> Any | None:
    """The NVML handle of the GPU CUDA calls `index` (by its UUID where known: with
    CUDA_VISIBLE_DEVICES, CUDA's and NVML's numbering differ)."""
    if uuid:
        name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        got = _call(nvml, "nvmlDeviceGetHandleByUUID", name)
        if got is not None:
            return got
    return _call(nvml, "nvmlDeviceGetHandleByIndex", index)


def _call(nvml: Any, name: str, *args: Any) -> Any | None:
    function = getattr(nvml, name, None)
    if function is None:
        return None
    try:
        return function(*args)
    except Exception:  # NVMLError_NotSupported, _NoPermission, ...
        return None


def _throttle_mask(nvml: Any, device: Any) -> int | None:
    # Renamed "clocks event reasons" in driver 535; older bindings know only "throttle".
    for name in (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ):
        mask = _call(nvml, name, device)
        if mask is not None:
            return int(mask)
    return None


def _processes(nvml: Any, device: Any, own_pid: int, own_context: bool) -> tuple[int, int] | None:
    """(processes holding the GPU, of which others than us); None where NVML does not say."""
    found: set[int] = set()
    answered = False
    for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        listed = _call(nvml, name, device)
        if listed is not None:
            answered = True
            found.update(int(getattr(p, "pid", -1)) for p in listed)
    if not answered:
        return None
    # In a container NVML lists host pids: with a context of our own, one of them is us
    # whether or not our pid is among them.
    ours = own_pid in found or (own_context and bool(found))
    return len(found), len(found) - ours


def read(nvml: Any, device: Any, *, own_context: bool, own_pid: int | None = None) -> GpuReading:
    """Everything NVML says about `device` now; `own_context`: this process holds a CUDA
    context on it (it counts among the GPU's processes)."""
    own = os.getpid() if own_pid is None else own_pid
    utilization = _call(nvml, "nvmlDeviceGetUtilizationRates", device)
    power_mw = _call(nvml, "nvmlDeviceGetPowerUsage", device)
    limit_mw = _call(nvml, "nvmlDeviceGetEnforcedPowerLimit", device)
    mask = _throttle_mask(nvml, device)
    processes, others = _processes(nvml, device, own, own_context) or (None, None)
    return GpuReading(
        sm_mhz=_call(nvml, "nvmlDeviceGetClockInfo", device, _CLOCK_SM),
        mem_mhz=_call(nvml, "nvmlDeviceGetClockInfo", device, _CLOCK_MEM),
        sm_max_mhz=_call(nvml, "nvmlDeviceGetMaxClockInfo", device, _CLOCK_SM),
        power_w=None if power_mw is None else power_mw / 1000.0,
        power_limit_w=None if limit_mw is None else limit_mw / 1000.0,
        temperature_c=_call(nvml, "nvmlDeviceGetTemperature", device, _TEMPERATURE_GPU),
        utilization_gpu_pct=None if utilization is None else int(utilization.gpu),
        utilization_mem_pct=None if utilization is None else int(utilization.memory),
        throttle_mask=mask,
        throttle_reasons=decode_throttle(mask),
        processes=processes,
        other_processes=others,
    )


def busy_reasons(readings: dict[str, GpuReading]) -> list[str]:
    """Why a CUDA measurement may be disturbed, from readings named "start" (before this
    process used the GPU), "before" and "after" (the timed phase); [] when all looked quiet."""
    reasons = []
    slowed = sorted(
        {r for reading in readings.values() for r in reading.throttle_reasons if r in SLOWING}
    )
    if slowed:
        reasons.append(f"GPU clocks throttled ({', '.join(slowed)})")
    # Not from "start": whether our own context is listed yet is uncertain there.
    timed = [r for moment, r in readings.items() if moment != "start"]
    others = max((r.other_processes or 0 for r in timed), default=0)
    if others:
        reasons.append(f"{others} other process(es) on the GPU")
    start = readings.get("start")
    if start and (start.utilization_gpu_pct or 0) >= BUSY_UTILIZATION_PCT:
        reasons.append(
            f"GPU {start.utilization_gpu_pct}% utilised by other work before the measurement "
            f"(>= {BUSY_UTILIZATION_PCT}%)"
        )
    return reasons


class GpuWatch:
    """Readings of one GPU at named moments; no-ops where NVML cannot be read."""

    def __init__(self, uuid: str | None, index: int, nvml: Any | None = None) -> None:
        self.nvml = nvml if nvml is not None else load_nvml()
        self.device = None if self.nvml is None else handle(self.nvml, uuid, index)
        self.readings: dict[str, GpuReading] = {}

    def take(self, moment: str, *, own_context: bool = True) -> None:
        if self.device is not None:
            self.readings[moment] = read(self.nvml, self.device, own_context=own_context)

    def busy_reasons(self) -> list[str]:
        return busy_reasons(self.readings)

    def details(self) -> dict[str, Any]:
        """What goes to MeasurementResult.details["gpu"]."""
        if self.device is None:
            return {"nvml": "unavailable (pynvml not importable, or NVML found no driver)"}
        return {
            "nvml": "pynvml",
            **{moment: reading.to_json() for moment, reading in self.readings.items()},
            "busy_reasons": self.busy_reasons(),
        }
