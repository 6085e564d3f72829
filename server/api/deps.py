"""What routes depend on: the store and the services' caches, who is calling, and the bounds of
the ids a path carries."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from server.services.auth import Caller, require
from server.services.auth import agent_caller as caller_of_agent_route
from server.services.auth import caller as caller_of
from server.services.auth import enroller as enrolling
from server.services.context import Services
from server.store.store import Store

# Ids are INTEGER database keys, 32-bit on PostgreSQL: anything outside that range is a 422,
# not a store error. PostgreSQL text cannot hold NUL characters either.
SearchId = Annotated[int, Path(ge=1, le=2**31 - 1)]
JobId = Annotated[int, Path(ge=1, le=2**31 - 1)]
AgentId = Annotated[str, Path(max_length=64, pattern=r"^[^\x00]*$")]
# An architecture's stable id: hex digits, at most the width of its database column.
ArchId = Annotated[str, Path(pattern=r"^[0-9a-f]{1,32}$")]


def store_of(request: Request) -> Store:
    return request.app.state.store


def services_of(request: Request) -> Services:
    return request.app.state.services


def server_url(request: Request) -> str:
    """This server's URL as the client reached it: for commands a response tells it to run."""
    return str(request.base_url).rstrip("/")


# -- who is calling (server.services.auth) ---------------------------------------------------
_bearer = HTTPBearer(
    auto_error=False,
    description="A user token, an agent enrollment token, or an agent's credential",
)


def caller(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
) -> Caller | None:
    """The caller the Authorization header names (None: no header); OPEN when auth is off."""
    return caller_of(store_of(request), request.headers.get("authorization"))


Calling = Annotated[Caller | None, Depends(caller)]


def user(request: Request, who: Calling) -> Caller:
    """Writes by users: a user token."""
    return require(who, "user", f"{request.method} {request.url.path}")


def reader(request: Request, who: Calling) -> Caller | None:
    """Reads: anyone, unless the server keeps reads private (then a user token)."""
    if store_of(request).settings.private_reads:
        return require(who, "user", f"{request.method} {request.url.path}")
    return who


def enroller(request: Request, who: Calling) -> Caller:
    """Registering an agent: an agent enrollment token."""
    return enrolling(who)


def agent_caller(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
) -> Caller:
    """Claims, heartbeats, results: an agent's credential (`server.services.auth.agent_caller`)."""
    return caller_of_agent_route(store_of(request), request.headers.get("authorization"))


AgentCaller = Annotated[Caller, Depends(agent_caller)]


User = Depends(user)
Reader = Depends(reader)
Enroller = Depends(enroller)
