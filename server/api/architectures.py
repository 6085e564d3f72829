"""/api/v1/architectures: an architecture to train or deploy (JSON, PyTorch source, ONNX).

Every route here takes its full id or a unique prefix of at least 8 characters, resolved by
server.services.arch_ids first."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import FileResponse

from archvocab.errors import InvalidSpec
from archvocab.wire import API_PREFIX, ArchitectureExport
from server.api.deps import ArchId, Reader, store_of
from server.api.responses import AUTH_ERRORS, EXPORT_ERRORS, ErrorBody
from server.services.arch_ids import resolve_arch_id
from server.services.export import architecture_export, onnx_file, torch_source

router = APIRouter(prefix=API_PREFIX)

AMBIGUOUS = {
    409: {"model": ErrorBody, "description": "an id prefix several architectures start with"}
}


def known_query(*names: str) -> object:
    """A dependency refusing query parameters other than `names` (a misspelt `seq_len`
    would otherwise be ignored silently)."""

    def check(request: Request) -> None:
        for name in request.query_params:
            if name not in names:
                allowed = ", ".join(names) or "none"
                raise InvalidSpec(name, f"unknown query parameter; allowed: {allowed}")

    return Depends(check)


@router.get(
    "/architectures/{arch_id}",
    response_model=ArchitectureExport,
    responses={**AUTH_ERRORS, **AMBIGUOUS},
    dependencies=[Reader, known_query()],
)
def get_architecture(arch_id: ArchId, request: Request) -> ArchitectureExport:
    """An architecture's full id, spec, parameter counts and the searches that proposed it,
    by its id or a unique prefix of it (as `/export?format=json` gives them)."""
    store = store_of(request)
    return architecture_export(store, resolve_arch_id(store, arch_id))


@router.get(
    "/architectures/{arch_id}/export",
    response_model=ArchitectureExport,
    responses={
        **AUTH_ERRORS,
        **EXPORT_ERRORS,
        **AMBIGUOUS,
        200: {"content": {"text/x-python": {}, "application/octet-stream": {}}},
    },
    dependencies=[Reader, known_query("format", "seq_len", "batch_size")],
)
def export_architecture(
    arch_id: ArchId,
    request: Request,
    format: Literal["json", "torch", "onnx"] = Query("json"),
    seq_len: int = Query(64, ge=1, le=4096, description="onnx: the input's sequence length"),
    batch_size: int = Query(1, ge=1, le=64, description="onnx: the input's batch size"),
) -> ArchitectureExport | Response:
    """An architecture to train or deploy: its spec and provenance (json), a Python file that
    builds the untrained PyTorch model (torch), or the untrained model as ONNX (onnx; made
    once per input shape in a child process, then served from the cache). Files are named by
    the full id, whatever prefix the request gave."""
    store = store_of(request)
    arch_id = resolve_arch_id(store, arch_id)
    if format == "torch":
        return Response(
            torch_source(store, arch_id),
            media_type="text/x-python",
            headers={"Content-Disposition": f'attachment; filename="hwnas-{arch_id}.py"'},
        )
    if format == "onnx":
        path = onnx_file(store, arch_id, batch_size=batch_size, seq_len=seq_len)
        return FileResponse(
            path, media_type="application/octet-stream", filename=f"hwnas-{arch_id}.onnx"
        )
    return architecture_export(store, arch_id)
