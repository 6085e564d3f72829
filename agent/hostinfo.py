"""What this machine is doing now, read from /proc and /sys: load, clocks, temperature, CPU.

Standard library only (the ONNX Runtime measuring process uses it too). Every reader takes the
/proc and /sys roots (`Roots`) so tests can point them at fake trees; what cannot be read is
None or [].
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

# /proc/cpuinfo names the CPU in different fields on x86, ARM boards and POWER.
_CPU_FIELDS = ("model name", "Model", "Hardware", "cpu model", "cpu")
# Thermal zone types that are the CPU package or cores, best first; hwmon drivers likewise.
_CPU_ZONE_TYPES = ("x86_pkg_temp", "cpu", "soc", "pkg", "core", "package")
_CPU_HWMON_NAMES = ("coretemp", "k10temp", "zenpower", "cpu_thermal", "soc_thermal")


@dataclass(frozen=True)
class Roots:
    """Where /proc and /sys are (tests pass fake trees)."""

    proc: Path = Path("/proc")
    sys: Path = Path("/sys")

    @property
    def cpu_dir(self) -> Path:
        return self.sys / "devices/system/cpu"


DEFAULT_ROOTS = Roots()


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


def cpu_busy_seconds(cpus: list[int], roots: Roots = DEFAULT_ROOTS) -> float | None:
    """Seconds the CPUs in `cpus` (all of them when empty) have spent not idle since boot, by
    every process: /proc/stat's per-CPU user, nice, system, irq, softirq and steal times.
    None where /proc/stat is unreadable."""
    text = _read(roots.proc / "stat")
    if text is None:
        return None
    wanted = {f"cpu{n}" for n in cpus}
    ticks = 0
    found = False
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or (wanted and name not in wanted):
            continue
        fields = rest.split()
        try:
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
        except ValueError:
            return None
        ticks += user + nice + system + irq + softirq + steal
        found = True
    if not found:
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


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
    return (text.strip()[:64] or None) if text else None


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
