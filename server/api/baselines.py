"""/api/v1/baselines: measuring a space's layer-scaled baseline (a search of its own)."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Request

from archvocab.wire import API_PREFIX, BaselineCreate, SearchInfo
from server.api.deps import User, server_url, services_of
from server.api.responses import AUTH_ERRORS
from server.services import searches

router = APIRouter(prefix=API_PREFIX)


@router.post(
    "/baselines",
    status_code=201,
    response_model=SearchInfo,
    dependencies=[User],
    responses=AUTH_ERRORS,
)
def create_baseline(body: BaselineCreate, request: Request, after: BackgroundTasks) -> SearchInfo:
    """Measure the space's layer-scaled baseline: a search with strategy 'layer_scaled'."""
    services = services_of(request)
    after.add_task(searches.ask_again, services)  # what the measurement cache holds, told
    return searches.create_search(services, body.as_search(), server_url(request))
