"""Answers encoded once. Returning a model from a route makes FastAPI dump it, validate the
dump against the response model again and encode that with the standard json module: for the
table of a 100,000-result search that is seconds. Routes with large answers return these
instead (their response model still documents them)."""

from __future__ import annotations

from fastapi import Response
from pydantic import BaseModel, TypeAdapter

from archvocab.wire import CandidateInfo

_CANDIDATES = TypeAdapter(list[CandidateInfo])


def encoded(model: BaseModel, status_code: int = 200) -> Response:
    """`model` as JSON, encoded by pydantic."""
    return Response(model.model_dump_json(), status_code=status_code, media_type="application/json")


def encoded_candidates(candidates: list[CandidateInfo]) -> Response:
    """A list of candidates as JSON, encoded by pydantic."""
    return Response(_CANDIDATES.dump_json(candidates), media_type="application/json")
