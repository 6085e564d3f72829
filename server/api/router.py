"""The REST API under /api/v1 (archvocab.wire.API_PREFIX): one router per resource, each
with the prefix in its routes' paths, so that a request's route template is the whole path.
Routes are thin (parse, call a service, shape the answer); errors are translated to HTTP in
server.app.errors."""

from __future__ import annotations

from fastapi import APIRouter

from server.api import agents, architectures, baselines, jobs, proxies, searches, spaces

router = APIRouter()
for resource in (searches, spaces, proxies, baselines, agents, jobs, architectures):
    router.include_router(resource.router)
