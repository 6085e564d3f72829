"""Answers encoded once. Returning a model from a route makes FastAPI dump it, validate the
dump against the response model again and encode that with the standard json module: for the
table of a 100,000-result search that is seconds. Routes with large answers return these
instead (their response model still documents them)."""

from __future__ import annotations

from fastapi import Request, Response
from pydantic import BaseModel, TypeAdapter

from archvocab.wire import CandidateInfo
from server.services.compressed import Pieces

_CANDIDATES = TypeAdapter(list[CandidateInfo])
# Smaller answers go plain, here and through the app's gzip middleware.
GZIP_FROM_BYTES = 4096


def encoded(model: BaseModel, status_code: int = 200) -> Response:
    """`model` as JSON, encoded by pydantic."""
    return Response(model.model_dump_json(), status_code=status_code, media_type="application/json")


def encoded_candidates(candidates: list[CandidateInfo]) -> Response:
    """A list of candidates as JSON, encoded by pydantic."""
    return Response(_CANDIDATES.dump_json(candidates), media_type="application/json")


def encoded_pieces(request: Request, answer: Pieces) -> Response:
    """JSON made of `answer`'s pieces: gzip from their kept deflated forms when the client
    takes it (the app's gzip middleware leaves an answer with an encoding alone)."""
    if len(answer) < GZIP_FROM_BYTES or not _takes_gzip(request.headers.get("accept-encoding")):
        return Response(answer.plain(), media_type="application/json")
    headers = {"Content-Encoding": "gzip", "Vary": "Accept-Encoding"}
    return Response(answer.gzip(), media_type="application/json", headers=headers)


def _takes_gzip(accept_encoding: str | None) -> bool:
    """Whether an Accept-Encoding header takes gzip: named, or `*`, with a weight above 0."""
    weights = {}
    for item in (accept_encoding or "").split(","):
        name, _, params = item.strip().lower().partition(";")
        weight = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        weights[name.strip()] = weight
    return weights.get("gzip", weights.get("*", 0.0)) > 0
