"""/api/v1/proxies: the proxies a search may optimise, and their agreement with trained results."""

from __future__ import annotations

from fastapi import APIRouter, Request

from archvocab.wire import API_PREFIX, ProxyCheck, ProxyCheckResult, ProxyInfo
from server.api.deps import Reader, store_of
from server.api.responses import AUTH_ERRORS
from server.services import proxy_check

router = APIRouter(prefix=API_PREFIX)


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
    with store_of(request).read() as session:
        return proxy_check.check_proxies(session, body)
