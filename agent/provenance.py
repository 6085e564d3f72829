"""Where and under what conditions a measurement was taken, and whether the machine looked busy.

Torch-free (standard library and archvocab only), so the ONNX Runtime child can use it too.
A measuring process takes a `snapshot()` before and after its timed phase and turns the pair
into a `Provenance` with `build_provenance`. The readers behind it live in `agent.hostinfo`;
both take the /proc and /sys roots (`Roots`) so tests can point them at fake trees.
"""

from __future__ import annotations

import platform
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass

from agent.hostinfo import (
    DEFAULT_ROOTS,
    Roots,
    cpu_affinity,
    cpu_busy_seconds,
    cpu_max_mhz,
    cpu_mhz,
    cpu_model,
    governor,
    load_avg,
    nvidia_driver,
    temperature_c,
    usable_cores,
)
from archvocab.wire import Provenance

__all__ = [
    "Roots",
    "Snapshot",
    "build_provenance",
    "busy_reasons",
    "cpu_share",
    "nvidia_driver",
    "snapshot",
]

HOT_C = 90.0
FREQ_DROP = 0.9  # the clock fell below 90% of where it was: thermal or power throttling
MIN_CPU_SHARE = 0.85  # a single-threaded run that got less than this was descheduled
# Other processes may use the cores our threads leave free, plus this much, while we time.
OTHERS_SLACK_CORES = 0.25


@dataclass(frozen=True)
class Snapshot:
    """Conditions at one moment."""

    load_avg: list[float]  # /proc/loadavg or os.getloadavg(); [] when unreadable
    cpu_mhz: float | None  # current clock of the CPU we last ran on
    temperature_c: float | None  # CPU thermal zone or hwmon sensor; None when unreadable
    process_cpu_s: float  # time.process_time()
    wall_s: float  # time.perf_counter()
    # Non-idle seconds of our usable CPUs, by every process (/proc/stat); None when unreadable.
    cpus_busy_s: float | None = None


def snapshot(roots: Roots = DEFAULT_ROOTS) -> Snapshot:
    """The machine's conditions now, as far as this OS lets us read them."""
    return Snapshot(
        load_avg=load_avg(roots),
        cpu_mhz=cpu_mhz(roots),
        temperature_c=temperature_c(roots),
        process_cpu_s=time.process_time(),
        wall_s=time.perf_counter(),
        cpus_busy_s=cpu_busy_seconds(cpu_affinity(), roots),
    )


def cpu_share(before: Snapshot, after: Snapshot, threads: int) -> float | None:
    """Process CPU time over wall time x threads between two snapshots."""
    wall = after.wall_s - before.wall_s
    if wall <= 0 or threads < 1:
        return None
    return max(0.0, (after.process_cpu_s - before.process_cpu_s) / (wall * threads))


def others_cores(before: Snapshot, after: Snapshot) -> float | None:
    """Cores' worth of our usable CPUs that other processes used between two snapshots: all
    non-idle CPU time there minus our own, over the wall time."""
    wall = after.wall_s - before.wall_s
    if before.cpus_busy_s is None or after.cpus_busy_s is None or wall <= 0:
        return None
    ours = after.process_cpu_s - before.process_cpu_s
    return max(0.0, (after.cpus_busy_s - before.cpus_busy_s - ours) / wall)


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
    # What ran beside us during the timed phase itself; the load average (a minute's decaying
    # mean, which lags by a minute either way) only where the CPU times cannot be read.
    others = others_cores(before, after)
    if others is not None:
        if others > cores - threads + OTHERS_SLACK_CORES:
            reasons.append(
                f"other processes used {others:.2f} of the {cores} usable cores while timing "
                f"({threads} thread(s) of ours; more than {cores - threads + OTHERS_SLACK_CORES:g})"
            )
    elif before.load_avg and before.load_avg[0] > cores:
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
    accelerator_reasons: Sequence[str] = (),
    roots: Roots = DEFAULT_ROOTS,
) -> Provenance:
    """The Provenance of a measurement whose timed phase ran between `before` and `after`.

    With an `accelerator`, the CPU share is recorded but not tested: the timed phase is the
    host waiting on the device (CUDA synchronisation spins or sleeps, as the driver decides),
    so the share says nothing about our thread being descheduled, and a low one is no sign of
    a disturbed timing. The accelerator's own signs (`accelerator_reasons`, from NVML: see
    `agent.nvml`) stand in for it.
    """
    share = cpu_share(before, after, threads)
    max_mhz = cpu_max_mhz(roots)
    affinity = cpu_affinity()
    reasons = busy_reasons(
        before,
        after,
        threads=threads,
        cores=len(affinity) or usable_cores(),
        max_mhz=max_mhz,
        share=share if accelerator is None else None,
    )
    reasons += accelerator_reasons
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
