"""What this machine is: the DeviceFingerprint an agent registers with.

Linux first (/proc/cpuinfo via `agent.hostinfo`, /proc/meminfo), falling back to `platform`
and `os.sysconf`
elsewhere. Torch is asked in a short-lived subprocess so that the agent's long-running main
process never imports it (on a small board that saves a few hundred MB for the measuring
child).
"""

from __future__ import annotations

import importlib.util
import logging
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

logger = logging.getLogger(__name__)

# Importing is the test: an onnxruntime wheel can install and still crash at import (1.23+
# under qemu user-mode emulation dies with SIGSEGV), and an agent must not offer it then.
_ORT_PROBE = "import onnxruntime; print(onnxruntime.__version__)"
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


def onnxruntime_usable(timeout_s: float = 120.0) -> bool:
    """Whether ONNX Runtime is installed and imports, asked of a fresh interpreter."""
    if importlib.util.find_spec("onnxruntime") is None:
        return False
    try:
        subprocess.run(
            [sys.executable, "-c", _ORT_PROBE],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=True,
        )
    except subprocess.CalledProcessError as exc:
        how = f"signal {-exc.returncode}" if exc.returncode < 0 else f"exit {exc.returncode}"
        logger.warning(
            "onnxruntime is installed but its import fails (%s): %s; not offering it",
            how,
            (exc.stderr or "").strip()[-300:],
        )
        return False
    except (OSError, subprocess.SubprocessError) as exc:
        logger.warning("onnxruntime import could not be checked (%s); not offering it", exc)
        return False
    return True


def runtimes() -> list[Runtime]:
    """Runtimes this agent can measure with: torch, and ONNX Runtime where it imports.

    Checked in a subprocess, not imported here: the agent's process stays free of both.
    """
    found: list[Runtime] = ["torch"]
    if onnxruntime_usable():
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
