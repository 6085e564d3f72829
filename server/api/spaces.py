"""/api/v1/spaces: the registered space kinds, and checking a spec against a space."""

from __future__ import annotations

from fastapi import APIRouter

from archvocab.wire import API_PREFIX, SpaceKindInfo, SpecCheck, SpecChecked
from server.api.deps import Reader
from server.api.responses import AUTH_ERRORS
from server.services import spaces

router = APIRouter(prefix=API_PREFIX)


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
