"""NVML readings, decoded from a fake `pynvml` module (the real one only runs on a GPU), and
the busy flags they raise."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest

from agent import nvml
from agent.nvml import GpuReading, GpuWatch, busy_reasons, decode_throttle
from agent.provenance import build_provenance, snapshot


class NVMLError(Exception):
    pass


class FakeNvml:
    """What the GPU says, through pynvml's function names; a missing field raises NVMLError
    as pynvml does for a field the GPU does not support."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields
        self.asked: list[Any] = []

    def _get(self, name: str) -> Any:
        if name not in self.fields:
            raise NVMLError(f"{name}: not supported")
        return self.fields[name]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:  # noqa: N802 - pynvml's names
        self.asked.append(uuid)
        if uuid != "GPU-1234":
            raise NVMLError("not found")
        return "gpu-handle"

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:  # noqa: N802
        self.asked.append(index)
        return f"index-{index}"

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:  # noqa: N802
        return self._get({1: "sm", 2: "mem"}[clock])

    def nvmlDeviceGetMaxClockInfo(self, handle: str, clock: int) -> int:  # noqa: N802
        return self._get("sm_max")

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:  # noqa: N802
        return self._get("power_mw")

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: str) -> int:  # noqa: N802
        return self._get("limit_mw")

    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:  # noqa: N802
        return self._get("temperature")

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> Any:  # noqa: N802
        gpu, memory = self._get("utilization")
        return SimpleNamespace(gpu=gpu, memory=memory)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: str) -> int:  # noqa: N802
        return self._get("throttle")

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[Any]:  # noqa: N802
        return [SimpleNamespace(pid=p, usedGpuMemory=1) for p in self._get("pids")]


QUIET = {
    "sm": 1980,
    "mem": 2619,
    "sm_max": 1980,
    "power_mw": 312_500,
    "limit_mw": 700_000,
    "temperature": 41,
    "utilization": (0, 0),
    "throttle": 0,
    "pids": [],
}


def test_throttle_masks_decode_to_nvml_names() -> None:
    assert decode_throttle(0) == [] and decode_throttle(None) == []
    assert decode_throttle(0x1) == ["gpu_idle"]
    assert decode_throttle(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert decode_throttle(0x8 | 0x1000) == ["hw_slowdown", "unknown_0x1000"]


def test_a_reading_has_every_field_in_its_unit() -> None:
    fake = FakeNvml(**{**QUIET, "throttle": 0x20, "pids": [os.getpid(), 99999]})
    reading = nvml.read(fake, "h", own_context=True)
    assert reading == GpuReading(
        sm_mhz=1980,
        mem_mhz=2619,
        sm_max_mhz=1980,
        power_w=312.5,
        power_limit_w=700.0,
        temperature_c=41,
        utilization_gpu_pct=0,
        utilization_mem_pct=0,
        throttle_mask=0x20,
        throttle_reasons=["sw_thermal_slowdown"],
        processes=2,
        other_processes=1,
    )
    assert reading.to_json()["throttle_reasons"] == ["sw_thermal_slowdown"]


def test_what_the_gpu_does_not_support_reads_none() -> None:
    reading = nvml.read(FakeNvml(sm=1500), "h", own_context=True)
    assert reading.sm_mhz == 1500 and reading.mem_mhz is None and reading.power_w is None
    assert reading.throttle_mask is None and reading.throttle_reasons == []
    assert reading.processes is None and reading.other_processes is None


def test_our_own_context_is_not_another_process_even_under_a_host_pid() -> None:
    # In a container NVML lists host pids: ours appears under a number we do not know.
    fake = FakeNvml(**{**QUIET, "pids": [4242]})
    assert nvml.read(fake, "h", own_context=True).other_processes == 0
    assert nvml.read(fake, "h", own_context=False).other_processes == 1
    two = FakeNvml(**{**QUIET, "pids": [4242, 4343]})
    assert nvml.read(two, "h", own_context=True).other_processes == 1


def test_the_device_is_found_by_uuid_then_by_index() -> None:
    fake = FakeNvml(**QUIET)
    assert GpuWatch("1234", 3, nvml=fake).device == "gpu-handle"
    assert GpuWatch("GPU-9", 3, nvml=fake).device == "index-3"
    assert fake.asked == ["GPU-1234", "GPU-9", 3]


def test_quiet_readings_raise_no_flag() -> None:
    watch = GpuWatch(None, 0, nvml=FakeNvml(**QUIET))
    for moment in ("start", "before", "after"):
        watch.take(moment, own_context=moment != "start")
    assert watch.busy_reasons() == []
    details = watch.details()
    assert details["nvml"] == "pynvml" and details["busy_reasons"] == []
    assert details["before"]["sm_mhz"] == 1980 and details["after"]["power_w"] == 312.5


@pytest.mark.parametrize(
    ("changes", "moment", "expected"),
    [
        ({"throttle": 0x40}, "after", "GPU clocks throttled (hw_thermal_slowdown)"),
        ({"throttle": 0x4 | 0x1}, "before", "GPU clocks throttled (sw_power_cap)"),
        ({"pids": [1, 2, os.getpid()]}, "before", "2 other process(es) on the GPU"),
        ({"utilization": (85, 40)}, "start", "GPU 85% utilised by other work"),
    ],
)
def test_throttling_sharing_and_prior_load_are_busy(
    changes: dict[str, Any], moment: str, expected: str
) -> None:
    readings = {
        m: nvml.read(FakeNvml(**QUIET), "h", own_context=True) for m in ("start", "before", "after")
    }
    readings[moment] = nvml.read(FakeNvml(**{**QUIET, **changes}), "h", own_context=True)
    reasons = busy_reasons(readings)
    assert len(reasons) == 1 and reasons[0].startswith(expected)


def test_idle_clocks_and_busy_kernels_of_our_own_are_not_busy() -> None:
    # gpu_idle is no slowdown; utilisation during our own timing is ours.
    readings = {
        "before": nvml.read(FakeNvml(**{**QUIET, "throttle": 0x1}), "h", own_context=True),
        "after": nvml.read(FakeNvml(**{**QUIET, "utilization": (100, 60)}), "h", own_context=True),
    }
    assert busy_reasons(readings) == []


def test_without_pynvml_nothing_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # import fails
    watch = GpuWatch("1234", 0)
    watch.take("before")
    assert watch.device is None and watch.readings == {} and watch.busy_reasons() == []
    assert watch.details()["nvml"].startswith("unavailable")


def test_on_an_accelerator_the_cpu_share_is_kept_but_not_a_busy_sign() -> None:
    before = snapshot()
    after = snapshot()
    # A timed phase spent waiting on the device: wall time passes, CPU time does not.
    after = type(after)(
        after.load_avg,
        after.cpu_mhz,
        after.temperature_c,
        before.process_cpu_s,
        before.wall_s + 1.0,
    )
    common = {
        "runtime": "torch",
        "runtime_version": "x",
        "threads": 1,
        "before": before,
        "after": after,
    }
    on_cpu = build_provenance(**common)
    assert any("descheduled" in r for r in on_cpu.busy_reasons)
    on_gpu = build_provenance(
        **common,
        accelerator="NVIDIA H100",
        accelerator_reasons=["GPU clocks throttled (hw_slowdown)"],
    )
    assert on_gpu.cpu_share == on_cpu.cpu_share == 0.0
    assert not any("descheduled" in r for r in on_gpu.busy_reasons)
    assert "GPU clocks throttled (hw_slowdown)" in on_gpu.busy_reasons and on_gpu.busy
