"""Error answers in the OpenAPI document.

Every operation documents the errors its shape implies, derived here so that a new route
gets them without being told: a body can be unreadable (400) or too large (413), a path id can
name nothing (404), and parameters or a body can be invalid (422, in either of the two shapes
`server.app.errors` answers with). Errors only some routes give (401, 403, 409, 500, 501) are
declared on those routes with the constants below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field

REF = "#/components/schemas/{model}"


class ErrorBody(BaseModel):
    """An error hwnas answers itself (server.app.errors, the body limit)."""

    detail: str = Field(description="what is wrong, naming the field and the fix")
    field: str | None = Field(None, description="a spec or space check's field at fault (422)")
    resource: str | None = Field(None, description="the kind of thing not found (404)")


class ValidationIssue(BaseModel):
    loc: list[str | int] = Field(description="where: 'body', 'path' or 'query', then the field")
    msg: str
    type: str


class RequestInvalid(BaseModel):
    """422: the request does not match its schema (server.app.errors.invalid_request)."""

    detail: list[ValidationIssue]
    message: str = Field(description="the first problem, in one line")


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


# For `responses=` on the routes that give them.
_OBJECT = {"content": {"application/json": {"schema": {"type": "object"}}}}
AUTH_ERRORS: dict = {
    401: {"description": "no token, or one never issued or revoked", **_OBJECT},
    403: {"description": "a token that does not allow this request", **_OBJECT},
}
CONFLICT = {409: _error("the request contradicts the job's state (e.g. a lost lease)")}
EXPORT_ERRORS = {
    500: _error("the export process failed or ran out of time"),
    501: _error("this server cannot export to this format (a tool is not installed)"),
}

_BY_SHAPE = {
    "body": {
        "400": "the body is not JSON that can be read (not UTF-8, nested too deeply...)",
        "413": "the body is over the server's limit (Settings.max_request_bytes)",
    },
    "path": {"404": "no such resource: the path names nothing this server has"},
}


def document_errors(app: FastAPI) -> None:
    """Make `app.openapi()` add the errors each operation's shape implies."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            _add_errors(build())  # build() caches the document in app.openapi_schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _add_errors(document: dict[str, Any]) -> None:
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for model in (ErrorBody, RequestInvalid):
        definition = model.model_json_schema(ref_template=REF)
        schemas.update(definition.pop("$defs", {}))
        schemas.setdefault(model.__name__, definition)
    error = _content({"$ref": REF.format(model="ErrorBody")})
    invalid = _content(
        {
            "anyOf": [
                {"$ref": REF.format(model="RequestInvalid")},
                {"$ref": REF.format(model="ErrorBody")},
            ]
        }
    )
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            params = {p.get("in") for p in operation.get("parameters", [])}
            shapes = params | ({"body"} if "requestBody" in operation else set())
            for shape in shapes:
                for status, description in _BY_SHAPE.get(shape, {}).items():
                    responses.setdefault(status, {"description": description, **error})
            if shapes:
                # FastAPI documents only the schema-validation shape; a domain check (InvalidSpec)
                # answers 422 too, with an ErrorBody.
                responses["422"] = {"description": "invalid request", **invalid}


def _content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}
