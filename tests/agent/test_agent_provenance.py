"""Measurement provenance: host readers against fake /proc and /sys trees, the busy flags,
and the whole record."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agent import hostinfo, provenance
from agent.hostinfo import Roots
from agent.provenance import Snapshot, build_provenance, busy_reasons, snapshot

CPUINFO = (
    "processor\t: 0\nmodel name\t: Test CPU 9000\ncpu MHz\t\t: 2100.000\n\n"
    "processor\t: 1\nmodel name\t: Test CPU 9000\ncpu MHz\t\t: 3400.500\n"
)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def stat_line(cpu: int) -> str:
    """/proc/self/stat with `cpu` as field 39 (the command name holds spaces and a ')')."""
    fields = ["S", *["0"] * 35, str(cpu), "0"]  # fields 3..40
    return "1234 (odd) name) " + " ".join(fields) + "\n"


@pytest.fixture
def fake(tmp_path: Path) -> Roots:
    """A machine on CPU 1 at 3 GHz of 4, performance governor, x86 package at 55 C."""
    roots = Roots(proc=tmp_path / "proc", sys=tmp_path / "sys")
    write(roots.proc / "loadavg", "0.52 0.61 0.70 1/234 5678\n")
    write(roots.proc / "cpuinfo", CPUINFO)
    write(roots.proc / "self/stat", stat_line(1))
    freq = roots.cpu_dir / "cpu1/cpufreq"
    write(freq / "scaling_cur_freq", "3000000\n")
    write(freq / "cpuinfo_max_freq", "4000000\n")
    write(freq / "scaling_governor", "performance\n")
    thermal = roots.sys / "class/thermal"
    write(thermal / "thermal_zone0/type", "acpitz\n")
    write(thermal / "thermal_zone0/temp", "70000\n")
    write(thermal / "thermal_zone1/type", "x86_pkg_temp\n")
    write(thermal / "thermal_zone1/temp", "55000\n")
    return roots


def snap(
    *,
    load: list[float] | None = None,
    mhz: float | None = 3000.0,
    temp: float | None = 50.0,
    cpu_s: float = 0.0,
    wall_s: float = 0.0,
    cpus_busy_s: float | None = None,
) -> Snapshot:
    return Snapshot(
        load_avg=[0.1, 0.1, 0.1] if load is None else load,
        cpu_mhz=mhz,
        temperature_c=temp,
        process_cpu_s=cpu_s,
        wall_s=wall_s,
        cpus_busy_s=cpus_busy_s,
    )


# -- readers ----------------------------------------------------------------------------------
def test_readers_on_a_fake_machine(fake: Roots) -> None:
    assert hostinfo.load_avg(fake) == [0.52, 0.61, 0.70]
    assert hostinfo.current_cpu(fake) == 1
    assert hostinfo.cpu_mhz(fake) == 3000.0  # cpufreq beats cpuinfo
    assert hostinfo.cpu_max_mhz(fake) == 4000.0
    assert hostinfo.governor(fake) == "performance"
    assert hostinfo.temperature_c(fake) == 55.0  # the package zone, not the hotter ACPI one
    assert hostinfo.cpu_model(fake.proc / "cpuinfo") == "Test CPU 9000"


def test_without_cpufreq_the_clock_comes_from_cpuinfo_for_our_cpu(fake: Roots) -> None:
    (fake.cpu_dir / "cpu1/cpufreq/scaling_cur_freq").unlink()
    assert hostinfo.cpu_mhz(fake) == 3400.5  # processor 1's block
    write(fake.proc / "self/stat", stat_line(7))  # a CPU cpuinfo does not list: the first
    assert hostinfo.cpu_mhz(fake) == 2100.0
    assert hostinfo.cpu_max_mhz(fake) is None and hostinfo.governor(fake) is None


def test_temperature_falls_back_to_cpu_hwmon_then_any_zone(fake: Roots) -> None:
    thermal = fake.sys / "class/thermal"
    (thermal / "thermal_zone1/type").write_text("gpu_thermal\n")
    hwmon = fake.sys / "class/hwmon"
    write(hwmon / "hwmon0/name", "nvme\n")
    write(hwmon / "hwmon0/temp1_input", "99000\n")
    write(hwmon / "hwmon1/name", "coretemp\n")
    write(hwmon / "hwmon1/temp1_input", "61000\n")
    write(hwmon / "hwmon1/temp2_input", "64000\n")
    assert hostinfo.temperature_c(fake) == 64.0  # hottest CPU core; the NVMe drive ignored
    for sensor in (hwmon / "hwmon1").glob("temp*_input"):
        sensor.unlink()
    assert hostinfo.temperature_c(fake) == 70.0  # no CPU sensor: the hottest zone


def test_an_empty_machine_reads_as_unknown(tmp_path: Path) -> None:
    empty = Roots(proc=tmp_path / "proc", sys=tmp_path / "sys")
    assert hostinfo.load_avg(empty) == []
    assert hostinfo.temperature_c(empty) is None
    assert hostinfo.cpu_max_mhz(empty) is None and hostinfo.governor(empty) is None
    assert hostinfo.cpu_mhz(empty) is None
    assert hostinfo.nvidia_driver(empty.proc / "driver/nvidia/version") is None
    assert hostinfo.cpu_model(empty.proc / "cpuinfo") == (
        platform.processor() or platform.machine() or "unknown"
    )
    now = snapshot(empty)
    assert (now.load_avg, now.cpu_mhz, now.temperature_c) == ([], None, None)


def test_nvidia_driver_version(tmp_path: Path) -> None:
    version = tmp_path / "version"
    version.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n"
        "GCC version:  gcc version 12.2.0\n"
    )
    assert hostinfo.nvidia_driver(version) == "550.54.14"


def test_snapshot_of_this_machine() -> None:
    first, second = snapshot(), snapshot()
    assert second.wall_s >= first.wall_s and second.process_cpu_s >= first.process_cpu_s
    if sys.platform.startswith("linux"):
        assert len(first.load_avg) == 3
    assert first.cpu_mhz is None or first.cpu_mhz > 0


# -- busy flags -------------------------------------------------------------------------------
def test_a_quiet_run_has_no_busy_reasons() -> None:
    before, after = snap(), snap(cpu_s=0.99, wall_s=1.0)
    share = provenance.cpu_share(before, after, threads=1)
    assert share == pytest.approx(0.99)
    assert busy_reasons(before, after, threads=1, cores=4, max_mhz=4000.0, share=share) == []


@pytest.mark.parametrize(
    ("before", "after", "threads", "share", "words"),
    [
        (snap(load=[6.5, 2.0, 1.0]), snap(), 1, 1.0, ["load average 6.50", "4 usable cores"]),
        (snap(), snap(mhz=2000.0), 1, 1.0, ["2000 MHz", "3000 MHz", "throttling"]),
        (snap(mhz=None), snap(mhz=3000.0), 1, 1.0, ["3000 MHz", "4000 MHz"]),  # vs the max
        (snap(), snap(), 1, 0.6, ["60% of a CPU", "descheduled"]),
        (snap(), snap(temp=93.0), 1, 1.0, ["temperature 93 C"]),
    ],
)
def test_each_busy_reason_says_what_and_how_much(
    before: Snapshot, after: Snapshot, threads: int, share: float, words: list[str]
) -> None:
    reasons = busy_reasons(before, after, threads=threads, cores=4, max_mhz=4000.0, share=share)
    assert len(reasons) == 1
    for word in words:
        assert word in reasons[0]


def test_other_processes_on_our_cores_while_timing_make_it_busy() -> None:
    # 10 s timed on 4 cores, one thread of ours busy all along
    before = snap(cpu_s=0.0, wall_s=0.0, cpus_busy_s=100.0)
    quiet = snap(cpu_s=10.0, wall_s=10.0, cpus_busy_s=100.0 + 10.0 + 30.0)  # others: 3 cores
    crowded = snap(cpu_s=10.0, wall_s=10.0, cpus_busy_s=100.0 + 10.0 + 34.0)  # others: 3.4
    assert provenance.others_cores(before, quiet) == pytest.approx(3.0)
    assert busy_reasons(before, quiet, threads=1, cores=4, max_mhz=None, share=1.0) == []
    (reason,) = busy_reasons(before, crowded, threads=1, cores=4, max_mhz=None, share=1.0)
    assert "other processes used 3.40 of the 4 usable cores" in reason


def test_the_cpu_times_of_the_timed_phase_overrule_a_lagging_load_average() -> None:
    # A minute of load that has ended: the load average still says so, the CPUs do not.
    before = snap(load=[6.5, 2.0, 1.0], cpus_busy_s=50.0)
    after = snap(load=[5.9, 2.0, 1.0], cpu_s=1.0, wall_s=1.0, cpus_busy_s=51.2)
    assert busy_reasons(before, after, threads=1, cores=4, max_mhz=None, share=1.0) == []


def test_cpu_busy_seconds_reads_the_usable_cpus_of_proc_stat(tmp_path) -> None:
    roots = hostinfo.Roots(proc=tmp_path / "proc", sys=tmp_path / "sys")
    write(
        roots.proc / "stat",
        "cpu  300 0 30 900 0 0 0 0 0 0\n"
        "cpu0 100 0 10 300 5 1 1 1 0 0\n"
        "cpu1 200 0 20 600 5 0 0 0 0 0\n"
        "intr 1 2 3\n",
    )
    tick = os.sysconf("SC_CLK_TCK")
    assert hostinfo.cpu_busy_seconds([0], roots) == pytest.approx(113 / tick)
    assert hostinfo.cpu_busy_seconds([], roots) == pytest.approx((113 + 220) / tick)
    assert hostinfo.cpu_busy_seconds([7], roots) is None
    assert hostinfo.cpu_busy_seconds([0], hostinfo.Roots(proc=tmp_path / "none")) is None


def test_low_share_is_normal_with_several_threads() -> None:
    reasons = busy_reasons(snap(), snap(), threads=4, cores=4, max_mhz=None, share=0.5)
    assert reasons == []


def test_cpu_share_over_threads() -> None:
    before, after = snap(cpu_s=1.0, wall_s=10.0), snap(cpu_s=4.0, wall_s=12.0)
    assert provenance.cpu_share(before, after, threads=2) == pytest.approx(0.75)
    assert provenance.cpu_share(after, after, threads=2) is None  # no time passed


# -- the whole record -------------------------------------------------------------------------
def test_build_provenance_fills_everything(fake: Roots) -> None:
    before = snap(load=[5000.0, 1.0, 1.0], mhz=3000.0, temp=50.0, cpu_s=0.0, wall_s=0.0)
    after = snap(mhz=3000.0, temp=51.0, cpu_s=0.5, wall_s=1.0)
    prov = build_provenance(
        runtime="onnxruntime",
        runtime_version="1.2.3",
        threads=1,
        before=before,
        after=after,
        interop_threads=1,
        roots=fake,
    )
    assert (prov.runtime, prov.runtime_version, prov.threads) == ("onnxruntime", "1.2.3", 1)
    assert prov.torch_version is None and prov.accelerator is None
    assert prov.hostname == socket.gethostname() and prov.machine == platform.machine()
    assert prov.python_version == platform.python_version()
    assert prov.cpu_model == "Test CPU 9000"
    assert prov.governor == "performance" and prov.cpu_max_mhz == 4000.0
    assert (prov.cpu_mhz_before, prov.cpu_mhz_after) == (3000.0, 3000.0)
    assert prov.load_avg_before == [5000.0, 1.0, 1.0] and prov.load_avg_after == after.load_avg
    assert (prov.temperature_c_before, prov.temperature_c_after) == (50.0, 51.0)
    assert prov.cpu_share == pytest.approx(0.5)
    if hasattr(os, "sched_getaffinity"):
        assert prov.cpu_affinity == sorted(os.sched_getaffinity(0))
    assert prov.busy and len(prov.busy_reasons) == 2  # the load, and half a CPU
    assert any("load average 5000.00" in r for r in prov.busy_reasons)
    assert any("50% of a CPU" in r for r in prov.busy_reasons)


def test_provenance_is_torch_free() -> None:
    code = "import sys, agent.provenance, agent.hostinfo; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
