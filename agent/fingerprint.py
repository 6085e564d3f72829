"""What this machine is: the DeviceFingerprint an agent registers with.

Linux first (/proc/cpuinfo via `agent.hostinfo`, /proc/meminfo), falling back to `platform`
and `os.sysconf`
elsewhere. Torch is asked in a short-lived subprocess so that the agent's long-running main
process never imports it (on a small board that saves a few hundred MB for the measuring
child).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from agent.hostinfo import cpu_model, usable_cores
from archvocab.wire import DeviceFingerprint, Runtime

__all__ = ["cpu_model", "device_fingerprint", "ram_bytes", "runtimes", "torch_info", "usable_cores"]

_TORCH_PROBE = (
    "import torch;"
    "print(torch.__version__);"
    "print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
)


def ram_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    """Total physical memory in bytes; 0 when it cannot be told."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 0


def torch_info(timeout_s: float = 120.0) -> tuple[str, str | None]:
    """(torch version, CUDA device name or None), asked of a fresh interpreter."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _TORCH_PROBE],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=True,
        )
        version, _, accelerator = done.stdout.strip().partition("\n")
        return version.strip(), (accelerator.strip() or None)
    except (OSError, subprocess.SubprocessError):
        try:
            return metadata.version("torch"), None
        except metadata.PackageNotFoundError:
            return "unknown", None


def runtimes() -> list[Runtime]:
    """Runtimes this agent can measure with: torch, and ONNX Runtime where it is installed.

    Looked up, not imported: the agent's process stays free of both.
    """
    found: list[Runtime] = ["torch"]
    if importlib.util.find_spec("onnxruntime") is not None:
        found.append("onnxruntime")
    return found


def device_fingerprint() -> DeviceFingerprint:
    """The fingerprint of the machine this runs on."""
    version, accelerator = torch_info()
    return DeviceFingerprint(
        hostname=(socket.gethostname() or "unknown")[:255],
        os=f"{platform.system()} {platform.release()}".strip()[:255] or "unknown",
        cpu_model=cpu_model(),
        machine=(platform.machine() or "unknown")[:64],
        cores=usable_cores(),
        ram_bytes=ram_bytes(),
        torch_version=version[:64],
        accelerator=accelerator[:255] if accelerator else None,
        runtimes=runtimes(),
    )
