"""A real agent process whose device is a replay of real measurements (`bench/replay.py`).

It runs the agent's own `Worker` (register -> claim -> measure -> report, heartbeats, retries)
against a real server over HTTP; only the measuring step is replaced: instead of building
the model in a fresh process, it looks the spec up in the device table
(`DeviceReplay.measure`: exact for measured architectures, interpolated for the rest), sleeps
the device-seconds that measurement took on the real device times `--time-scale`, and reports
a `MeasurementResult` with the replayed latency and memory. `total_s` is the unscaled
device time, so the server's device-seconds are the real device's.

So several such processes on one small machine behave, as far as the server can tell, like
several devices that each take the real device's time per candidate (scaled), without
competing for its cores the way real measurements would.

    .venv/bin/python -m bench.replay_agent --server http://127.0.0.1:8000 --device-class replay
        [--time-scale 0.2] [--table bench/data/device_table_gpt2_cpu.json] [--exit-when-idle S]
        [--poll-interval 0.2] [--name NAME]

It is an agent: it imports the agent and the architecture vocabulary (and the replay, which
needs numpy and the analytic proxies), never the server or the search code.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import platform
import socket
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from agent.cli import AGENT_TOKEN_ENV, stop_on_signals
from agent.client import AgentClient
from agent.guard import Guard
from agent.measure import CancelFlag, MeasurementCancelled
from agent.worker import Worker
from archvocab.registry import parse_spec
from archvocab.wire import (
    AgentRegistration,
    DeviceFingerprint,
    Failure,
    LatencyStats,
    MeasurementResult,
    MeasurementSettings,
    MemoryReport,
    Provenance,
    ProxyRequest,
)
from bench.replay import DEFAULT_TABLE, NOISE_CV, DeviceReplay
from proxies.params import total_params

logger = logging.getLogger("bench.replay_agent")
HTTP_TIMEOUT_S = 30.0
SAMPLES = 11  # timed samples reported per measurement (the replay has only the median)
_SLEEP_STEP_S = 0.05  # how often the simulated measurement looks at its cancel flag


class ReplayDevice:
    """The `measure` of a Worker: replay the spec, sleep its scaled device time, report.

    Called as the agent calls `agent.measure.measure_candidate`:
    ``device(spec, settings, cancel=..., proxies=...)`` -> MeasurementResult or Failure.
    Jobs measured with other settings than the table's, or asking for low-cost proxies, fail
    (the table cannot say what they would have measured).
    """

    def __init__(self, replay: DeviceReplay, time_scale: float = 1.0) -> None:
        if time_scale < 0:
            raise ValueError(f"time_scale must be >= 0, got {time_scale}")
        self.replay = replay
        self.time_scale = time_scale
        self._settings_key = (
            MeasurementSettings.model_validate(replay.settings).cache_key()
            if replay.settings
            else None
        )
        self.fingerprint = replay_fingerprint(replay)

    def __call__(
        self,
        spec: Mapping[str, Any],
        settings: MeasurementSettings,
        *,
        cancel: CancelFlag | None = None,
        proxies: ProxyRequest | None = None,
    ) -> MeasurementResult | Failure:
        if self._settings_key is not None and settings.cache_key() != self._settings_key:
            return Failure(
                kind="error",
                message="replay agent: the job's measurement settings differ from those the "
                "device table was measured with",
            )
        if proxies is not None and proxies.names:
            return Failure(
                kind="error",
                message=f"replay agent: cannot compute low-cost proxies {proxies.names}",
            )
        parsed = parse_spec(spec)  # an invalid spec raises: the Worker reports it as an error
        got = self.replay.measure(parsed)
        slept = self._sleep(got.wall_s * self.time_scale, cancel)
        return self._result(parsed, got, settings, slept)

    @staticmethod
    def _sleep(seconds: float, cancel: CancelFlag | None) -> float:
        """Sleep `seconds` of simulated device time; MeasurementCancelled if cancelled."""
        start = time.monotonic()
        deadline = start + seconds
        while True:
            if cancel is not None and cancel.is_set():
                raise MeasurementCancelled()
            left = deadline - time.monotonic()
            if left <= 0:
                return time.monotonic() - start
            time.sleep(min(_SLEEP_STEP_S, left))

    def _result(
        self, spec: Any, got: Any, settings: MeasurementSettings, slept_s: float
    ) -> MeasurementResult:
        latency = got.latency_ms
        samples = _samples(spec.arch_id, latency)
        ordered = sorted(samples)
        q1, _, q3 = statistics.quantiles(samples, n=4)
        half = 1.96 * NOISE_CV * latency / len(samples) ** 0.5
        # The table keeps only the whole device time: split it roughly as a torch measurement
        # with the default settings spends it (build, warm-up, timed phase).
        build_s, warmup_s, timed_s = (share * got.wall_s for share in (0.3, 0.1, 0.6))
        weights_mb = total_params(spec) * 4 / 2**20
        fp = self.fingerprint
        return MeasurementResult(
            latency_ms=latency,
            peak_memory_mb=got.memory_mb,
            latency=LatencyStats(
                median_ms=latency,
                p90_ms=ordered[int(0.9 * (len(ordered) - 1))],
                min_ms=ordered[0],
                iqr_ms=max(0.0, q3 - q1),
                ci_low_ms=max(0.0, latency - half),
                ci_high_ms=latency + half,
                ci_rel=half / latency if latency > 0 else 0.0,
                confidence=settings.confidence,
                samples=len(samples),
                inner_repeats=1,
                samples_ms=samples,
                stop_reason="ci_target",
                warmup_runs=max(settings.warmup, 3),
                warmup_s=warmup_s,
                warmup_stable=True,
                timed_s=timed_s,
            ),
            memory=MemoryReport(
                primary="process_peak",
                process_peak_mb=got.memory_mb,
                process_method="replayed (bench/replay.py)",
                process_baseline_mb=0.0,
                weights_mb=weights_mb,
            ),
            build_s=build_s,
            total_s=got.wall_s,  # the real device's seconds, not the scaled sleep
            provenance=Provenance(
                runtime="torch",
                runtime_version=fp.torch_version,
                torch_version=fp.torch_version,
                python_version=platform.python_version(),
                hostname=fp.hostname,
                machine=fp.machine,
                cpu_model=fp.cpu_model,
                threads=settings.threads,
            ),
            details={
                "replay": True,
                "from_table": got.from_table,
                "time_scale": self.time_scale,
                "slept_s": round(slept_s, 4),
            },
        )


def _samples(arch_id: str, median: float) -> list[float]:
    """SAMPLES plausible per-run times whose median is exactly `median` (seeded by arch id)."""
    digest = hashlib.sha256(f"{arch_id}:samples".encode()).digest()
    spread = [(b / 255 - 0.5) * 4 * NOISE_CV for b in digest[: SAMPLES - 1]]
    below = sorted(-abs(s) for s in spread[: (SAMPLES - 1) // 2])
    above = sorted(abs(s) for s in spread[(SAMPLES - 1) // 2 :])
    return [median * (1 + s) for s in (*below, 0.0, *above)]


def replay_fingerprint(replay: DeviceReplay) -> DeviceFingerprint:
    """The replayed device as the table recorded it (hostname marks it as a replay)."""
    table_fp = dict(replay.table.get("fingerprint") or {})
    if not table_fp:
        table_fp = {
            "os": platform.system(),
            "cpu_model": "unknown",
            "machine": platform.machine(),
            "cores": os.cpu_count() or 1,
            "ram_bytes": 0,
            "torch_version": "unknown",
        }
    table_fp["hostname"] = f"replay:{table_fp.get('hostname', socket.gethostname())}"[:255]
    table_fp["runtimes"] = ["torch"]
    return DeviceFingerprint.model_validate(table_fp)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.replay_agent",
        description="An hwnas agent whose device is a replayed table of real measurements.",
    )
    parser.add_argument("--server", required=True, help="e.g. http://127.0.0.1:8000")
    parser.add_argument("--device-class", required=True)
    parser.add_argument("--name", default=None)
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="wall seconds slept per replayed device-second (default 1.0: real time)",
    )
    parser.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    parser.add_argument("--exit-when-idle", type=float, default=None, metavar="S")
    parser.add_argument("--poll-interval", type=float, default=0.2, metavar="S")
    parser.add_argument("--max-jobs", type=int, default=None)
    parser.add_argument(
        "--token", default=None, help="agent enrollment token (default: $HWNAS_AGENT_TOKEN)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    device = ReplayDevice(DeviceReplay.load(args.table), time_scale=args.time_scale)
    registration = AgentRegistration(
        device_class=args.device_class, name=args.name, fingerprint=device.fingerprint
    )
    with httpx.Client(base_url=args.server.rstrip("/"), timeout=HTTP_TIMEOUT_S) as http:
        worker = Worker(
            AgentClient(http, args.token or os.environ.get(AGENT_TOKEN_ENV) or None),
            registration,
            poll_interval=args.poll_interval,
            max_jobs=args.max_jobs,
            exit_when_idle=args.exit_when_idle,
            measure=device,
            # The replayed device's memory is not this machine's: no free-memory check.
            guard=Guard(check_device=False),
        )

        # As `hwnas agent`: SIGTERM/SIGINT once finishes the current job, twice aborts it.
        with stop_on_signals(worker):
            code = worker.run()
    logger.info("replay agent done: %s", worker.counters())
    return code


if __name__ == "__main__":
    sys.exit(main())
