"""Load for a benchmark run: processes that compete for the CPU (pure-Python busy loops) or
for memory bandwidth and the last-level cache (copies between two large arrays), which die
with the benchmark, and a sampler of the load average and machine CPU use per phase."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from bench.machine import machine_busy

MEMORY_LOAD_MB = 256  # per array, two per process: far past any last-level cache
# Load processes die with this one even when it is killed outright (Linux), so none is left
# competing with whatever runs on the machine next.
DIE_WITH_PARENT = (
    "import ctypes, signal, sys\n"
    "if sys.platform == 'linux': ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"  # PDEATHSIG
)


@contextmanager
def load_processes(code: str, count: int) -> Iterator[list[subprocess.Popen]]:
    """`count` processes running `code` for as long as the block runs, however it ends."""
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(count):
            procs.append(subprocess.Popen([sys.executable, "-c", DIE_WITH_PARENT + code]))
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def busy_loops(count: int) -> AbstractContextManager[list[subprocess.Popen]]:
    """`count` processes spinning in pure Python: CPU only, no memory traffic."""
    return load_processes("while True: pass", count)


def memory_streams(
    count: int, mb: int = MEMORY_LOAD_MB
) -> AbstractContextManager[list[subprocess.Popen]]:
    """`count` processes copying one `mb` MB array into another, over and over: they compete
    for memory bandwidth and cache, which spinners do not."""
    stream = (
        "import numpy as np\n"
        f"a = np.ones({mb} << 20, np.uint8)\n"
        "b = np.zeros_like(a)\n"
        "while True: np.copyto(b, a)\n"
    )
    return load_processes(stream, count)


LOADS = {"spin": busy_loops, "memory": memory_streams}


class LoadSampler:
    """The 1-minute load average every `every_s` seconds, and the machine's busy CPU share,
    per named phase."""

    def __init__(self, every_s: float = 2.0) -> None:
        self.every_s = every_s
        self.phases: dict[str, dict[str, Any]] = {}
        self._phase: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.phase(None)
        self._stop.set()
        self._thread.join()

    def phase(self, name: str | None) -> None:
        """End the current phase and start `name` (None: none)."""
        busy, total = machine_busy()
        if self._phase is not None:
            p = self.phases[self._phase]
            p["cpu_busy_share"] = (busy - p.pop("_busy")) / max(total - p.pop("_total"), 1e-9)
        self._phase = name
        if name is not None:
            self.phases[name] = {"loadavg_1m": [], "_busy": busy, "_total": total}

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            phase = self._phase
            if phase is not None:
                self.phases[phase]["loadavg_1m"].append(os.getloadavg()[0])

    def summary(self) -> dict[str, dict[str, float | None]]:
        out = {}
        for name, p in self.phases.items():
            samples = p["loadavg_1m"]
            out[name] = {
                "loadavg_1m_mean": statistics.fmean(samples) if samples else None,
                "loadavg_1m_max": max(samples) if samples else None,
                "cpu_busy_share": p.get("cpu_busy_share"),
            }
        return out
