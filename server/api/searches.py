"""/api/v1/searches: start, read and cancel searches; their frontier, convergence and report."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Query, Request, Response
from fastapi.responses import PlainTextResponse

from archvocab.wire import (
    API_PREFIX,
    CandidateInfo,
    FrontierPick,
    FrontierQuery,
    HypervolumeTrace,
    IntervalScope,
    JobStatus,
    PickQuery,
    SearchCreate,
    SearchInfo,
    SearchPoints,
    SearchReport,
    SpecForm,
)
from server.api.deps import Reader, SearchId, User, server_url, services_of
from server.api.encoded import encoded_candidates, encoded_pieces
from server.api.responses import AUTH_ERRORS
from server.services import choosing, points, report, searches
from server.services.views import frontier_csv

router = APIRouter(prefix=API_PREFIX)


@router.post(
    "/searches",
    status_code=201,
    response_model=SearchInfo,
    dependencies=[User],
    responses=AUTH_ERRORS,
)
def create_search(body: SearchCreate, request: Request, after: BackgroundTasks) -> SearchInfo:
    """Start a search; its `warnings` say at once when no agent of its device class has ever
    registered (it would wait for one). Candidates the measurement cache holds are told to it
    after the answer, beyond its first round."""
    services = services_of(request)
    after.add_task(searches.ask_again, services)
    return searches.create_search(services, body, server_url(request))


@router.get(
    "/searches/{search_id}/report",
    response_model=SearchReport,
    dependencies=[Reader],
    responses=AUTH_ERRORS,
)
def get_report(search_id: SearchId, request: Request) -> SearchReport:
    """The frontier against the layer-scaled baseline measured on the same device class."""
    return report.search_report(services_of(request), search_id)


@router.get(
    "/searches", response_model=list[SearchInfo], dependencies=[Reader], responses=AUTH_ERRORS
)
def list_searches(request: Request) -> list[SearchInfo]:
    return searches.list_searches(services_of(request), server_url(request))


@router.get(
    "/searches/{search_id}", response_model=SearchInfo, dependencies=[Reader], responses=AUTH_ERRORS
)
def get_search(search_id: SearchId, request: Request) -> SearchInfo:
    """The search; `agents` says whether any agent can measure it now, and if not, the
    command that would start one."""
    return searches.get_search_info(services_of(request), search_id, server_url(request))


@router.get(
    "/searches/{search_id}/hypervolume",
    response_model=HypervolumeTrace,
    dependencies=[Reader],
    responses=AUTH_ERRORS,
)
def get_hypervolume(search_id: SearchId, request: Request) -> HypervolumeTrace:
    """The measured frontier's normalised hypervolume after every result: convergence."""
    return searches.hypervolume_trace(services_of(request), search_id)


@router.get(
    "/searches/{search_id}/pareto",
    response_model=list[CandidateInfo],
    dependencies=[Reader],
    responses={**AUTH_ERRORS, 200: {"content": {"text/csv": {}}}},
)
def get_pareto(
    search_id: SearchId, request: Request, query: Annotated[FrontierQuery, Query()]
) -> Response:
    """The frontier's points (best estimates, with intervals), in result order, or those that
    meet bounds on any objective of the search (`max_latency_ms=20&min_decoder_params=5e6`;
    `bounds_on=interval`: the whole interval must meet them), ordered by one (`order_by`,
    best first unless `desc` says otherwise) and cut to `limit`."""
    front = choosing.frontier_points(services_of(request), search_id, query)
    if query.format == "csv":
        return PlainTextResponse(frontier_csv(front), media_type="text/csv")
    return encoded_candidates(front)


@router.get(
    "/searches/{search_id}/pick",
    response_model=FrontierPick,
    dependencies=[Reader],
    responses=AUTH_ERRORS,
)
def get_pick(
    search_id: SearchId, request: Request, query: Annotated[PickQuery, Query()]
) -> FrontierPick:
    """The best frontier point in the order `order_by` (required) that meets the bounds, the
    frontier points next to it in that order (`neighbours` on each side) and the others of its
    frontier group, each with its intervals and `frontier_certain`; 404 naming the bound that
    left no point and the point closest to meeting it."""
    return choosing.pick(services_of(request), search_id, query)


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
    frontier_since: Annotated[str | None, Query(max_length=64)] = None,
    spec: SpecForm = "full",
    intervals: IntervalScope = "all",
) -> Response:
    """Every told result as one compact table, and the frontier; `after` reads only newer
    results, `frontier_since` (a `frontier_token` read before) only the frontier's changes,
    `spec=summary` each architecture in one line instead of its plain data,
    `intervals=nominal` the intervals and groups of the nominal frontier points only."""
    services = services_of(request)
    answer = points.search_points(services, search_id, after, frontier_since, spec, intervals)
    return encoded_pieces(request, answer)


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
    return searches.list_candidates(services_of(request), search_id, status, limit, offset)


@router.post(
    "/searches/{search_id}/cancel",
    response_model=SearchInfo,
    dependencies=[User],
    responses=AUTH_ERRORS,
)
def cancel_search(search_id: SearchId, request: Request) -> SearchInfo:
    return searches.cancel_search(services_of(request), search_id)
