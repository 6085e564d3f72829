"""HTTP wire schemas shared by the server, the agent and clients (pydantic v2).

Validation lives here so that every entry point rejects the same inputs with the same
messages: each error names the field and the allowed values.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from archvocab.errors import InvalidSpec
from archvocab.space import GPT2Space

PROXY_OBJECTIVES = ("decoder_params", "total_params")
HARDWARE_OBJECTIVES = ("latency_ms", "memory_mb")
OBJECTIVES = PROXY_OBJECTIVES + HARDWARE_OBJECTIVES
# Proxies are maximised (more decoder parameters predict lower perplexity); cost is minimised.
OBJECTIVE_SENSE = {
    "decoder_params": "max",
    "total_params": "max",
    "latency_ms": "min",
    "memory_mb": "min",
}
FAILURE_KINDS = ("invalid_spec", "out_of_memory", "timeout", "error")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# -- measurement ----------------------------------------------------------------------------
class MeasurementSettings(Strict):
    """How an agent measures one candidate."""

    batch_size: int = Field(1, ge=1, le=256)
    seq_len: int = Field(64, ge=1, le=8192)
    threads: int = Field(1, ge=1, le=256)
    warmup: int = Field(3, ge=0, le=100)
    repeats: int = Field(10, ge=1, le=1000)
    device: Literal["cpu", "cuda"] = "cpu"
    timeout_s: float = Field(300.0, gt=0, le=24 * 3600)


class MeasurementResult(Strict):
    """What an agent reports for a candidate it measured."""

    latency_ms: float = Field(ge=0, description="median of the timed runs")
    latency_iqr_ms: float = Field(ge=0)
    latency_samples_ms: list[float] = Field(min_length=1, max_length=10000)
    peak_memory_mb: float = Field(ge=0, description="high-water mark above the pre-build baseline")
    memory_method: str = Field(max_length=200)
    baseline_memory_mb: float = Field(ge=0)
    weights_mb: float = Field(ge=0)
    build_s: float = Field(ge=0)
    details: dict[str, Any] = Field(default_factory=dict)


class Failure(Strict):
    kind: Literal["invalid_spec", "out_of_memory", "timeout", "error"]
    message: str = Field("", max_length=4000)


# -- agents ---------------------------------------------------------------------------------
class DeviceFingerprint(Strict):
    hostname: str = Field(max_length=255)
    os: str = Field(max_length=255)
    cpu_model: str = Field(max_length=255)
    machine: str = Field(max_length=64, description="machine architecture, e.g. x86_64, aarch64")
    cores: int = Field(ge=1, le=100000)
    ram_bytes: int = Field(ge=0)
    torch_version: str = Field(max_length=64)
    accelerator: str | None = Field(None, max_length=255)


class AgentRegistration(Strict):
    device_class: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:-]+$")
    name: str | None = Field(None, max_length=100)
    fingerprint: DeviceFingerprint


class AgentInfo(BaseModel):
    agent_id: str
    device_class: str
    name: str | None
    heartbeat_interval_s: float
    lease_seconds: float


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


class JobLease(BaseModel):
    """A claimed job: build `spec`, measure it with `settings`, report before expiry."""

    job_id: int
    lease_id: str
    lease_expires_at: datetime
    lease_seconds: float
    search_id: int
    arch_id: str
    spec: dict[str, Any]
    settings: MeasurementSettings


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


class LeaseStatus(BaseModel):
    job_id: int
    lease_expires_at: datetime


# -- searches -------------------------------------------------------------------------------
class Budget(Strict):
    max_evaluations: int = Field(100, ge=1, le=100000)


class Constraints(Strict):
    """Optional bounds. Parameter bounds are checked before anything is sent to a device."""

    max_latency_ms: float | None = Field(None, gt=0)
    max_memory_mb: float | None = Field(None, gt=0)
    min_decoder_params: int | None = Field(None, ge=0)
    max_decoder_params: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Constraints:
        lo, hi = self.min_decoder_params, self.max_decoder_params
        if lo is not None and hi is not None and lo > hi:
            raise ValueError("min_decoder_params must be <= max_decoder_params")
        return self


class Population(Strict):
    """LTS's released defaults: 100 initial samples, 20 parents, 40 mutants, 40 crossovers."""

    initial: int = Field(100, ge=1, le=10000)
    parents: int = Field(20, ge=1, le=10000)
    mutations: int = Field(40, ge=0, le=10000)
    crossovers: int = Field(40, ge=0, le=10000)
    mutation_prob: float = Field(0.3, ge=0, le=1)
    crossover_prob: float = Field(0.5, ge=0, le=1)

    @model_validator(mode="after")
    def _some_children(self) -> Population:
        if self.mutations + self.crossovers < 1:
            raise ValueError("mutations + crossovers must be >= 1")
        return self


class SearchCreate(Strict):
    name: str | None = Field(None, max_length=200)
    space: dict[str, Any] = Field(
        default_factory=dict, description="overrides of the GPT-2 space (see GPT2Space)"
    )
    objectives: list[str] = Field(
        default_factory=lambda: ["decoder_params", "latency_ms", "memory_mb"]
    )
    device_class: str = Field("cpu", min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:-]+$")
    measurement: MeasurementSettings = Field(default_factory=MeasurementSettings)
    budget: Budget = Field(default_factory=Budget)
    constraints: Constraints = Field(default_factory=Constraints)
    population: Population = Field(default_factory=Population)
    seed: int = Field(0, ge=0, le=2**63 - 1)

    @field_validator("space")
    @classmethod
    def _space_valid(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            return GPT2Space.from_dict(value).to_dict()
        except InvalidSpec as exc:
            raise ValueError(str(exc)) from None
        except TypeError as exc:
            raise ValueError(f"invalid space setting: {exc}") from None

    @field_validator("objectives")
    @classmethod
    def _objectives_valid(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in OBJECTIVES:
                raise ValueError(f"unknown objective {name!r}; allowed: {', '.join(OBJECTIVES)}")
        if len(set(value)) != len(value):
            raise ValueError("objectives must not repeat")
        if sum(v in PROXY_OBJECTIVES for v in value) != 1:
            raise ValueError(
                f"exactly one proxy objective is needed, one of: {', '.join(PROXY_OBJECTIVES)}"
            )
        if not any(v in HARDWARE_OBJECTIVES for v in value):
            raise ValueError(
                f"at least one hardware objective is needed: {', '.join(HARDWARE_OBJECTIVES)}"
            )
        return value

    @model_validator(mode="after")
    def _fits_positions(self) -> SearchCreate:
        n_positions = GPT2Space.from_dict(self.space).n_positions
        if self.measurement.seq_len > n_positions:
            raise ValueError(f"measurement.seq_len must be <= space.n_positions ({n_positions})")
        return self


class Progress(BaseModel):
    budget: int
    proposed: int
    queued: int
    running: int
    measured: int
    failed: int
    generation: int


class ObjectiveBest(BaseModel):
    objective: str
    sense: str
    value: float
    arch_id: str


class SearchInfo(BaseModel):
    id: int
    name: str | None
    status: Literal["running", "finished", "cancelled"]
    device_class: str
    created_at: datetime
    finished_at: datetime | None
    finish_reason: str | None
    progress: Progress
    frontier_size: int
    best: list[ObjectiveBest]
    request: SearchCreate


class CandidateInfo(BaseModel):
    arch_id: str
    generation: int
    status: Literal["queued", "running", "measured", "failed", "cancelled"]
    spec: dict[str, Any]
    objectives: dict[str, float | None]
    feasible: bool | None
    on_frontier: bool
    failure: Failure | None = None
    measurement: dict[str, Any] | None = None
