"""A synthetic device: deterministic measurements for servers under test, no torch needed.

`synthetic_measurement(spec)` is a complete MeasurementResult (as JSON) for a GPT-2 spec
whose cost grows with the model's size, plus a per-architecture wobble so that rankings are
not a function of size alone; `FINGERPRINT` is the device it claims to run on. Tests report
it for their agents (tests/factories.py: play_agent); bench/load.py's simulated agents too.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

FINGERPRINT = {
    "hostname": "test-host",
    "os": "Linux",
    "cpu_model": "test cpu",
    "machine": "x86_64",
    "cores": 2,
    "ram_bytes": 2**34,
    "torch_version": "2.13.0",
    "accelerator": None,
}


def synthetic_measurement(spec: dict[str, Any], busy: bool = False) -> dict[str, Any]:
    """Deterministic stand-in for a device: cost grows with size, plus a per-arch wobble."""
    size = spec["d_model"] * sum(spec["d_inner"]) + spec["n_layer"] * spec["d_model"] ** 2
    wobble = int(hashlib.sha256(repr(spec).encode()).hexdigest()[:4], 16) / 65535
    latency = 1.0 + size / 1e5 * (0.8 + 0.4 * wobble)
    memory = 5.0 + size / 2e5 * (1.2 - 0.4 * wobble) + spec["d_embed"] / 64
    samples = [latency * f for f in (0.99, 1.0, 1.0, 1.01, 1.02)]
    return {
        "latency_ms": latency,
        "peak_memory_mb": memory,
        "latency": {
            "median_ms": latency,
            "p90_ms": samples[-1],
            "min_ms": samples[0],
            "iqr_ms": samples[3] - samples[1],
            "ci_low_ms": samples[0],
            "ci_high_ms": samples[-1],
            "ci_rel": 0.02,
            "confidence": 0.95,
            "samples": len(samples),
            "inner_repeats": 1,
            "samples_ms": samples,
            "stop_reason": "ci_target",
            "warmup_runs": 3,
            "warmup_s": 0.01,
            "warmup_stable": True,
            "timed_s": sum(samples) / 1000,
        },
        "memory": {
            "primary": "process_peak",
            "process_peak_mb": memory,
            "process_method": "synthetic",
            "process_baseline_mb": 100.0,
            "weights_mb": memory / 2,
        },
        "build_s": 0.01,
        "total_s": 0.05,
        "provenance": {
            "runtime": "torch",
            "runtime_version": "2.13.0",
            "torch_version": "2.13.0",
            "python_version": "3.11.7",
            "hostname": FINGERPRINT["hostname"],
            "machine": FINGERPRINT["machine"],
            "cpu_model": FINGERPRINT["cpu_model"],
            "threads": 1,
            "load_avg_before": [3.5, 1.0, 1.0] if busy else [0.1, 0.1, 0.1],
            "load_avg_after": [0.1, 0.1, 0.1],
            "busy": busy,
            "busy_reasons": ["1-minute load 3.5 exceeds 2 usable cores"] if busy else [],
        },
    }


READINGS_FROM = datetime(2026, 11, 1, tzinfo=UTC)


def reference_reading(arch_id: str, n: int) -> dict[str, Any]:
    """The `n`-th reading of a search's reference architecture `arch_id` on the synthetic
    device, taken a minute after the one before: about 10 ms and 50 MB, moving by a few
    percent from reading to reading, as a quiet device's would."""
    wobble = int(hashlib.sha256(f"{arch_id}:{n}".encode()).hexdigest()[:4], 16) / 65535
    return {
        "arch_id": arch_id,
        "latency_ms": 10.0 * (0.97 + 0.06 * wobble),
        "peak_memory_mb": 50.0 * (0.995 + 0.01 * wobble),
        "measured_at": (READINGS_FROM + timedelta(minutes=n)).isoformat(),
    }
