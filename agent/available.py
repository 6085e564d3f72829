"""How much memory a measurement could use here right now, read without importing torch.

- CPU: the kernel's MemAvailable (/proc/meminfo), or less when this process's control group
  has a memory limit: the limit minus what the group uses, not counting page cache the kernel
  can drop (inactive files), at the group and every ancestor that has a limit (cgroup v2 and
  v1).
- CUDA: the GPU's free memory from NVML (libnvidia-ml, which ships with the driver), for the
  first device in CUDA_VISIBLE_DEVICES, else the only device, else the least free of all
  (NVML numbers devices in PCI order; CUDA by default fastest first).

Everything unreadable is None: the caller cannot check against it.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from agent.hostinfo import DEFAULT_ROOTS, Roots

_NO_LIMIT = 2**62  # cgroup v1 writes "no limit" as a huge number (9223372036854771712)
_NVML_LIBRARY = "libnvidia-ml.so.1"


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:  # "max": no limit
        return None


def meminfo_available(roots: Roots = DEFAULT_ROOTS) -> int | None:
    """MemAvailable of /proc/meminfo in bytes."""
    for line in (_read(roots.proc / "meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return int(line.split()[1]) * 1024
            except (IndexError, ValueError):
                return None
    return None


def _stat_field(path: Path, *names: str) -> int:
    fields = dict(line.split(None, 1) for line in (_read(path) or "").splitlines() if " " in line)
    for name in names:
        if name in fields:
            try:
                return int(fields[name])
            except ValueError:
                return 0
    return 0


def _group_dirs(roots: Roots) -> list[tuple[Path, str]]:
    """(directory, "v2" or "v1") of this process's memory cgroup, then each ancestor."""
    found = []
    for line in (_read(roots.proc / "self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            mounts, version = [roots.sys / "fs/cgroup", roots.sys / "fs/cgroup/unified"], "v2"
        elif "memory" in controllers.split(","):
            mounts, version = [roots.sys / "fs/cgroup/memory"], "v1"
        else:
            continue
        relative = Path(path.strip().lstrip("/"))
        for mount in mounts:
            for level in (relative, *relative.parents):
                found.append((mount / level, version))
    return found


def cgroup_headroom(roots: Roots = DEFAULT_ROOTS) -> int | None:
    """The least, over the limited groups this process is in, of limit minus working set."""
    headrooms = []
    for directory, version in _group_dirs(roots):
        if version == "v2":
            limit, usage = _int(directory / "memory.max"), _int(directory / "memory.current")
            cache = _stat_field(directory / "memory.stat", "inactive_file")
        else:
            limit = _int(directory / "memory.limit_in_bytes")
            usage = _int(directory / "memory.usage_in_bytes")
            cache = _stat_field(directory / "memory.stat", "total_inactive_file", "inactive_file")
        if limit is None or usage is None or limit >= _NO_LIMIT:
            continue
        headrooms.append(max(0, limit - max(0, usage - cache)))
    return min(headrooms, default=None)


def ram_available(roots: Roots = DEFAULT_ROOTS) -> int | None:
    """Bytes of RAM a new process could allocate now: MemAvailable, capped by the cgroup."""
    known = [v for v in (meminfo_available(roots), cgroup_headroom(roots)) if v is not None]
    return min(known, default=None)


class _NvmlMemory(ctypes.Structure):
    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


def _nvml_free(nvml: ctypes.CDLL, handle: ctypes.c_void_p) -> int | None:
    memory = _NvmlMemory()
    if nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) != 0:
        return None
    return int(memory.free)


def _nvml_handles(nvml: ctypes.CDLL, visible: str | None) -> list[ctypes.c_void_p]:
    first = (visible or "").split(",")[0].strip()
    if visible is not None and first.isdigit():
        indices = [int(first)]
    elif first.startswith("GPU-"):
        handle = ctypes.c_void_p()
        ok = nvml.nvmlDeviceGetHandleByUUID(first.encode(), ctypes.byref(handle)) == 0
        return [handle] if ok else []
    elif visible is not None:
        return []  # MIG instances or an empty list: NVML's device view does not apply
    else:
        count = ctypes.c_uint()
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return []
        indices = list(range(count.value))
    handles = []
    for index in indices:
        handle = ctypes.c_void_p()
        if nvml.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)) != 0:
            return []
        handles.append(handle)
    return handles


def cuda_free(library: str = _NVML_LIBRARY) -> int | None:
    """Free memory of the GPU a measurement would use, in bytes (None: no NVML or no GPU)."""
    try:
        nvml = ctypes.CDLL(library)
    except OSError:
        return None
    try:
        if nvml.nvmlInit_v2() != 0:
            return None
    except AttributeError:
        return None
    try:
        handles = _nvml_handles(nvml, os.environ.get("CUDA_VISIBLE_DEVICES"))
        free = [_nvml_free(nvml, handle) for handle in handles]
        return None if not free or None in free else min(f for f in free if f is not None)
    except AttributeError:  # a driver too old for these entry points
        return None
    finally:
        nvml.nvmlShutdown()


def available_bytes(device: str) -> int | None:
    """Memory free for a measurement on `device` ("cpu" or "cuda") now; None if unknown."""
    return cuda_free() if device == "cuda" else ram_available()
