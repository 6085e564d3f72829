"""The agent's job loop: register -> claim -> measure -> report, and keep going.

It survives a bad job (the typed failure is reported and the loop goes on) and a server
outage (connection errors and 5xx are retried with capped exponential backoff; an
unknown-agent 404 means the server forgot us, so we register again). What retrying cannot fix
ends it at once: a 401/403 at registration or on a claim (a wrong or revoked token) is one
error line and exit code 3 (`EXIT_REFUSED`). While a child measures, a background
thread renews the lease; a 409 there kills the child and drops the job. `stop()` (wired to
SIGTERM/SIGINT by the CLI) lets the current job finish and be reported, then exits;
`abort()` kills the current measurement too.

Inside a job's lease (under its heartbeats) the agent may also measure the search's reference
architecture first, and measure the job again while its result is flagged busy
(`agent.reference`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from agent.client import AgentClient, AgentUnknown, ApiError, BadLease, Refused, quiet_http_requests
from agent.guard import Guard
from agent.lease import Backoff, Heartbeats
from agent.measure import CancelFlag, MeasurementCancelled, measure_candidate
from agent.reference import ReferenceReadings, measure_until_quiet
from archvocab.wire import (
    AgentInfo,
    AgentRegistration,
    Failure,
    JobLease,
    JobResult,
    LeaseRef,
    MeasurementResult,
    MeasurementSettings,
    ReferenceJob,
)

logger = logging.getLogger(__name__)

MeasureFn = Callable[..., "MeasurementResult | Failure"]
COUNTERS = (
    "registrations",
    "jobs_claimed",
    "jobs_done",
    "measurements_reported",
    "failures_reported",
    "conflicts",
    "jobs_abandoned",
    "jobs_refused",
    "heartbeats",
    "connection_errors",
    "api_errors",
    "busy_retries",
    "reference_measurements",
)
EXIT_REFUSED = 3  # the server refused our token: retrying cannot help
_TOKEN_HELP = (
    "give the agent a valid agent enrollment token (--token or HWNAS_AGENT_TOKEN; an admin "
    "creates one on the server with `hwnas token create --kind agent --name NAME`)"
)


class StopWaiting(Exception):  # noqa: N818 - a signal, not a failure
    """Raised by a stop signal's handler into a claim that waits for work (`Worker._ask`)."""


class Worker:
    """One agent's loop. Counters are plain attributes, named in COUNTERS:

    registrations (accepted), jobs_claimed, jobs_done (results the server accepted), of which
    measurements_reported and failures_reported; conflicts (a 409/404 on heartbeat or
    result: the job was dropped), jobs_abandoned (aborted, or unreportable before the lease
    ran out), jobs_refused (refused by the guard before anything was built: over this agent's
    limits or its device's free memory), heartbeats (accepted), connection_errors, api_errors
    (unexpected statuses), busy_retries (measurements taken again because the one before
    looked busy), reference_measurements (readings taken of a search's reference).

    `max_jobs` counts claimed jobs; `once` is max_jobs=1 and exit at the first "no work";
    `exit_when_idle` exits after that many seconds without a job, whether the server had no
    work (exit code 0) or could not be reached (exit code 1). A token the server refuses
    (401/403 registering or claiming) ends the loop at once, with or without these: exit code
    `EXIT_REFUSED`.

    `guard` (`agent.guard.Guard`) checks every job in this process before `measure` runs: a
    spec that does not validate or that it refuses is reported without starting a process.

    `references` keeps the reference readings (`agent.reference.ReferenceReadings`; pass one
    with a fake clock in tests); `busy_pause_s` is the pause before a busy job is measured
    again, so that a short burst of load can pass.
    """

    def __init__(
        self,
        client: AgentClient,
        registration: AgentRegistration,
        *,
        poll_interval: float = 1.0,
        claim_wait: float = 0.0,
        max_jobs: int | None = None,
        once: bool = False,
        exit_when_idle: float | None = None,
        backoff: Backoff | None = None,
        measure: MeasureFn = measure_candidate,
        guard: Guard | None = None,
        references: ReferenceReadings | None = None,
        busy_pause_s: float = 1.0,
    ) -> None:
        self.client = client
        self.registration = registration
        self.poll_interval = poll_interval
        self.claim_wait = claim_wait
        self.max_jobs = 1 if once else max_jobs
        self.once = once
        self.exit_when_idle = exit_when_idle
        self.backoff = backoff or Backoff()
        self.measure = measure
        self.guard = guard or Guard()
        self.references = references or ReferenceReadings()
        self.busy_pause_s = busy_pause_s
        self.info: AgentInfo | None = None
        self._stop = threading.Event()
        self.waiting_for_work = False  # a claim held open on the server is in flight (`_ask`)
        self._cancel = threading.Event()  # kills the running measurement
        self._lock = threading.Lock()
        for name in COUNTERS:
            setattr(self, name, 0)

    # -- control --------------------------------------------------------------------------
    def stop(self) -> None:
        """Finish and report the current job, then exit."""
        self._stop.set()

    def abort(self) -> None:
        """Exit now: kill the current measurement, report nothing."""
        self._stop.set()
        self._cancel.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def counters(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTERS}

    def _count(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    # -- loop -----------------------------------------------------------------------------
    def run(self) -> int:
        """Work until stopped, max_jobs, or idle; 0, or 1 if the server stayed unreachable,
        or EXIT_REFUSED if it refused our token."""
        quiet_http_requests()  # an idle agent's polls are not news
        idle_since = time.monotonic()
        while not self._stop.is_set() and not self._enough_jobs():
            asked = time.monotonic()
            try:
                lease = self._claim(idle_since)
            except Refused as exc:
                logger.error("%s", _refusal_line(exc, registering=self.info is None))
                return EXIT_REFUSED
            except (httpx.TransportError, ApiError) as exc:
                self._on_server_trouble(exc)
                if self._idle_too_long(idle_since):
                    logger.error(
                        "giving up: no contact with the server for %.0f s", self.exit_when_idle
                    )
                    return 1
                self._stop.wait(self.backoff.next())
                continue
            self.backoff.reset()
            if lease is None:
                if self.once or self._idle_too_long(idle_since):
                    logger.info("no work; exiting")
                    break
                # A claim that waited for work on the server asks again at once; one answered
                # sooner (a server that does not wait) waits the poll interval.
                if self.claim_wait and time.monotonic() - asked >= self.claim_wait / 2:
                    continue
                logger.debug("no work; asking again in %.1f s", self.poll_interval)
                self._stop.wait(self.poll_interval)
                continue
            # A result's answer may bring the next job (`claim_next`): one request per job.
            while lease is not None:
                lease = self.process(lease)
            idle_since = time.monotonic()
        logger.info("agent stopped: %s", self.counters())
        return 0

    def _enough_jobs(self) -> bool:
        return self.max_jobs is not None and self.jobs_claimed >= self.max_jobs

    def _idle_too_long(self, since: float) -> bool:
        return self.exit_when_idle is not None and time.monotonic() - since >= self.exit_when_idle

    def _on_server_trouble(self, exc: Exception) -> None:
        if isinstance(exc, httpx.TransportError):
            self._count("connection_errors")
            logger.warning("server unreachable (%s); retrying", exc)
        else:
            self._count("api_errors")
            logger.warning("unexpected server answer: %s", exc)

    def _register(self) -> AgentInfo:
        self.info = self.client.register(self.registration)
        self._count("registrations")
        logger.info("registered as agent %s (%s)", self.info.agent_id, self.info.device_class)
        return self.info

    def _claim(self, idle_since: float) -> JobLease | None:
        info = self.info or self._register()
        try:
            try:
                return self._ask(info.agent_id, idle_since)
            except AgentUnknown:
                logger.warning("server does not know agent %s; registering again", info.agent_id)
                self.info = None
                info = self._register()
                return self._ask(info.agent_id, idle_since)
        except BadLease as exc:
            self._fail_unreadable(exc)
            return None

    def _ask(self, agent_id: str, idle_since: float) -> JobLease | None:
        """One claim, held open on the server up to `claim_wait` for work: not past the time
        `exit_when_idle` leaves, and not at all with `once` (it exits at the first "no work").
        A second stop signal ends a claim that waits (`StopWaiting`, raised by the signal's
        handler while `waiting_for_work`): the agent exits at once, as an abort does, and a job
        leased in that instant is left to its lease running out. (A first stop lets the claim
        be answered, and a job it brings measured, so that nothing waits on a lease.)"""
        wait_s = 0.0 if self.once else self.claim_wait
        if wait_s and self.exit_when_idle is not None:
            wait_s = min(wait_s, max(0.0, idle_since + self.exit_when_idle - time.monotonic()))
        if not wait_s:
            return self.client.claim(agent_id)
        self.waiting_for_work = True
        try:
            return self.client.claim(agent_id, wait_s)
        except StopWaiting:
            self._stop.set()  # (not in the signal's handler: see agent.cli.stop_on_signals)
            return None
        finally:
            self.waiting_for_work = False

    def _fail_unreadable(self, exc: BadLease) -> None:
        """A leased job whose lease did not validate: reported failed, never measured."""
        assert self.info is not None
        self._count("jobs_claimed")
        logger.error("job %s: unreadable lease: %s", exc.job_id, exc.message)
        failure = Failure(
            kind="error", message=f"agent could not read the lease: {exc.message}"[:4000]
        )
        self._report(exc.job_id, exc.lease_id, failure, time.monotonic() + self.info.lease_seconds)

    # -- one job --------------------------------------------------------------------------
    def process(self, lease: JobLease) -> JobLease | None:
        """Measure one claimed job under heartbeats and report the outcome; the next job when
        the report's answer brought one (the agent asks unless it is stopping or has taken
        `max_jobs`)."""
        self._count("jobs_claimed")
        assert self.info is not None
        refused = self.guard.check(lease.spec, lease.settings, lease.proxies)
        if refused is not None:  # nothing built, no process started
            if refused.kind == "refused":
                self._count("jobs_refused")
            logger.warning("job %s: %s", lease.job_id, refused.message)
            deadline = time.monotonic() + lease.lease_seconds
            return self._report(lease.job_id, lease.lease_id, refused, deadline, take_next=True)
        logger.info("job %s: measuring %s", lease.job_id, lease.arch_id)
        ref = LeaseRef(agent_id=self.info.agent_id, lease_id=lease.lease_id)
        beats = Heartbeats(
            self.client,
            lease.job_id,
            ref,
            self._interval(lease),
            abort=self._cancel,
            on_beat=lambda: self._count("heartbeats"),
            on_trouble=self._on_server_trouble,
        )
        beats.start()
        try:
            outcome = self._measure(lease, beats.cancel)
        finally:
            beats.finish()
        if outcome is None:
            if beats.lost.is_set():
                self._count("conflicts")
                logger.warning("job %s: lease lost; measurement dropped", lease.job_id)
            else:
                self._count("jobs_abandoned")
                logger.warning("job %s: abandoned on abort", lease.job_id)
            return None
        deadline = time.monotonic() + lease.lease_seconds
        return self._report(lease.job_id, lease.lease_id, outcome, deadline, take_next=True)

    def _interval(self, lease: JobLease) -> float:
        interval = self.info.heartbeat_interval_s if self.info else lease.lease_seconds / 3
        return max(0.05, min(interval, lease.lease_seconds / 2))

    def _measure(self, lease: JobLease, cancel: CancelFlag) -> MeasurementResult | Failure | None:
        """The job's outcome, with the reference reading and busy attempts; None if cancelled."""
        reference = lease.reference
        try:
            if reference is not None and self.references.due(reference, lease.settings):
                self._measure_reference(reference, lease.settings, cancel)
            outcome = measure_until_quiet(
                lambda: self._measure_job(lease, cancel),
                lease.busy_retries,
                cancel=cancel,
                pause_s=self.busy_pause_s,
                on_retry=lambda: self._on_busy_retry(lease),
            )
        except MeasurementCancelled:
            return None
        if reference is None:
            return outcome
        self.references.job_measured(reference, lease.settings)
        reading = self.references.latest(reference, lease.settings)
        if isinstance(outcome, MeasurementResult) and reading is not None:
            outcome = outcome.model_copy(update={"reference": reading})
        return outcome

    def _measure_job(self, lease: JobLease, cancel: CancelFlag) -> MeasurementResult | Failure:
        # Only jobs that ask for proxies pass them: a plain `measure` need not know of them.
        extra = {"proxies": lease.proxies} if lease.proxies is not None else {}
        return self._call_measure(lease.spec, lease.settings, cancel, **extra)

    def _call_measure(
        self,
        spec: Mapping[str, Any],
        settings: MeasurementSettings,
        cancel: CancelFlag,
        **extra: Any,
    ) -> MeasurementResult | Failure:
        try:
            return self.measure(spec, settings, cancel=cancel, **extra)
        except MeasurementCancelled:
            raise
        except Exception as exc:  # a bug measuring one job must not end the agent
            logger.exception("measuring failed unexpectedly")
            return Failure(kind="error", message=f"{type(exc).__name__}: {exc}"[:4000])

    def _on_busy_retry(self, lease: JobLease) -> None:
        self._count("busy_retries")
        logger.info("job %s: the machine looked busy; measuring again", lease.job_id)

    def _measure_reference(
        self, reference: ReferenceJob, settings: MeasurementSettings, cancel: CancelFlag
    ) -> None:
        """Take a new reading of the reference; on failure keep the last one and go on."""
        outcome = self.guard.check(reference.spec, settings)
        if outcome is None:
            logger.info("measuring reference %s", reference.arch_id)
            try:
                outcome = self._call_measure(reference.spec, settings, cancel)
            except MeasurementCancelled:
                if cancel.is_set():
                    raise  # aborted or lease lost: the job goes too
                outcome = Failure(kind="error", message="the measurement was cancelled")
        self.references.record(reference, settings, outcome)
        if isinstance(outcome, Failure):
            logger.warning(
                "reference %s: %s: %s; keeping the last reading",
                reference.arch_id,
                outcome.kind,
                outcome.message[:200],
            )
        else:
            self._count("reference_measurements")

    def _report(
        self,
        job_id: int,
        lease_id: str,
        outcome: MeasurementResult | Failure,
        deadline: float,
        take_next: bool = False,
    ) -> JobLease | None:
        """Report the outcome; with `take_next` (and the agent not stopping, nor at
        `max_jobs`), the answer also leases the next job, returned here."""
        assert self.info is not None
        ref = {"agent_id": self.info.agent_id, "lease_id": lease_id}
        if isinstance(outcome, Failure):
            result = JobResult(**ref, failure=outcome)
        else:
            result = JobResult(**ref, measurement=outcome)
        take_next = take_next and not self.stopping and not self._enough_jobs()
        accepted, lease = self._submit(job_id, result, deadline, take_next)
        if accepted is None:
            self._count("jobs_abandoned")
        elif not accepted:
            self._count("conflicts")
            logger.warning("job %s: result refused, the lease is no longer ours", job_id)
        else:
            self._count("jobs_done")
            self._count(
                "failures_reported" if isinstance(outcome, Failure) else "measurements_reported"
            )
            logger.info("job %s: reported %s", job_id, _summary(outcome))
        return lease

    def _submit(
        self, job_id: int, result: JobResult, deadline: float, take_next: bool
    ) -> tuple[bool | None, JobLease | None]:
        """(True accepted, False refused (409/404), None given up (server gone past the
        lease); the next job when `take_next` and the answer brought one)."""
        backoff = self.backoff.fresh()
        while True:
            try:
                if not take_next:
                    return self.client.submit(job_id, result), None
                return self.client.submit_then_claim(job_id, result)
            except BadLease as exc:  # the result was accepted; the next job cannot be run
                self._fail_unreadable(exc)
                return True, None
            except (httpx.TransportError, ApiError) as exc:
                self._on_server_trouble(exc)
            if time.monotonic() >= deadline or self._cancel.is_set():
                logger.error("job %s: could not report before the lease ran out; dropped", job_id)
                return None, None
            self._cancel.wait(min(backoff.next(), max(0.0, deadline - time.monotonic())))


def _refusal_line(exc: Refused, registering: bool) -> str:
    """One line: what the server refused, its reason, and what to do."""
    what = "registering with the server" if registering else "claiming work"
    reason = " ".join(exc.message.split())[:500]  # the server's message, on this one line
    return f"{what} was refused ({exc.status}: {reason}); {_TOKEN_HELP}; exiting"


def _summary(outcome: MeasurementResult | Failure) -> str:
    if isinstance(outcome, Failure):
        return f"failure {outcome.kind}: {outcome.message[:200]}"
    return f"latency {outcome.latency_ms:.3f} ms, peak memory {outcome.peak_memory_mb:.1f} MB"
