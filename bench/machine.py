"""Where and when a benchmark ran, and what else the machine was doing: what every result
file records beside its numbers (the commit, the machine), and the CPU accounting that tells
a benchmark's own load from other users' work on a shared machine (Linux /proc)."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commit() -> str | None:
    """HEAD, marked `+dirty` when tracked files differ from it (the numbers belong to the
    tree); None outside a git checkout."""
    git = ["git", "-C", str(ROOT)]
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        head = subprocess.check_output([*git, "rev-parse", "--short", "HEAD"], text=True)
        dirty = subprocess.run([*git, "diff", "--quiet", "HEAD"], check=False).returncode
        return head.strip() + ("+dirty" if dirty else "")
    return None


def machine() -> dict:
    """Cores, CPU model, platform and Python of this machine."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    models = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return {
        "nproc": os.cpu_count(),
        "cpu": models[0] if models else platform.processor(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = values[3] + values[4]
    return (sum(values) - idle) / ticks, sum(values) / ticks


def tree_cpu_s(root: int | None) -> float:
    """CPU seconds of process `root` and its descendants, reaped children included."""
    if root is None:
        return 0.0
    stats = _stats()
    cpu = {pid: sum(int(f) for f in fields[11:15]) for pid, fields in stats.items()}
    return sum(cpu.get(p, 0) for p in _tree(root, stats)) / os.sysconf("SC_CLK_TCK")


def tree_peak_rss_mb(root: int) -> float:
    """The peak resident memory (VmHWM) of process `root` and its descendants, summed, in MB."""
    kb = 0
    for pid in _tree(root, _stats()):
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    kb += int(line.split()[1])
    return round(kb / 1024, 1)


def _stats() -> dict[int, list[str]]:
    """Every process's /proc/PID/stat fields after its name, by pid."""
    stats = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            stats[int(stat.parent.name)] = stat.read_text().rsplit(")", 1)[1].split()
    return stats


def _tree(root: int, stats: dict[int, list[str]]) -> set[int]:
    """Process `root` and its descendants, by their /proc stat fields (`_stats`)."""
    parent = {pid: int(fields[1]) for pid, fields in stats.items()}
    mine, todo = set(), [root]
    while todo:
        pid = todo.pop()
        mine.add(pid)
        todo.extend(p for p, pp in parent.items() if pp == pid and p not in mine)
    return mine
