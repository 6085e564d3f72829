"""/api/v1/agents: registering an agent (with an enrollment token) and the fleet's view."""

from __future__ import annotations

from fastapi import APIRouter, Request

from archvocab.wire import API_PREFIX, AgentInfo, AgentRegistration, AgentView
from server.api.deps import Calling, Enroller, Reader, services_of, store_of
from server.api.responses import AUTH_ERRORS
from server.services import agents

router = APIRouter(prefix=API_PREFIX)


@router.post(
    "/agents",
    status_code=201,
    response_model=AgentInfo,
    dependencies=[Enroller],
    responses=AUTH_ERRORS,
)
def register_agent(body: AgentRegistration, request: Request, who: Calling) -> AgentInfo:
    """Register an agent; with authentication on, the answer carries the agent's credential
    (shown once) for its claims, heartbeats and results."""
    return agents.register_agent(services_of(request), body, enrolled_by=who)


@router.get("/agents", response_model=list[AgentView], dependencies=[Reader], responses=AUTH_ERRORS)
def list_agents(request: Request) -> list[AgentView]:
    return agents.list_agents(store_of(request))
