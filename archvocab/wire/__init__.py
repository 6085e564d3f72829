"""HTTP wire schemas shared by the server, the agent and clients (pydantic v2).

Import them from here (`from archvocab.wire import SearchCreate`); one module per concern:
- `base`: `Strict`, what every schema a client sends builds on;
- `measurement`: how an agent measures a candidate, what it reports, how a measurement fails;
- `agents`: agents, their leased jobs and results;
- `searches`: what users send to start a search, and the objectives;
- `search_views`: what users read back about a search, and the statuses of searches and jobs;
- `choosing`: choosing one architecture from a frontier: bounds, an order, the pick;
- `spaces`: space kinds, spec checks and exported architectures;
- `points`: the compact table of a search's results;
- `proxies`: the proxy catalogue and checking proxies against trained results;
- `http_api`: where the API lives and how a refusal reads on the client side.

Validation lives here so that every entry point rejects the same inputs with the same
messages: each error names the field and the allowed values.
"""

from __future__ import annotations

from archvocab.wire.agents import (
    AgentInfo,
    AgentRegistration,
    AgentView,
    DeviceFingerprint,
    JobLease,
    JobResult,
    LeaseRef,
    LeaseStatus,
    ReferenceJob,
    ResultReceipt,
)
from archvocab.wire.base import DeviceClass, Strict
from archvocab.wire.choosing import (
    BOUND_SIDES,
    BoundsOn,
    ChoosingQuery,
    FrontierPick,
    FrontierQuery,
    PickNeighbour,
    PickQuery,
    bound_name,
    split_bound,
)
from archvocab.wire.http_api import API_PREFIX, MAX_CLAIM_WAIT_S, ApiError, error_from
from archvocab.wire.measurement import (
    FAILURE_KINDS,
    MEMORY_KINDS,
    RUNTIMES,
    BusyAttempt,
    Failure,
    LatencyStats,
    MeasurementResult,
    MeasurementSettings,
    MemoryReport,
    Provenance,
    ProxyInputSettings,
    ProxyRequest,
    ReferenceReading,
    Runtime,
)
from archvocab.wire.points import BASE_COLUMNS, IntervalScope, SearchPoints, SpecForm
from archvocab.wire.proxies import (
    ProxyAgreement,
    ProxyCheck,
    ProxyCheckResult,
    ProxyInfo,
    TrainedResult,
)
from archvocab.wire.search_views import (
    AgentAvailability,
    BaselineComparison,
    CandidateInfo,
    HypervolumePoint,
    HypervolumeTrace,
    JobStatus,
    ModelError,
    NoiseSummary,
    ObjectiveBest,
    Progress,
    ReportPoint,
    SearchInfo,
    SearchReport,
    SearchStatus,
)
from archvocab.wire.searches import (
    DEFAULT_BASELINE_LAYERS,
    HARDWARE_OBJECTIVES,
    HWNAS_INITIAL,
    HWNAS_INITIAL_DESIGN,
    OBJECTIVE_SENSE,
    OBJECTIVES,
    PROXY_OBJECTIVES,
    STRATEGIES,
    BaselineCreate,
    Budget,
    Constraints,
    HypervolumeSettings,
    NoiseSettings,
    Population,
    SearchCreate,
)
from archvocab.wire.spaces import ArchitectureExport, SpaceKindInfo, SpecCheck, SpecChecked

__all__ = [
    "API_PREFIX",
    "MAX_CLAIM_WAIT_S",
    "AgentAvailability",
    "AgentInfo",
    "AgentRegistration",
    "AgentView",
    "ApiError",
    "ArchitectureExport",
    "BASE_COLUMNS",
    "BOUND_SIDES",
    "BoundsOn",
    "BaselineComparison",
    "BaselineCreate",
    "Budget",
    "BusyAttempt",
    "CandidateInfo",
    "ChoosingQuery",
    "Constraints",
    "DEFAULT_BASELINE_LAYERS",
    "DeviceClass",
    "DeviceFingerprint",
    "FAILURE_KINDS",
    "FrontierPick",
    "FrontierQuery",
    "Failure",
    "HARDWARE_OBJECTIVES",
    "HWNAS_INITIAL",
    "HWNAS_INITIAL_DESIGN",
    "HypervolumePoint",
    "HypervolumeSettings",
    "HypervolumeTrace",
    "IntervalScope",
    "JobLease",
    "JobResult",
    "JobStatus",
    "LatencyStats",
    "LeaseRef",
    "LeaseStatus",
    "MEMORY_KINDS",
    "MeasurementResult",
    "MeasurementSettings",
    "MemoryReport",
    "ModelError",
    "NoiseSettings",
    "NoiseSummary",
    "OBJECTIVES",
    "OBJECTIVE_SENSE",
    "ObjectiveBest",
    "PROXY_OBJECTIVES",
    "PickNeighbour",
    "PickQuery",
    "Population",
    "Progress",
    "Provenance",
    "ProxyAgreement",
    "ProxyCheck",
    "ProxyCheckResult",
    "ProxyInfo",
    "ProxyInputSettings",
    "ProxyRequest",
    "RUNTIMES",
    "ReferenceJob",
    "ReferenceReading",
    "ReportPoint",
    "ResultReceipt",
    "Runtime",
    "STRATEGIES",
    "SearchCreate",
    "SearchInfo",
    "SearchPoints",
    "SearchReport",
    "SearchStatus",
    "SpaceKindInfo",
    "SpecCheck",
    "SpecChecked",
    "SpecForm",
    "Strict",
    "TrainedResult",
    "bound_name",
    "error_from",
    "split_bound",
]
