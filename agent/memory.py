"""Process memory high-water marks on the CPU: what one candidate adds above its baseline.

Meant to run in a fresh child process per candidate, so that the high-water mark belongs to
that candidate alone. Before the baseline, the measuring code runs a throwaway model (see
`agent.in_process`) so the runtime's one-off initialisation is not charged to the candidate,
then `release_free_heap()` so that memory the throwaway freed is not silently reused by the
candidate without showing in RSS. Three methods, best first:

- Linux with a writable ``/proc/self/clear_refs``: writing "5" resets the peak RSS (VmHWM) to
  the current RSS; the baseline is the RSS at that moment.
- Linux without it: the baseline is the VmHWM before the build (imports included), so a
  model smaller than the import transient reads as 0.
- elsewhere: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` before and after.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from dataclasses import dataclass
from pathlib import Path

from archvocab.wire import MemoryReport

MIB = 1024 * 1024
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def read_status_kib(field: str, status: Path = _STATUS) -> int | None:
    """A ``kB`` field of /proc/self/status (VmRSS, VmHWM...), or None where unavailable."""
    try:
        text = status.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def _ru_maxrss_bytes() -> int | None:
    try:
        import resource
    except ImportError:  # Windows
        return None
    value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return value if sys.platform == "darwin" else value * 1024  # macOS reports bytes, Linux KiB


# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4
STEADY_HEAP = "glibc: no mmap, no trim (steady-state heap)"
_DEFAULT_THRESHOLD = 128 * 1024  # glibc's initial mmap and trim thresholds
FIXED_HEAP = "glibc: mmap and trim at a fixed 128 KiB (no sliding threshold)"


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def keep_heap() -> str:
    """Serve every allocation from the C heap and never give it back: a long-running
    inference process's steady state. Returns what was set, for the measurement's details.

    With glibc's defaults each forward pass maps and unmaps its large tensors (logits over a
    50k vocabulary: ~13 MB) or trims the heap top, and the page faults that follow cost each
    run 0 to 100% more depending on where the heap's dynamic thresholds drift: one GPT-2
    read 32 ms or 60 ms run to run, a 24% CV of the median over repeats. Peaks stay within a
    few percent of the default's. Call before the memory baseline.
    """
    libc = _libc()
    try:
        ok = libc is not None and libc.mallopt(_M_MMAP_MAX, 0) == 1
        ok = ok and libc.mallopt(_M_TRIM_THRESHOLD, -1) == 1
    except AttributeError:  # not glibc
        ok = False
    return STEADY_HEAP if ok else "default"


def fixed_heap() -> str:
    """glibc's default thresholds, pinned: every allocation of 128 KiB or more is a mapping of
    its own, returned to the OS when freed. Returns what was set, for the details.

    By default glibc slides the mmap threshold up to the size of each mapped block freed (up
    to 32 MiB), so whether a model's activations are mapped or carved from the heap depends
    on everything the process allocated before, down to how many runs a time-capped warm-up
    made: one GPT-2's peak read 107 MB in four fresh processes and 114 MB in the fifth.
    Setting the thresholds turns the sliding off, and the peak is the live tensors' own.
    """
    libc = _libc()
    try:
        ok = libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, _DEFAULT_THRESHOLD) == 1
        ok = ok and libc.mallopt(_M_TRIM_THRESHOLD, _DEFAULT_THRESHOLD) == 1
    except AttributeError:  # not glibc
        ok = False
    return FIXED_HEAP if ok else "default"


def release_free_heap() -> bool:
    """Return the C heap's free memory to the OS (glibc's malloc_trim); True if any went back.

    Freed-but-kept heap pages are resident: a candidate reusing them would not raise the RSS
    high-water mark, and its peak would read low.
    """
    libc = _libc()
    try:
        return libc is not None and bool(libc.malloc_trim(0))
    except AttributeError:  # not glibc (musl has no malloc_trim)
        return False


def _reset_hwm() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class MemoryProbe:
    """A baseline taken just before building; `peak_bytes()` reads the high-water mark since."""

    method: str
    baseline_bytes: int

    @classmethod
    def start(cls) -> MemoryProbe:
        """Take the baseline, resetting the high-water mark first where the kernel allows it."""
        if read_status_kib("VmHWM") is not None:
            if _reset_hwm():
                rss = read_status_kib("VmRSS") or 0
                return cls("rss_hwm_minus_baseline(clear_refs)", rss * 1024)
            return cls("rss_hwm_minus_prebuild_hwm", (read_status_kib("VmHWM") or 0) * 1024)
        maxrss = _ru_maxrss_bytes()
        if maxrss is not None:
            return cls("ru_maxrss_minus_prebuild", maxrss)
        return cls("unavailable", 0)

    def peak_bytes(self) -> int:
        """The process's high-water mark now, by the same method as the baseline."""
        if self.method.startswith("rss_hwm"):
            return (read_status_kib("VmHWM") or 0) * 1024
        if self.method.startswith("ru_maxrss"):
            return _ru_maxrss_bytes() or 0
        return 0

    def peak_above_baseline_bytes(self) -> int:
        return max(0, self.peak_bytes() - self.baseline_bytes)


def process_report(probe: MemoryProbe, weights_bytes: int) -> MemoryReport:
    """The CPU MemoryReport: the process peak above `probe`'s baseline is the primary kind."""
    return MemoryReport(
        primary="process_peak",
        process_peak_mb=probe.peak_above_baseline_bytes() / MIB,
        process_method=probe.method,
        process_baseline_mb=probe.baseline_bytes / MIB,
        weights_mb=weights_bytes / MIB,
    )
