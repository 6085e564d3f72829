"""Wire schemas of what users read back about a search: its status and progress, its
candidates, hypervolume trace, noise, cost models' error and the baseline report; the
statuses of searches and jobs."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from archvocab.wire.measurement import Failure
from archvocab.wire.searches import SearchCreate


class Progress(BaseModel):
    budget: int
    proposed: int
    queued: int
    running: int
    measured: int
    failed: int
    reused: int = Field(description="measured candidates whose result came from the cache")
    generation: int
    hypervolume: float | None = Field(
        None,
        description="of the measured frontier, normalised (see /hypervolume); None "
        "until the reference is fixed",
    )
    remeasured: int = Field(0, description="re-measurements of frontier points done so far")
    remeasuring: int = Field(0, description="re-measurements queued or running")
    remeasure_budget: int = Field(0, description="re-measurements the search may spend")


class ObjectiveBest(BaseModel):
    objective: str
    sense: str
    value: float
    arch_id: str


class HypervolumePoint(BaseModel):
    """The measured frontier's hypervolume after one more result."""

    results: int = Field(description="results told so far (measurements and failures)")
    measured: int = Field(description="successful measurements so far")
    device_s: float = Field(description="device-seconds the agents spent so far")
    at: datetime
    hypervolume: float


class HypervolumeTrace(BaseModel):
    """How a search converges: its hypervolume after every result."""

    search_id: int
    objectives: list[str]
    ideal: dict[str, float] | None = Field(description="normalised to 0 (None until fixed)")
    reference: dict[str, float] | None = Field(description="normalised to 1")
    source: dict[str, str] = Field(
        default_factory=dict, description="per objective: where its reference came from"
    )
    points: list[HypervolumePoint]


class ModelError(BaseModel):
    """How far a surrogate's predictions were from what the device measured."""

    objective: str
    predictions: int = Field(description="measured candidates that had a prediction")
    median_abs_pct: float = Field(description="median |predicted - measured| / measured, in %")
    p90_abs_pct: float
    recent_median_abs_pct: float = Field(description="the same over the latest 50")


class NoiseSummary(BaseModel):
    """What the search knows of its device class's measurement noise (search.noise)."""

    confidence: float
    sigma: dict[str, float] = Field(
        description="per measured objective: the log-scale spread between fresh processes"
    )
    dof: dict[str, float] = Field(description="degrees of freedom of sigma, the prior's included")
    reference_readings: int = Field(description="readings of the reference architecture so far")
    earlier_readings: int = Field(
        0,
        description="reference readings from earlier searches on this device class with the "
        "same settings, which the noise model learns from too",
    )
    reference_level: dict[str, float] | None = Field(
        description="the median reference reading, what drift-corrected values are relative to"
    )
    interval_rel: dict[str, list[float]] = Field(
        description="per measured objective: the interval of a single measurement relative "
        "to its value, [low, high]"
    )
    reference_sigma: dict[str, float] = Field(
        default_factory=dict,
        description="per measured objective, the log-scale spread of the reference readings "
        "alone; `sigma` adds what candidates show beyond it, and is what intervals use",
    )
    busy_results: int = Field(description="results measured while the machine looked busy")
    plain_frontier_size: int = Field(description="the frontier if the values were exact")
    certain_frontier_size: int = Field(
        0,
        description="frontier points no other point could dominate within the noise: they "
        "stay on it whatever a re-measurement gives; the rest cannot be told on or off it",
    )


class SearchStatus(StrEnum):
    """Where a search is: proposing and measuring, done (budget spent or space exhausted), or
    stopped by its user."""

    RUNNING = "running"
    FINISHED = "finished"
    CANCELLED = "cancelled"


class JobStatus(StrEnum):
    """Where one candidate's measurement is: waiting for an agent, leased to one, told
    (measured or failed), or dropped with its cancelled search."""

    QUEUED = "queued"
    RUNNING = "running"
    MEASURED = "measured"
    FAILED = "failed"
    CANCELLED = "cancelled"


class AgentAvailability(BaseModel):
    """The agents that could measure a search: of its device class, ever and now."""

    online: int = Field(description="agents of the device class seen within a lease period")
    able: int = Field(
        description="of those, the agents that can run the search's runtime and device "
        "(counted over at most 64 of them)"
    )
    ever_registered: int = Field(description="agents of the device class ever registered")
    waiting_for_agent: str | None = Field(
        None,
        description="set while the search runs and no online agent can measure it: what it "
        "waits for and the command that would start an agent",
    )
    command: str | None = Field(
        None, description="with waiting_for_agent: the command that starts an agent for it"
    )


class SearchInfo(BaseModel):
    id: int
    name: str | None
    status: SearchStatus
    device_class: str
    created_at: datetime
    finished_at: datetime | None
    finish_reason: str | None
    progress: Progress
    frontier_size: int
    best: list[ObjectiveBest]
    surrogate: list[ModelError] = Field(
        default_factory=list,
        description="strategy hwnas: the cost models' prediction error so far",
    )
    noise: NoiseSummary | None = None
    request: SearchCreate
    agents: AgentAvailability | None = Field(
        None, description="the agents that could measure it (None where not counted)"
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="what the user should know now, e.g. that no agent of the device class "
        "has ever registered, so nothing will be measured until one does",
    )


class CandidateInfo(BaseModel):
    arch_id: str
    generation: int
    status: JobStatus
    spec: dict[str, Any]
    objectives: dict[str, float | None]
    feasible: bool | None
    on_frontier: bool
    reused: bool = Field(False, description="measurement reused from an earlier search")
    failure: Failure | None = None
    measurement: dict[str, Any] | None = None
    intervals: dict[str, list[float]] = Field(
        default_factory=dict,
        description="per measured objective, [low, high]: meant to contain a re-measurement "
        "in a fresh process on the device class with probability noise.confidence",
    )
    corrected: dict[str, float] = Field(
        default_factory=dict,
        description="per measured objective, the value corrected for drift by the nearest "
        "reference reading (to the median of the search's reference readings)",
    )
    frontier_group: str | None = Field(
        None,
        description="on the frontier: the arch id of the nominal frontier point it cannot be "
        "told apart from (its own id for a nominal frontier point)",
    )
    frontier_certain: bool | None = Field(
        None,
        description="on the frontier: true when no other point could dominate it within the "
        "noise (it stays on whatever a re-measurement gives), false when the noise cannot "
        "tell it on or off; null off the frontier",
    )
    busy: bool = Field(
        False, description="its first measurement was taken while the machine looked busy"
    )
    measurements: int = Field(
        0,
        description="quiet measurements its values are the geometric mean of (the first and "
        "any re-measurements); 0 when every one was busy: then it stays off the frontier",
    )


class ReportPoint(BaseModel):
    arch_id: str
    n_layer: int
    decoder_params: float
    latency_ms: float
    memory_mb: float


class BaselineComparison(BaseModel):
    """The frontier against the deepest point of a layer-scaled baseline (LTS section 4)."""

    baseline_search_id: int
    deepest: ReportPoint = Field(description="the baseline's deepest measured model")
    matched: ReportPoint | None = Field(
        description="the frontier point with the fewest decoder parameters at or above the "
        "deepest baseline's (the same predicted perplexity)"
    )
    latency_speedup: float | None = Field(description="deepest baseline / matched latency")
    memory_reduction: float | None = Field(description="deepest baseline / matched memory")
    fastest: ReportPoint | None = Field(description="lowest latency with >= its parameters")
    leanest: ReportPoint | None = Field(description="lowest memory with >= its parameters")
    note: str = ""


class SearchReport(BaseModel):
    search_id: int
    status: str
    measured: int
    frontier_size: int
    baseline: BaselineComparison | None
    note: str = Field("", description="why there is no comparison, when there is none")
