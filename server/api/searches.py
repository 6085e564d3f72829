"""HTTP routes. Thin: parse, call a service, shape the response. Errors are mapped in app.py."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response, Security
from fastapi.responses import FileResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from archvocab.points_wire import SearchPoints
from archvocab.proxy_wire import ProxyCheck, ProxyCheckResult, ProxyInfo
from archvocab.search_wire import JobStatus, SpaceKindInfo, SpecCheck, SpecChecked
from archvocab.wire import (
    AgentInfo,
    AgentRegistration,
    AgentView,
    ArchitectureExport,
    BaselineCreate,
    CandidateInfo,
    HypervolumeTrace,
    JobLease,
    JobResult,
    LeaseRef,
    LeaseStatus,
    ResultReceipt,
    SearchCreate,
    SearchInfo,
    SearchReport,
)
from server import jobs, points, proxy_check, report, searches, spaces
from server.auth import Caller, identify, require
from server.errors import Unauthenticated
from server.export import architecture_export, onnx_file, torch_source
from server.responses import CONFLICT, EXPORT_ERRORS
from server.store import Store
from server.views import frontier_csv

router = APIRouter(prefix="/api/v1")

# Ids are INTEGER database keys, 32-bit on PostgreSQL: anything outside that range is a 422,
# not a store error. PostgreSQL text cannot hold NUL characters either.
SearchId = Annotated[int, Path(ge=1, le=2**31 - 1)]
JobId = Annotated[int, Path(ge=1, le=2**31 - 1)]
AgentId = Annotated[str, Path(max_length=64, pattern=r"^[^\x00]*$")]


def _store(request: Request) -> Store:
    return request.app.state.store


# -- who is calling (server.auth) ------------------------------------------------------------
_bearer = HTTPBearer(
    auto_error=False,
    description="A user token, an agent enrollment token, or an agent's credential",
)
OPEN = Caller("open")
_ERROR = {"content": {"application/json": {"schema": {"type": "object"}}}}
AUTH_ERRORS: dict = {
    401: {"description": "no token, or one never issued or revoked", **_ERROR},
    403: {"description": "a token that does not allow this request", **_ERROR},
}


def caller(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
) -> Caller | None:
    """The caller the Authorization header names (None: no header); OPEN when auth is off."""
    store = _store(request)
    if not store.settings.auth:
        return OPEN
    with store.read() as session:
        return identify(session, request.headers.get("authorization"))


Calling = Annotated["Caller | None", Depends(caller)]


def user(request: Request, who: Calling) -> Caller:
    """Writes by users: a user token."""
    return require(who, "user", f"{request.method} {request.url.path}")


def reader(request: Request, who: Calling) -> Caller | None:
    """Reads: anyone, unless the server keeps reads private (then a user token)."""
    if _store(request).settings.private_reads:
        return require(who, "user", f"{request.method} {request.url.path}")
    return who


def enroller(request: Request, who: Calling) -> Caller:
    """Registering an agent: an agent enrollment token."""
    return require(who, "agent", "registering an agent")


def agent_caller(who: Calling) -> Caller:
    """Claims, heartbeats, results: an agent's credential (checked against its id later)."""
    if who is None:
        raise Unauthenticated(
            "claims, heartbeats and results need the agent's credential: send "
            "'Authorization: Bearer <credential>', the credential this server issued when the "
            "agent registered with an enrollment token"
        )
    return who


AgentCaller = Annotated[Caller, Depends(agent_caller)]


User = Depends(user)
Reader = Depends(reader)


@router.post(
    "/searches",
    status_code=201,
    response_model=SearchInfo,
    dependencies=[User],
    responses=AUTH_ERRORS,
)
def create_search(body: SearchCreate, request: Request) -> SearchInfo:
    return searches.create_search(_store(request), body)


@router.get(
    "/spaces", response_model=list[SpaceKindInfo], dependencies=[Reader], responses=AUTH_ERRORS
)
def list_spaces() -> list[SpaceKindInfo]:
    """The registered space kinds: summary, runtimes, baseline, default settings."""
    return spaces.list_space_kinds()


@router.post(
    "/spaces/check", response_model=SpecChecked, dependencies=[Reader], responses=AUTH_ERRORS
)
def check_spec(body: SpecCheck) -> SpecChecked:
    """Whether a spec is valid and a member of a space; 422 names the field and the reason."""
    return spaces.check_spec(body)


@router.get(
    "/proxies", response_model=list[ProxyInfo], dependencies=[Reader], responses=AUTH_ERRORS
)
def list_proxies() -> list[ProxyInfo]:
    """Every proxy a search may optimise: cost class, the kinds it applies to."""
    return proxy_check.list_proxies()


@router.post(
    "/proxies/check", response_model=ProxyCheckResult, dependencies=[Reader], responses=AUTH_ERRORS
)
def check_proxies(body: ProxyCheck, request: Request) -> ProxyCheckResult:
    """Each proxy's rank agreement with trained results of architectures hwnas has seen."""
    with _store(request).read() as session:
        return proxy_check.check_proxies(session, body)


@router.post(
    "/baselines",
    status_code=201,
    response_model=SearchInfo,
    dependencies=[User],
    responses=AUTH_ERRORS,
)
def create_baseline(body: BaselineCreate, request: Request) -> SearchInfo:
    """Measure the space's layer-scaled baseline: a search with strategy 'layer_scaled'."""
    return searches.create_search(_store(request), body.as_search())


@router.get(
    "/searches/{search_id}/report",
    response_model=SearchReport,
    dependencies=[Reader],
    responses=AUTH_ERRORS,
)
def get_report(search_id: SearchId, request: Request) -> SearchReport:
    """The frontier against the layer-scaled baseline measured on the same device class."""
    return report.search_report(_store(request), search_id)


@router.get(
    "/searches", response_model=list[SearchInfo], dependencies=[Reader], responses=AUTH_ERRORS
)
def list_searches(request: Request) -> list[SearchInfo]:
    return searches.list_searches(_store(request))


@router.get(
    "/searches/{search_id}", response_model=SearchInfo, dependencies=[Reader], responses=AUTH_ERRORS
)
def get_search(search_id: SearchId, request: Request) -> SearchInfo:
    return searches.get_search_info(_store(request), search_id)


@router.get(
    "/searches/{search_id}/hypervolume",
    response_model=HypervolumeTrace,
    dependencies=[Reader],
    responses=AUTH_ERRORS,
)
def get_hypervolume(search_id: SearchId, request: Request) -> HypervolumeTrace:
    """The measured frontier's normalised hypervolume after every result: convergence."""
    return searches.hypervolume_trace(_store(request), search_id)


@router.get(
    "/searches/{search_id}/pareto",
    response_model=list[CandidateInfo],
    dependencies=[Reader],
    responses={**AUTH_ERRORS, 200: {"content": {"text/csv": {}}}},
)
def get_pareto(
    search_id: SearchId, request: Request, format: Literal["json", "csv"] = Query("json")
) -> list[CandidateInfo] | Response:
    points = searches.pareto(_store(request), search_id)
    if format == "csv":
        return PlainTextResponse(frontier_csv(points), media_type="text/csv")
    return points


@router.get(
    "/searches/{search_id}/points",
    response_model=SearchPoints,
    dependencies=[Reader],
    responses=AUTH_ERRORS,
)
def get_points(
    search_id: SearchId,
    request: Request,
    after: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0,
) -> SearchPoints:
    """Every told result as one compact table, and the frontier; `after` reads only newer ones."""
    return points.search_points(_store(request), search_id, after)


@router.get(
    "/searches/{search_id}/candidates",
    response_model=list[CandidateInfo],
    dependencies=[Reader],
    responses=AUTH_ERRORS,
)
def get_candidates(
    search_id: SearchId,
    request: Request,
    status: JobStatus | None = None,
    limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> list[CandidateInfo]:
    """Candidates with their measurements, in proposal order; `limit`/`offset` page them
    (for plots and tables of large searches, /points is the compact read)."""
    return searches.list_candidates(_store(request), search_id, status, limit, offset)


@router.post(
    "/searches/{search_id}/cancel",
    response_model=SearchInfo,
    dependencies=[User],
    responses=AUTH_ERRORS,
)
def cancel_search(search_id: SearchId, request: Request) -> SearchInfo:
    return searches.cancel_search(_store(request), search_id)


@router.post(
    "/agents",
    status_code=201,
    response_model=AgentInfo,
    dependencies=[Depends(enroller)],
    responses=AUTH_ERRORS,
)
def register_agent(body: AgentRegistration, request: Request, who: Calling) -> AgentInfo:
    """Register an agent; with authentication on, the answer carries the agent's credential
    (shown once) for its claims, heartbeats and results."""
    return jobs.register_agent(_store(request), body, enrolled_by=who)


@router.get("/agents", response_model=list[AgentView], dependencies=[Reader], responses=AUTH_ERRORS)
def list_agents(request: Request) -> list[AgentView]:
    return jobs.list_agents(_store(request))


@router.post(
    "/agents/{agent_id}/claim",
    response_model=JobLease,
    responses={**AUTH_ERRORS, 204: {"description": "no work"}},
)
def claim(agent_id: AgentId, request: Request, who: AgentCaller) -> JobLease | Response:
    who.may_act_for(agent_id)
    lease = jobs.claim(_store(request), agent_id)
    return Response(status_code=204) if lease is None else lease


@router.post(
    "/jobs/{job_id}/heartbeat", response_model=LeaseStatus, responses={**AUTH_ERRORS, **CONFLICT}
)
def heartbeat(job_id: JobId, body: LeaseRef, request: Request, who: AgentCaller) -> LeaseStatus:
    who.may_act_for(body.agent_id)
    return jobs.heartbeat(_store(request), job_id, body)


@router.post(
    "/jobs/{job_id}/result", response_model=ResultReceipt, responses={**AUTH_ERRORS, **CONFLICT}
)
def submit_result(
    job_id: JobId, body: JobResult, request: Request, who: AgentCaller
) -> ResultReceipt:
    """Accepted once per job: a repeated submission (a retry after a timeout) is answered
    as a duplicate and changes nothing; see server.jobs.submit_result for late results."""
    who.may_act_for(body.agent_id)
    return jobs.submit_result(_store(request), job_id, body)


# An architecture's stable id: hex digits, at most the width of its database column.
ArchId = Annotated[str, Path(pattern=r"^[0-9a-f]{1,32}$")]


@router.get(
    "/architectures/{arch_id}/export",
    response_model=ArchitectureExport,
    responses={
        **AUTH_ERRORS,
        **EXPORT_ERRORS,
        200: {"content": {"text/x-python": {}, "application/octet-stream": {}}},
    },
    dependencies=[Reader],
)
def export_architecture(
    arch_id: ArchId,
    request: Request,
    format: Literal["json", "torch", "onnx"] = Query("json"),
    seq_len: int = Query(64, ge=1, le=4096, description="onnx: the input's sequence length"),
    batch_size: int = Query(1, ge=1, le=64, description="onnx: the input's batch size"),
) -> ArchitectureExport | Response:
    """An architecture to train or deploy: its spec and provenance (json), a Python file that
    builds the untrained PyTorch model (torch), or the untrained model as ONNX (onnx; made
    once per input shape in a child process, then served from the cache)."""
    store = _store(request)
    if format == "torch":
        return Response(
            torch_source(store, arch_id),
            media_type="text/x-python",
            headers={"Content-Disposition": f'attachment; filename="hwnas-{arch_id}.py"'},
        )
    if format == "onnx":
        path = onnx_file(store, arch_id, batch_size=batch_size, seq_len=seq_len)
        return FileResponse(
            path, media_type="application/octet-stream", filename=f"hwnas-{arch_id}.onnx"
        )
    return architecture_export(store, arch_id)
