"""The device fingerprint an agent registers with."""

from __future__ import annotations

import importlib.util
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from agent import fingerprint
from agent.fingerprint import cpu_model, device_fingerprint, ram_bytes, runtimes, usable_cores


def test_fingerprint_describes_this_machine() -> None:
    fp = device_fingerprint()
    assert fp.hostname == socket.gethostname()
    assert fp.machine == platform.machine()
    assert fp.os.startswith(platform.system())
    assert 1 <= fp.cores <= (os.cpu_count() or 1)
    assert fp.torch_version == torch.__version__
    expected = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    assert fp.accelerator == expected
    assert fp.cpu_model and fp.cpu_model != "unknown"
    if sys.platform.startswith("linux"):
        assert fp.ram_bytes > 2**27  # more than 128 MiB


def test_fingerprint_does_not_import_torch_in_this_process() -> None:
    # run in a fresh interpreter: the test process has torch already
    code = (
        "import sys; from agent.fingerprint import device_fingerprint as f; f();"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU\n",
            "Intel(R) Xeon(R) CPU",
        ),
        (
            "processor\t: 0\nBogoMIPS\t: 108.00\n\n"
            "Hardware\t: BCM2835\nModel\t: Raspberry Pi 4 Model B Rev 1.4\n",
            "Raspberry Pi 4 Model B Rev 1.4",
        ),
    ],
)
def test_cpu_model_from_cpuinfo(tmp_path: Path, text: str, expected: str) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    assert cpu_model(cpuinfo) == expected


def test_cpu_model_without_cpuinfo_falls_back_to_platform(tmp_path: Path) -> None:
    assert cpu_model(tmp_path / "missing") == (
        platform.processor() or platform.machine() or "unknown"
    )


def test_ram_bytes_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:        8000000 kB\nMemFree:         100 kB\n")
    assert ram_bytes(meminfo) == 8000000 * 1024
    assert ram_bytes(tmp_path / "missing") >= 0  # sysconf, or 0 where it cannot tell


def test_usable_cores_is_positive() -> None:
    assert usable_cores() >= 1


def test_runtimes_list_onnxruntime_only_where_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert device_fingerprint().runtimes == runtimes()
    installed = importlib.util.find_spec("onnxruntime") is not None
    assert runtimes() == (["torch", "onnxruntime"] if installed else ["torch"])
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return object() if name == "onnxruntime" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(fingerprint, "_ORT_PROBE", "print('1.0')")
    assert runtimes() == ["torch", "onnxruntime"]


def test_an_onnxruntime_that_crashes_at_import_is_not_offered(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # What onnxruntime 1.23+ does under qemu user-mode emulation: SIGSEGV while importing.
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: object())
    crash = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    monkeypatch.setattr(fingerprint, "_ORT_PROBE", crash)
    with caplog.at_level("WARNING", logger="agent.fingerprint"):
        assert runtimes() == ["torch"]
    assert "its import fails (signal 11)" in caplog.text


def test_runtimes_are_looked_up_not_imported() -> None:
    code = (
        "import sys; from agent.fingerprint import runtimes; runtimes();"
        "print('onnxruntime' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
