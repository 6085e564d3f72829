"""Where and under what conditions a measurement was taken, and whether the machine looked busy.

Torch-free (standard library and archvocab only), so the ONNX Runtime child can use it too.
A measuring process takes a `snapshot()` before and after its timed phase and turns the pair
into a `Provenance` with `build_provenance`. Every reader takes the /proc and /sys roots as
arguments so tests can point them at fake trees; what cannot be read is None or [].
"""

from __future__ import annotations

import os
import platform
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from archvocab.wire import Provenance

# /proc/cpuinfo names the CPU in different fields on x86, ARM boards and POWER.
_CPU_FIELDS = ("model name", "Model", "Hardware", "cpu model", "cpu")
# Thermal zone types that are the CPU package or cores, best first; hwmon drivers likewise.
_CPU_ZONE_TYPES = ("x86_pkg_temp", "cpu", "soc", "pkg", "core", "package")
_CPU_HWMON_NAMES = ("coretemp", "k10temp", "zenpower", "cpu_thermal", "soc_thermal")

HOT_C = 90.0
FREQ_DROP = 0.9  # the clock fell below 90% of where it was: thermal or power throttling
MIN_CPU_SHARE = 0.85  # a single-threaded run that got less than this was descheduled


@dataclass(frozen=True)
class Roots:
    """Where /proc and /sys are (tests pass fake trees)."""

    proc: Path = Path("/proc")
    sys: Path = Path("/sys")

    @property
    def cpu_dir(self) -> Path:
        return self.sys / "devices/system/cpu"


DEFAULT_ROOTS = Roots()


@dataclass(frozen=True)
class Snapshot:
    """Conditions at one moment."""

    load_avg: list[float]  # /proc/loadavg or os.getloadavg(); [] when unreadable
    cpu_mhz: float | None  # current clock of the CPU we last ran on
    temperature_c: float | None  # CPU thermal zone or hwmon sensor; None when unreadable
    process_cpu_s: float  # time.process_time()
    wall_s: float  # time.perf_counter()


def snapshot(roots: Roots = DEFAULT_ROOTS) -> Snapshot:
    """The machine's conditions now, as far as this OS lets us read them."""
    return Snapshot(
        load_avg=load_avg(roots),
        cpu_mhz=cpu_mhz(roots),
        temperature_c=temperature_c(roots),
        process_cpu_s=time.process_time(),
        wall_s=time.perf_counter(),
    )


# -- readers ----------------------------------------------------------------------------------
def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _read_float(path: Path) -> float | None:
    text = _read(path)
    try:
        return float(text.strip()) if text else None
    except ValueError:
        return None


def load_avg(roots: Roots = DEFAULT_ROOTS) -> list[float]:
    """The 1, 5 and 15 minute load averages; [] when unreadable."""
    text = _read(roots.proc / "loadavg")
    if text is not None:
        try:
            return [float(v) for v in text.split()[:3]]
        except ValueError:
            return []
    if roots != DEFAULT_ROOTS:
        return []
    try:
        return [float(v) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return []


def cpu_affinity() -> list[int]:
    """The CPUs this process may run on (empty where the OS does not say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    return len(cpu_affinity()) or max(1, os.cpu_count() or 1)


def current_cpu(roots: Roots = DEFAULT_ROOTS) -> int | None:
    """The CPU this process last ran on (field 39 of /proc/self/stat), else the first allowed."""
    text = _read(roots.proc / "self/stat")
    if text and ")" in text:
        fields = text.rsplit(")", 1)[1].split()
        try:
            return int(fields[36])  # fields after the command name start at field 3
        except (IndexError, ValueError):
            pass
    allowed = cpu_affinity()
    return allowed[0] if allowed else None


def _cpufreq(roots: Roots, name: str, cpu: int | None) -> str | None:
    if cpu is None:
        return None
    return _read(roots.cpu_dir / f"cpu{cpu}/cpufreq/{name}")


def _cpuinfo_mhz(roots: Roots, cpu: int | None) -> float | None:
    """ "cpu MHz" of `cpu`'s block in /proc/cpuinfo, else of the first block that has one."""
    text = _read(roots.proc / "cpuinfo") or ""
    current, found = None, {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key == "processor":
            current = int(value) if value.strip().isdigit() else None
        elif sep and key == "cpu MHz":
            try:
                found.setdefault(current, float(value))
            except ValueError:
                continue
    if cpu in found:
        return found[cpu]
    return next(iter(found.values()), None)


def cpu_mhz(roots: Roots = DEFAULT_ROOTS) -> float | None:
    """The current clock of the CPU we run on: cpufreq's scaling_cur_freq, else cpuinfo."""
    cpu = current_cpu(roots)
    khz = _cpufreq(roots, "scaling_cur_freq", cpu)
    try:
        return float(khz) / 1000.0 if khz else _cpuinfo_mhz(roots, cpu)
    except ValueError:
        return _cpuinfo_mhz(roots, cpu)


def cpu_max_mhz(roots: Roots = DEFAULT_ROOTS) -> float | None:
    khz = _cpufreq(roots, "cpuinfo_max_freq", current_cpu(roots))
    try:
        return float(khz) / 1000.0 if khz else None
    except ValueError:
        return None


def governor(roots: Roots = DEFAULT_ROOTS) -> str | None:
    text = _cpufreq(roots, "scaling_governor", current_cpu(roots))
    return text.strip()[:64] or None if text else None


def _zone_temps(roots: Roots) -> list[tuple[str, float]]:
    zones = []
    for zone in sorted((roots.sys / "class/thermal").glob("thermal_zone*")):
        kind = (_read(zone / "type") or "").strip().lower()
        milli = _read_float(zone / "temp")
        if milli is not None:
            zones.append((kind, milli / 1000.0))
    return zones


def _hwmon_temps(roots: Roots) -> list[tuple[str, float]]:
    temps = []
    for hwmon in sorted((roots.sys / "class/hwmon").glob("hwmon*")):
        name = (_read(hwmon / "name") or "").strip().lower()
        for sensor in sorted(hwmon.glob("temp*_input")):
            milli = _read_float(sensor)
            if milli is not None:
                temps.append((name, milli / 1000.0))
    return temps


def temperature_c(roots: Roots = DEFAULT_ROOTS) -> float | None:
    """The hottest CPU sensor: CPU thermal zones first, then CPU hwmon drivers, then any zone."""
    zones = _zone_temps(roots)
    for wanted in _CPU_ZONE_TYPES:
        hits = [t for kind, t in zones if wanted in kind]
        if hits:
            return max(hits)
    hwmon = [t for name, t in _hwmon_temps(roots) if name in _CPU_HWMON_NAMES]
    if hwmon:
        return max(hwmon)
    return max((t for _, t in zones), default=None)


def cpu_model(cpuinfo: Path = DEFAULT_ROOTS.proc / "cpuinfo") -> str:
    """The CPU's marketing name, or the best `platform` can tell."""
    fields: dict[str, str] = {}
    for line in (_read(cpuinfo) or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip():
            fields.setdefault(key.strip(), value.strip())
    for name in _CPU_FIELDS:
        if name in fields:
            return fields[name][:255]
    return (platform.processor() or platform.machine() or "unknown")[:255]


def nvidia_driver(path: Path = DEFAULT_ROOTS.proc / "driver/nvidia/version") -> str | None:
    """The NVIDIA kernel driver version ("NVRM version: ... 550.54.14 ..."), None elsewhere."""
    text = _read(path)
    if not text:
        return None
    first = text.splitlines()[0]
    for word in first.split():
        if word[:1].isdigit() and "." in word:
            return word[:255]
    return first.strip()[:255] or None


# -- provenance -------------------------------------------------------------------------------
def cpu_share(before: Snapshot, after: Snapshot, threads: int) -> float | None:
    """Process CPU time over wall time x threads between two snapshots."""
    wall = after.wall_s - before.wall_s
    if wall <= 0 or threads < 1:
        return None
    return max(0.0, (after.process_cpu_s - before.process_cpu_s) / (wall * threads))


def busy_reasons(
    before: Snapshot,
    after: Snapshot,
    *,
    threads: int,
    cores: int,
    max_mhz: float | None,
    share: float | None,
) -> list[str]:
    """Why the numbers may be disturbed, one short sentence each; [] when all looked quiet."""
    reasons = []
    if before.load_avg and before.load_avg[0] > cores:
        reasons.append(
            f"1-minute load average {before.load_avg[0]:.2f} exceeded the {cores} usable cores"
        )
    # Compare the clock with itself before the timed phase; with no reading then, with the max.
    reference = before.cpu_mhz or max_mhz
    if after.cpu_mhz and reference and after.cpu_mhz < FREQ_DROP * reference:
        reasons.append(
            f"CPU clock fell to {after.cpu_mhz:.0f} MHz from {reference:.0f} MHz "
            f"(below {FREQ_DROP:.0%}): throttling"
        )
    if threads == 1 and share is not None and share < MIN_CPU_SHARE:
        reasons.append(
            f"the process got {share:.0%} of a CPU while timing (descheduled; "
            f"below {MIN_CPU_SHARE:.0%})"
        )
    hottest = max(
        (t for t in (before.temperature_c, after.temperature_c) if t is not None), default=None
    )
    if hottest is not None and hottest >= HOT_C:
        reasons.append(f"CPU temperature {hottest:.0f} C (>= {HOT_C:.0f} C)")
    return reasons


def build_provenance(
    *,
    runtime: str,
    runtime_version: str,
    threads: int,
    before: Snapshot,
    after: Snapshot,
    interop_threads: int | None = None,
    torch_version: str | None = None,
    torch_build: str | None = None,
    accelerator: str | None = None,
    accelerator_driver: str | None = None,
    cuda_version: str | None = None,
    roots: Roots = DEFAULT_ROOTS,
) -> Provenance:
    """The Provenance of a measurement whose timed phase ran between `before` and `after`."""
    share = cpu_share(before, after, threads)
    max_mhz = cpu_max_mhz(roots)
    affinity = cpu_affinity()
    reasons = busy_reasons(
        before,
        after,
        threads=threads,
        cores=len(affinity) or usable_cores(),
        max_mhz=max_mhz,
        share=share,
    )
    return Provenance(
        runtime=runtime[:64],
        runtime_version=runtime_version[:64],
        torch_version=torch_version[:64] if torch_version else None,
        torch_build=torch_build[:500] if torch_build else None,
        python_version=platform.python_version(),
        hostname=(socket.gethostname() or "unknown")[:255],
        machine=(platform.machine() or "unknown")[:64],
        cpu_model=cpu_model(roots.proc / "cpuinfo"),
        threads=threads,
        interop_threads=interop_threads,
        cpu_affinity=affinity[:4096],
        governor=governor(roots),
        cpu_mhz_before=before.cpu_mhz,
        cpu_mhz_after=after.cpu_mhz,
        cpu_max_mhz=max_mhz,
        load_avg_before=before.load_avg[:3],
        load_avg_after=after.load_avg[:3],
        cpu_share=share,
        temperature_c_before=before.temperature_c,
        temperature_c_after=after.temperature_c,
        accelerator=accelerator[:255] if accelerator else None,
        accelerator_driver=accelerator_driver[:255] if accelerator_driver else None,
        cuda_version=cuda_version[:64] if cuda_version else None,
        busy=bool(reasons),
        busy_reasons=reasons[:20],
    )
