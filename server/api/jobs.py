"""The jobs agents do: a claim leases one (204: no work), heartbeats keep the lease, a result
ends it. Each needs the agent's own credential. Their answers are encoded once (`encoded`):
these are the requests a fleet sends most."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Query, Request, Response

from archvocab.wire import (
    API_PREFIX,
    MAX_CLAIM_WAIT_S,
    JobLease,
    JobResult,
    LeaseRef,
    LeaseStatus,
    ResultReceipt,
)
from server.api.deps import AgentCaller, AgentId, JobId, services_of, store_of
from server.api.encoded import encoded
from server.api.responses import AUTH_ERRORS, CONFLICT
from server.services import arrivals, jobs

router = APIRouter(prefix=API_PREFIX)


@router.post(
    "/agents/{agent_id}/claim",
    response_model=JobLease,
    responses={**AUTH_ERRORS, 204: {"description": "no work"}},
)
def claim(
    agent_id: AgentId,
    request: Request,
    who: AgentCaller,
    wait: Annotated[
        float,
        Query(
            ge=0,
            le=MAX_CLAIM_WAIT_S,
            description="seconds the claim may wait for work before it is answered 204: it "
            "is answered as soon as a job is leased (a long poll, instead of asking again)",
        ),
    ] = 0,
) -> Response:
    """A claim that reads as expected, waiting or not, is answered in front of this route
    (server.app.agent_path); this route answers the others, at once."""
    lease = jobs.claim(services_of(request), agent_id, who)
    return Response(status_code=204) if lease is None else encoded(lease)


@router.post(
    "/jobs/{job_id}/heartbeat", response_model=LeaseStatus, responses={**AUTH_ERRORS, **CONFLICT}
)
def heartbeat(job_id: JobId, body: LeaseRef, request: Request, who: AgentCaller) -> Response:
    return encoded(jobs.heartbeat(store_of(request), job_id, body, who))


@router.post(
    "/jobs/{job_id}/result", response_model=ResultReceipt, responses={**AUTH_ERRORS, **CONFLICT}
)
def submit_result(
    job_id: JobId,
    body: JobResult,
    request: Request,
    who: AgentCaller,
    after: BackgroundTasks,
    claim_next: Annotated[
        bool,
        Query(
            description="also claim the agent's next job, answered as `next`: one request "
            "fewer per job"
        ),
    ] = False,
) -> Response:
    """Accepted once per job: a repeated submission (a retry after a timeout) is answered
    as a duplicate and changes nothing; see server.services.jobs.submit_result for late
    results. The search hears of the result once the answer has gone (`arrivals.settle`).
    With `claim_next`, the agent's next job comes with the answer, as its claim would."""
    services = services_of(request)
    receipt, search_id = jobs.report(services, job_id, body, who, claim_next)
    if search_id is not None:
        after.add_task(arrivals.settle_after_answer, services, search_id)
    return encoded(receipt)
