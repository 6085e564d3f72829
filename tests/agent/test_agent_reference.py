"""Reference readings and busy retries: the bookkeeping alone, then through the job loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from agent.client import AgentClient
from agent.lease import Backoff
from agent.measure import CancelFlag, MeasurementCancelled
from agent.reference import MAX_BUSY_RETRIES, ReferenceReadings, measure_until_quiet
from agent.worker import Worker
from archvocab.wire import (
    Failure,
    MeasurementResult,
    MeasurementSettings,
    ReferenceJob,
)
from tests.factories import agent_registration, synthetic_measurement

REFERENCE_SPEC: dict[str, Any] = {
    "n_layer": 1,
    "d_model": 64,
    "d_inner": [128],
    "n_head": [2],
    "d_embed": 64,
    "div_val": 1,
    "cutoffs": [],
    "vocab_size": 1000,
    "n_positions": 64,
}
JOB_SPEC: dict[str, Any] = {**REFERENCE_SPEC, "n_layer": 2, "d_inner": [128] * 2, "n_head": [2] * 2}
REGISTRATION = agent_registration("reference-test")


def reference(every_jobs: int = 100, every_s: float = 1000.0) -> ReferenceJob:
    return ReferenceJob(arch_id="ref", spec=REFERENCE_SPEC, every_jobs=every_jobs, every_s=every_s)


def result(latency_ms: float = 2.0, busy: bool = False) -> MeasurementResult:
    body = synthetic_measurement(REFERENCE_SPEC, busy=busy)
    return MeasurementResult.model_validate({**body, "latency_ms": latency_ms})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# -- the bookkeeping ------------------------------------------------------------------------------
def test_a_reading_is_due_first_then_after_every_jobs_or_every_s() -> None:
    clock = Clock()
    readings = ReferenceReadings(clock)
    ref, settings = reference(every_jobs=2, every_s=60), MeasurementSettings()
    assert readings.due(ref, settings) and readings.latest(ref, settings) is None
    stored = readings.record(ref, settings, result(3.0))
    assert stored is not None and stored.latency_ms == 3.0 and stored.arch_id == "ref"
    assert readings.latest(ref, settings) == stored and not readings.due(ref, settings)
    readings.job_measured(ref, settings)
    assert not readings.due(ref, settings)
    readings.job_measured(ref, settings)
    assert readings.due(ref, settings)  # two jobs since
    readings.record(ref, settings, result(4.0))
    clock.now = 59.9
    assert not readings.due(ref, settings)
    clock.now = 60.0
    assert readings.due(ref, settings)  # a minute since


def test_readings_are_kept_per_reference_and_settings_key() -> None:
    readings = ReferenceReadings(Clock())
    ref = reference()
    short, long = MeasurementSettings(seq_len=16), MeasurementSettings(seq_len=32)
    readings.record(ref, short, result(1.0))
    assert readings.due(ref, long) and readings.latest(ref, long) is None
    readings.record(ref, long, result(2.0))
    # the timeout is not part of the key: the same measurement, another deadline
    same = MeasurementSettings(seq_len=16, timeout_s=500)
    assert readings.latest(ref, same).latency_ms == 1.0  # type: ignore[union-attr]
    other = ReferenceJob(arch_id="other", spec=REFERENCE_SPEC, every_jobs=1, every_s=1)
    assert readings.due(other, short) and readings.latest(other, short) is None


def test_a_failed_reading_keeps_the_last_one_and_waits_an_interval() -> None:
    clock = Clock()
    readings = ReferenceReadings(clock)
    ref, settings = reference(every_jobs=1, every_s=10), MeasurementSettings()
    assert readings.record(ref, settings, Failure(kind="timeout", message="slow")) is None
    assert not readings.due(ref, settings)  # the next job is not held up by a second try
    first = readings.record(ref, settings, result(1.0))
    readings.job_measured(ref, settings)
    clock.now = 5
    assert readings.record(ref, settings, None) == first  # cancelled: the old reading stays
    assert readings.latest(ref, settings) == first


def test_a_reading_says_when_it_ended_and_whether_it_was_busy() -> None:
    readings = ReferenceReadings(Clock())
    before = datetime.now(UTC)
    got = readings.record(reference(), MeasurementSettings(), result(busy=True))
    assert got is not None and got.busy
    assert before <= got.measured_at <= datetime.now(UTC)


# -- busy retries ---------------------------------------------------------------------------------
def scripted(*outcomes: MeasurementResult | Failure) -> tuple[list[int], Any]:
    calls: list[int] = []

    def measure_once() -> MeasurementResult | Failure:
        calls.append(1)
        return outcomes[len(calls) - 1]

    return calls, measure_once


def test_a_quiet_result_is_not_measured_again() -> None:
    calls, once = scripted(result(1.0))
    got = measure_until_quiet(once, 3)
    assert len(calls) == 1 and got.busy_attempts == []  # type: ignore[union-attr]


def test_busy_results_are_measured_again_and_the_first_quiet_one_kept() -> None:
    busy = [result(9.0 + i, busy=True) for i in range(2)]
    calls, once = scripted(*busy, result(1.0), result(5.0))
    retried: list[int] = []
    got = measure_until_quiet(once, 5, on_retry=lambda: retried.append(1))
    assert isinstance(got, MeasurementResult) and not got.provenance.busy
    assert got.latency_ms == 1.0 and len(calls) == 3 and len(retried) == 2
    assert [a.latency_ms for a in got.busy_attempts] == [9.0, 10.0]
    assert got.busy_attempts[0].busy_reasons == busy[0].provenance.busy_reasons
    assert got.busy_attempts[0].peak_memory_mb == busy[0].peak_memory_mb


def test_when_every_attempt_is_busy_the_last_is_reported_with_the_others() -> None:
    calls, once = scripted(*(result(float(i), busy=True) for i in range(3)))
    got = measure_until_quiet(once, 2)
    assert isinstance(got, MeasurementResult) and got.provenance.busy and got.latency_ms == 2.0
    assert len(calls) == 3 and [a.latency_ms for a in got.busy_attempts] == [0.0, 1.0]


def test_retries_are_bounded_by_what_a_result_can_carry() -> None:
    calls, once = scripted(*(result(busy=True) for _ in range(50)))
    got = measure_until_quiet(once, 40)
    assert len(calls) == MAX_BUSY_RETRIES + 1
    assert len(got.busy_attempts) == MAX_BUSY_RETRIES  # type: ignore[union-attr]
    MeasurementResult.model_validate(got.model_dump())  # within the wire's limit


def test_no_retries_reports_the_busy_result_as_it_is() -> None:
    calls, once = scripted(result(busy=True))
    got = measure_until_quiet(once, 0)
    assert len(calls) == 1 and got.provenance.busy and got.busy_attempts == []  # type: ignore[union-attr]


def test_a_failed_retry_reports_the_busy_result(caplog: pytest.LogCaptureFixture) -> None:
    failure = Failure(kind="timeout", message="too slow")
    calls, once = scripted(result(1.0, busy=True), result(2.0, busy=True), failure)
    got = measure_until_quiet(once, 5)
    assert isinstance(got, MeasurementResult) and got.latency_ms == 2.0 and len(calls) == 3
    assert [a.latency_ms for a in got.busy_attempts] == [1.0]
    assert "measuring again failed (timeout: too slow)" in caplog.text


def test_the_pause_between_retries_ends_at_cancel() -> None:
    cancel = threading.Event()
    calls, once = scripted(result(busy=True), result())
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(MeasurementCancelled):
        measure_until_quiet(once, 2, cancel=cancel, pause_s=30)
    assert time.monotonic() - started < 5 and len(calls) == 1


# -- through the job loop -----------------------------------------------------------------------
class FakeDevice:
    """The Worker's `measure`: the reference reads `seq_len / 10` ms, jobs follow a script.

    Every call advances `clock` by `step` s; `on_call(kind, n)` runs first (n: that kind's
    call count), and may raise or stop the worker.
    """

    def __init__(self, jobs: list[MeasurementResult | Failure] | None = None) -> None:
        self.clock, self.step = Clock(), 1.0
        self.jobs = jobs or []
        self.references: list[MeasurementResult | Failure | Exception] = []
        self.calls: list[tuple[str, int]] = []  # (kind, seq_len)
        self.on_call: Any = None
        self.measure_cancel: list[CancelFlag] = []  # the cancel flag of each call

    def __call__(
        self, spec: Mapping[str, Any], settings: MeasurementSettings, *, cancel: CancelFlag
    ) -> MeasurementResult | Failure:
        kind = "ref" if spec == REFERENCE_SPEC else "job"
        self.calls.append((kind, settings.seq_len))
        self.measure_cancel.append(cancel)
        self.clock.now += self.step
        if self.on_call is not None:
            self.on_call(kind, sum(1 for k, _ in self.calls if k == kind))
        if kind == "ref":
            scripted = self.references.pop(0) if self.references else None
            if isinstance(scripted, Exception):
                raise scripted
            return scripted or result(settings.seq_len / 10)
        return self.jobs.pop(0) if self.jobs else result(7.0)

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.calls]


@pytest.fixture
def http(live_server: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.url, timeout=10) as client:
        yield client


def make_worker(http: httpx.Client, device: FakeDevice, **options: Any) -> Worker:
    options.setdefault("poll_interval", 0.05)
    options.setdefault("backoff", Backoff(initial=0.01, factor=2, cap=0.05))
    options.setdefault("busy_pause_s", 0.0)
    references = ReferenceReadings(device.clock)
    return Worker(AgentClient(http), REGISTRATION, measure=device, references=references, **options)


def add_job(
    state: Any,
    ref: ReferenceJob | None,
    seq_len: int = 16,
    busy_retries: int = 0,
    **settings: Any,
) -> int:
    job = state.add_job(JOB_SPEC)
    state.queue[-1].update(
        settings={"seq_len": seq_len, **settings},
        reference=ref.model_dump() if ref else None,
        busy_retries=busy_retries,
    )
    return job


def reading(state: Any, job: int) -> Any:
    measurement = state.results[job].measurement
    assert isinstance(measurement, MeasurementResult)
    return measurement.reference


def test_the_reference_is_measured_before_the_first_job_then_every_jobs(
    live_server: Any, http: httpx.Client
) -> None:
    state, device = live_server.state, FakeDevice()
    jobs = [add_job(state, reference(every_jobs=2)) for _ in range(5)]
    worker = make_worker(http, device, max_jobs=5)
    assert worker.run() == 0
    assert device.kinds() == ["ref", "job", "job", "ref", "job", "job", "ref", "job"]
    readings = [reading(state, job) for job in jobs]
    assert readings[0] == readings[1] != readings[2] == readings[3] != readings[4]
    assert all(r.arch_id == "ref" and r.latency_ms == 1.6 for r in readings)
    assert readings[0].measured_at < readings[2].measured_at < readings[4].measured_at
    assert worker.reference_measurements == 3 and worker.measurements_reported == 5


def test_the_reference_is_measured_again_after_every_s(
    live_server: Any, http: httpx.Client
) -> None:
    state, device = live_server.state, FakeDevice()
    for _ in range(4):  # each call takes a fake second: the reading is 1, 2, 3 s old
        add_job(state, reference(every_s=2.5))
    assert make_worker(http, device, max_jobs=4).run() == 0
    assert device.kinds() == ["ref", "job", "job", "job", "ref", "job"]


def test_readings_are_kept_apart_per_settings_and_shared_across_timeouts(
    live_server: Any, http: httpx.Client
) -> None:
    state, device = live_server.state, FakeDevice()
    short = add_job(state, reference())
    long = add_job(state, reference(), seq_len=32)
    again = add_job(state, reference(), timeout_s=500)  # same key as `short`
    bare = add_job(state, None)
    assert make_worker(http, device, max_jobs=4).run() == 0
    assert device.calls == [("ref", 16), ("job", 16), ("ref", 32), ("job", 32), ("job", 16)] + [
        ("job", 16)
    ]
    assert reading(state, short).latency_ms == 1.6 and reading(state, long).latency_ms == 3.2
    assert reading(state, again) == reading(state, short)
    assert reading(state, bare) is None  # a job without a reference carries none


@pytest.mark.parametrize(
    "failure",
    [Failure(kind="timeout", message="slow"), RuntimeError("bug"), MeasurementCancelled()],
)
def test_a_failed_reference_keeps_the_last_reading_and_measures_the_job(
    live_server: Any, http: httpx.Client, failure: Failure | Exception
) -> None:
    state, device = live_server.state, FakeDevice()
    device.references = [failure, result(1.0), failure]
    jobs = [add_job(state, reference(every_jobs=1)) for _ in range(3)]
    worker = make_worker(http, device, max_jobs=3)
    assert worker.run() == 0
    assert device.kinds() == ["ref", "job", "ref", "job", "ref", "job"]
    assert reading(state, jobs[0]) is None
    assert reading(state, jobs[1]).latency_ms == 1.0 and reading(state, jobs[2]) == reading(
        state, jobs[1]
    )
    assert (worker.measurements_reported, worker.reference_measurements) == (3, 1)


def test_a_reference_the_guard_refuses_is_not_measured(
    live_server: Any, http: httpx.Client
) -> None:
    state, device = live_server.state, FakeDevice()
    broken = ReferenceJob(
        arch_id="ref", spec={**REFERENCE_SPEC, "d_model": 0}, every_jobs=1, every_s=1
    )
    job = add_job(state, broken)
    worker = make_worker(http, device, once=True)
    assert worker.run() == 0
    assert device.kinds() == ["job"] and reading(state, job) is None
    assert worker.measurements_reported == 1 and worker.reference_measurements == 0


def test_heartbeats_go_on_while_the_reference_is_measured(
    live_server: Any, http: httpx.Client
) -> None:
    state, device = live_server.state, FakeDevice()
    job = add_job(state, reference())
    seen: list[int] = []
    device.on_call = lambda kind, n: (
        time.sleep(1.0) if kind == "ref" else seen.append(len(state.heartbeats))
    )
    assert make_worker(http, device, once=True).run() == 0
    assert seen[0] >= 2 and {j for j, _ in state.heartbeats} == {job}  # beats every 0.2 s
    assert state.results[job].measurement is not None


def test_busy_jobs_are_measured_again_through_the_loop(
    live_server: Any, http: httpx.Client
) -> None:
    state = live_server.state
    device = FakeDevice([result(9.0, busy=True), result(8.0, busy=True), result(1.0)])
    device.jobs += [result(6.0, busy=True), result(5.0, busy=True)]
    quiet = add_job(state, reference(), busy_retries=3)
    still_busy = add_job(state, reference(), busy_retries=1)
    worker = make_worker(http, device, max_jobs=2)
    assert worker.run() == 0
    assert device.kinds() == ["ref", "job", "job", "job", "job", "job"]
    kept = state.results[quiet].measurement
    assert kept.latency_ms == 1.0 and not kept.provenance.busy
    assert [a.latency_ms for a in kept.busy_attempts] == [9.0, 8.0]
    assert kept.reference is not None  # busy retries keep the reading
    last = state.results[still_busy].measurement
    assert last.latency_ms == 5.0 and last.provenance.busy
    assert [a.latency_ms for a in last.busy_attempts] == [6.0]
    assert worker.busy_retries == 3 and worker.measurements_reported == 2


@pytest.mark.parametrize("during", ["pause", "measurement"])
def test_abort_during_a_busy_retry_reports_nothing(
    live_server: Any, http: httpx.Client, during: str
) -> None:
    state = live_server.state
    device = FakeDevice([result(busy=True) for _ in range(5)])
    add_job(state, None, busy_retries=4)
    worker = make_worker(http, device, busy_pause_s=30 if during == "pause" else 0)

    def abort(kind: str, n: int) -> None:
        if during == "pause":  # while the worker waits 30 s before measuring again
            threading.Timer(0.2, worker.abort).start()
        elif n == 2:  # as the child of the first retry is killed
            worker.abort()
            raise MeasurementCancelled()

    device.on_call = abort
    started = time.monotonic()
    assert worker.run() == 0
    assert time.monotonic() - started < 10  # the 30 s pause ended at abort
    assert device.kinds() == ["job"] * (1 if during == "pause" else 2) and state.results == {}
    assert (worker.jobs_abandoned, worker.jobs_done, worker.conflicts) == (1, 0, 0)
    assert worker.busy_retries == (0 if during == "pause" else 1)


def test_abort_while_the_reference_is_measured_reports_nothing(
    live_server: Any, http: httpx.Client
) -> None:
    state, device = live_server.state, FakeDevice()
    add_job(state, reference())
    worker = make_worker(http, device)

    def abort_then_cancel(kind: str, n: int) -> None:
        worker.abort()
        raise MeasurementCancelled()

    device.on_call = abort_then_cancel
    assert worker.run() == 0
    assert device.kinds() == ["ref"] and state.results == {}
    assert (worker.jobs_abandoned, worker.reference_measurements) == (1, 0)


def test_a_real_reference_reading(live_server: Any, http: httpx.Client, fast_settings: Any) -> None:
    """Through the real measuring function: the reference runs in a fresh process of its own."""
    state = live_server.state
    settings = fast_settings.model_dump(mode="json")
    jobs = [state.add_job(JOB_SPEC, settings) for _ in range(2)]
    for job in state.queue:
        job["reference"] = reference(every_jobs=2).model_dump()
    started = datetime.now(UTC)
    worker = Worker(
        AgentClient(http),
        REGISTRATION,
        poll_interval=0.05,
        max_jobs=2,
        backoff=Backoff(initial=0.01, factor=2, cap=0.05),
    )
    assert worker.run() == 0
    assert worker.reference_measurements == 1 and worker.measurements_reported == 2
    first, second = (state.results[job].measurement for job in jobs)
    assert first is not None and second is not None
    got = first.reference
    assert got is not None and second.reference == got and got.arch_id == "ref"
    # a real reading: a timed forward of a 1-layer model, and its process's memory peak
    assert 0 < got.latency_ms < 1000 and got.latency_ms != first.latency_ms
    assert got.peak_memory_mb > 0
    assert started <= got.measured_at <= datetime.now(UTC)


def test_a_lease_lost_while_the_reference_is_measured_drops_the_job(
    live_server: Any, http: httpx.Client
) -> None:
    state, device = live_server.state, FakeDevice()
    state.refuse_heartbeats = True
    job = add_job(state, reference())
    worker = make_worker(http, device, once=True)

    def measure_until_cancelled(kind: str, n: int) -> None:
        deadline = time.monotonic() + 10
        while not device.measure_cancel[-1].is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise MeasurementCancelled()

    device.on_call = measure_until_cancelled
    assert worker.run() == 0
    assert device.kinds() == ["ref"] and state.results == {}
    assert state.refused == [("heartbeat", job)]
    assert (worker.conflicts, worker.jobs_abandoned, worker.jobs_done) == (1, 0, 0)
