"""/api/v1/architectures: an architecture to train or deploy (JSON, PyTorch source, ONNX)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import FileResponse

from archvocab.wire import API_PREFIX, ArchitectureExport
from server.api.deps import ArchId, Reader, store_of
from server.api.responses import AUTH_ERRORS, EXPORT_ERRORS
from server.services.export import architecture_export, onnx_file, torch_source

router = APIRouter(prefix=API_PREFIX)


@router.get(
    "/architectures/{arch_id}/export",
    response_model=ArchitectureExport,
    responses={
        **AUTH_ERRORS,
        **EXPORT_ERRORS,
        200: {"content": {"text/x-python": {}, "application/octet-stream": {}}},
    },
    dependencies=[Reader],
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
    once per input shape in a child process, then served from the cache)."""
    store = store_of(request)
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
