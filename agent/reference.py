"""Numbers that hold when measured again: reference readings, and busy measurements retried.

Reference readings. A lease may name its search's reference architecture
(`archvocab.wire.ReferenceJob`). The agent keeps, per (reference arch_id, the job's
`MeasurementSettings.cache_key()`), its latest reading of it and how many jobs of that key it
has measured since; before a job, the reference is measured again (with the job's settings,
in a fresh process like any candidate) when there is no reading yet, or the last attempt is
`every_s` seconds old, or `every_jobs` jobs were measured since. Every result then carries the
latest reading, which lets the server follow each device's drift and noise. A reading is
shared between searches only when both the reference and the settings key match: a reading
taken with other settings says nothing about this job's.

Busy measurements. A result whose provenance says the machine looked busy is measured again,
up to the lease's `busy_retries` times; the first quiet result is kept, and the busy ones
before it travel with it as `busy_attempts`. If every attempt is busy, the last one is
reported, flagged busy (the server keeps busy results off the frontier).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from agent.measure import CancelFlag, MeasurementCancelled
from archvocab.wire import (
    BusyAttempt,
    Failure,
    MeasurementResult,
    MeasurementSettings,
    ReferenceJob,
    ReferenceReading,
)

logger = logging.getLogger(__name__)

# MeasurementResult.busy_attempts holds at most 10: one attempt per retry.
MAX_BUSY_RETRIES = 10
_PAUSE_STEP_S = 0.05  # how often a pause between busy retries looks at the cancel flag

Outcome = MeasurementResult | Failure
Clock = Callable[[], float]


@dataclass
class _Entry:
    reading: ReferenceReading | None
    attempted_at: float  # clock() when the last attempt ended, successful or not
    jobs_since: int = 0


class ReferenceReadings:
    """The agent's latest reference readings, per (reference arch_id, settings key).

    `clock` (monotonic seconds; injectable for tests) dates attempts for `every_s`. A failed
    attempt keeps the previous reading but starts a new interval all the same, so a
    reference that this device cannot measure does not double the time of every job.
    """

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._entries: dict[tuple[str, str], _Entry] = {}

    @staticmethod
    def key(reference: ReferenceJob, settings: MeasurementSettings) -> tuple[str, str]:
        return reference.arch_id, settings.cache_key()

    def due(self, reference: ReferenceJob, settings: MeasurementSettings) -> bool:
        """Whether the reference must be measured before the next job with these settings."""
        entry = self._entries.get(self.key(reference, settings))
        if entry is None:
            return True
        return (
            entry.jobs_since >= reference.every_jobs
            or self.clock() - entry.attempted_at >= reference.every_s
        )

    def record(
        self,
        reference: ReferenceJob,
        settings: MeasurementSettings,
        outcome: Outcome | None,
        measured_at: datetime | None = None,
    ) -> ReferenceReading | None:
        """Note an attempt that just ended; a MeasurementResult becomes the latest reading.

        None or a Failure (the attempt failed or was cancelled) keeps the previous reading.
        """
        key = self.key(reference, settings)
        previous = self._entries.get(key)
        reading = previous.reading if previous is not None else None
        if isinstance(outcome, MeasurementResult):
            reading = reading_of(reference.arch_id, outcome, measured_at)
        self._entries[key] = _Entry(reading=reading, attempted_at=self.clock())
        return reading

    def job_measured(self, reference: ReferenceJob, settings: MeasurementSettings) -> None:
        """Count a job of this key as measured since the last attempt."""
        entry = self._entries.get(self.key(reference, settings))
        if entry is not None:
            entry.jobs_since += 1

    def latest(
        self, reference: ReferenceJob, settings: MeasurementSettings
    ) -> ReferenceReading | None:
        entry = self._entries.get(self.key(reference, settings))
        return entry.reading if entry is not None else None


def reading_of(
    arch_id: str, result: MeasurementResult, measured_at: datetime | None = None
) -> ReferenceReading:
    """The reading a reference measurement gives; `measured_at` defaults to now (UTC)."""
    return ReferenceReading(
        arch_id=arch_id,
        latency_ms=result.latency_ms,
        peak_memory_mb=result.peak_memory_mb,
        measured_at=measured_at or datetime.now(UTC),
        busy=result.provenance.busy,
    )


# -- busy measurements ---------------------------------------------------------------------------
def is_busy(outcome: Outcome) -> bool:
    return isinstance(outcome, MeasurementResult) and outcome.provenance.busy


def busy_attempt(result: MeasurementResult) -> BusyAttempt:
    return BusyAttempt(
        latency_ms=result.latency_ms,
        peak_memory_mb=result.peak_memory_mb,
        busy_reasons=list(result.provenance.busy_reasons),
    )


def pause(seconds: float, cancel: CancelFlag | None) -> None:
    """Sleep up to `seconds`; MeasurementCancelled as soon as `cancel` is set."""
    deadline = time.monotonic() + seconds
    while True:
        if cancel is not None and cancel.is_set():
            raise MeasurementCancelled()
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(_PAUSE_STEP_S, left))


def measure_until_quiet(
    measure_once: Callable[[], Outcome],
    retries: int,
    *,
    cancel: CancelFlag | None = None,
    pause_s: float = 0.0,
    on_retry: Callable[[], None] = lambda: None,
) -> Outcome:
    """Measure; while the result is busy, pause and measure again, up to `retries` times
    (capped at MAX_BUSY_RETRIES).

    The first quiet result is returned, or else the last busy one; either way it carries the
    busy results before it in `busy_attempts`. A retry that fails (a Failure) ends the retries
    and the last busy result is returned: it is a measurement, and the failure may be the
    load's doing. MeasurementCancelled from `measure_once` or a pause propagates.
    """
    outcome = measure_once()
    attempts: list[BusyAttempt] = []
    while is_busy(outcome) and len(attempts) < min(retries, MAX_BUSY_RETRIES):
        assert isinstance(outcome, MeasurementResult)
        pause(pause_s, cancel)
        on_retry()
        again = measure_once()
        if isinstance(again, Failure):
            logger.warning(
                "measuring again failed (%s: %s); reporting the busy result",
                again.kind,
                again.message[:200],
            )
            break
        attempts.append(busy_attempt(outcome))
        outcome = again
    if attempts:
        assert isinstance(outcome, MeasurementResult)
        outcome = outcome.model_copy(update={"busy_attempts": attempts})
    return outcome
