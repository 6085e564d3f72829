"""Wire schemas of agents and their jobs: registration, the leased job (with its reference
architecture), the result an agent reports and the server's receipt."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, model_validator

from archvocab.wire.base import DeviceClass, Strict
from archvocab.wire.measurement import (
    Failure,
    MeasurementResult,
    MeasurementSettings,
    ProxyRequest,
    Runtime,
)


class DeviceFingerprint(Strict):
    hostname: str = Field(max_length=255)
    os: str = Field(max_length=255)
    cpu_model: str = Field(max_length=255)
    machine: str = Field(max_length=64, description="machine architecture, e.g. x86_64, aarch64")
    cores: int = Field(ge=1, le=100000)
    ram_bytes: int = Field(ge=0)
    torch_version: str = Field(max_length=64)
    accelerator: str | None = Field(None, max_length=255)
    runtimes: list[Runtime] = Field(
        default_factory=lambda: ["torch"], description="runtimes this agent can measure with"
    )


class AgentRegistration(Strict):
    device_class: DeviceClass
    name: str | None = Field(None, max_length=100)
    fingerprint: DeviceFingerprint


class AgentInfo(BaseModel):
    agent_id: str
    device_class: str
    name: str | None
    heartbeat_interval_s: float
    lease_seconds: float
    # The agent's own secret for claims, heartbeats and results, issued once at registration
    # by a server with authentication on (None otherwise).
    credential: str | None = None


class AgentView(BaseModel):
    """A registered agent as users see it."""

    agent_id: str
    name: str | None
    device_class: str
    fingerprint: DeviceFingerprint
    registered_at: datetime
    last_seen_at: datetime
    jobs_done: int
    failures: int
    online: bool = Field(False, description="seen within the server's lease period")


class ReferenceJob(BaseModel):
    """The search's reference architecture, which the agent re-measures (with the job's
    settings, in a fresh process) before a job when its last reading is older than `every_s`
    seconds or `every_jobs` jobs; the reading goes out with the result (`ReferenceReading`)."""

    arch_id: str
    spec: dict[str, Any]
    every_jobs: int = Field(ge=1)
    every_s: float = Field(gt=0)


class JobLease(BaseModel):
    """A claimed job: build `spec`, measure it with `settings`, report before expiry."""

    job_id: int
    lease_id: str
    lease_expires_at: datetime
    lease_seconds: float
    queued_at: datetime | None = Field(
        None,
        description="when the job last went into the queue (it waited for an agent until leased)",
    )
    search_id: int
    arch_id: str
    spec: dict[str, Any]
    settings: MeasurementSettings
    proxies: ProxyRequest | None = Field(
        None, description="low-cost proxies to compute too (in a process of their own)"
    )
    reference: ReferenceJob | None = Field(
        None, description="the reference architecture to keep re-measuring (drift and noise)"
    )
    busy_retries: int = Field(
        0, ge=0, description="measure again, up to this many times, while the result is busy"
    )


class LeaseRef(Strict):
    agent_id: str = Field(max_length=64)
    lease_id: str = Field(max_length=64)


class JobResult(LeaseRef):
    """Exactly one of `measurement` (success) or `failure`."""

    measurement: MeasurementResult | None = None
    failure: Failure | None = None

    @model_validator(mode="after")
    def _one_outcome(self) -> JobResult:
        if (self.measurement is None) == (self.failure is None):
            raise ValueError("exactly one of measurement or failure must be given")
        return self


class ResultReceipt(BaseModel):
    """The server's answer to a job result. A job keeps the first result it accepts: the same
    result sent again (a retry after a lost answer) is a `duplicate` and changes nothing."""

    job_id: int
    accepted: bool
    duplicate: bool = False
    next: JobLease | None = Field(
        None,
        description="with `claim_next`: the agent's next job, leased to it as a claim would "
        "(null: no work now, as a claim's 204)",
    )


class LeaseStatus(BaseModel):
    job_id: int
    lease_expires_at: datetime
