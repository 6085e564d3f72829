"""Exporting an architecture so a user can train or deploy it: as JSON, as a self-contained
Python file that builds the untrained PyTorch model and trains it, or as an ONNX file.

The server never imports torch. The Python file is text assembled from the builders' source
(`archvocab.standalone`); the ONNX file is made by `python -m agent.export` in a child process
(`Settings.export_python`) and cached on disk by (arch_id, batch_size, seq_len): arch ids are
content hashes, so an entry never goes stale.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.engine import make_url

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec, parse_spec
from archvocab.standalone import torch_file
from archvocab.wire import ArchitectureExport
from server.errors import ExportFailed, ExportUnavailable, NotFound
from server.settings import Settings
from server.store.rows import ArchitectureRow, CandidateRow
from server.store.store import Store

EXPORT_TIMEOUT_S = 600.0
# = agent.onnx_backend.EMBEDDED_WEIGHTS_LIMIT (a test keeps them equal; the server may not
# import the agent): above it the exporter writes the weights to a second file.
SINGLE_FILE_WEIGHTS_LIMIT = 1536 * 2**20
# = agent.export's exit statuses (a test keeps them equal).
EXIT_MISSING_MODULE = 3
EXIT_TOO_LARGE = 4
UNAVAILABLE = (
    "ONNX export needs torch, onnx and onnxscript where the server runs: "
    "pip install torch onnx onnxscript"
)
_FLOAT32_BYTES = 4

# One lock per cache file, so concurrent requests for one export wait for a single child
# process instead of each starting its own (a lock is small; the dict is not pruned).
_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def architecture_export(store: Store, arch_id: str) -> ArchitectureExport:
    """The architecture's spec, counts and the searches that proposed it; NotFound if unknown."""
    row, searches = _read(store, arch_id)
    return ArchitectureExport(
        arch_id=row.arch_id,
        kind=parse_spec(row.spec).kind,
        spec=row.spec,
        decoder_params=row.decoder_params,
        total_params=row.total_params,
        searches=searches,
    )


def torch_source(store: Store, arch_id: str) -> str:
    """A Python file that needs only torch: `build_model()` returns the untrained module,
    `python hwnas-<arch_id>.py train corpus.txt` trains it (`archvocab.standalone`)."""
    row, searches = _read(store, arch_id)
    return torch_file(parse_spec(row.spec), searches)


def onnx_file(store: Store, arch_id: str, batch_size: int, seq_len: int) -> Path:
    """The cached ONNX export, traced with a (batch_size, seq_len) token input and made on
    first request: `input_ids` -> `log_probs` (`agent.export.export`), any batch size and any
    length up to the model's longest (a recurrent model's length is seq_len).

    InvalidSpec (422) when seq_len is too long for the model or its weights need more than one
    file; ExportUnavailable (501) when the export interpreter lacks torch or onnx.
    """
    row, _ = _read(store, arch_id)
    spec = parse_spec(row.spec)
    _check_exportable(spec, seq_len)
    # "dynamic": files of the fixed-shape exporter that came before stay unused in a cache
    path = export_dir(store.settings) / f"{arch_id}-b{batch_size}-s{seq_len}-dynamic.onnx"
    with _lock_for(path):
        if not path.exists():
            _export(store.settings.export_python, row.spec, path, batch_size, seq_len)
    return path


def export_dir(settings: Settings) -> Path:
    """Settings.export_dir, else `<db file>.exports` beside a SQLite file (it goes where the
    database goes, and a test's database in tmp_path gets its own), else a temp directory
    (entries are keyed by content hash, so servers sharing it cannot disagree)."""
    if settings.export_dir is not None:
        return Path(settings.export_dir)
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        return Path(f"{url.database}.exports")
    return Path(tempfile.gettempdir()) / "hwnas-exports"


def _read(store: Store, arch_id: str) -> tuple[ArchitectureRow, list[int]]:
    with store.read() as session:
        row = session.get(ArchitectureRow, arch_id)
        if row is None:
            raise NotFound("architecture", arch_id)
        searches = session.scalars(
            select(CandidateRow.search_id)
            .where(CandidateRow.arch_id == arch_id)
            .distinct()
            .order_by(CandidateRow.search_id)
        ).all()
    return row, list(searches)


def _check_exportable(spec: ArchSpec, seq_len: int) -> None:
    if spec.max_seq_len is not None and seq_len > spec.max_seq_len:
        raise InvalidSpec(
            "seq_len", f"{seq_len} exceeds this architecture's longest input, {spec.max_seq_len}"
        )
    weight_bytes = spec.total_params() * _FLOAT32_BYTES
    if weight_bytes > SINGLE_FILE_WEIGHTS_LIMIT:
        raise InvalidSpec("format", _too_large(weight_bytes))


def _too_large(weight_bytes: int) -> str:
    # Such a model takes minutes and several GiB of server memory to export; refusing beats
    # serving a two-file zip of gigabytes from the API server.
    return (
        f"onnx export is limited to weights of {SINGLE_FILE_WEIGHTS_LIMIT // 2**20} MiB (one "
        f"ONNX file); this architecture has {weight_bytes / 2**20:.0f} MiB: take format=torch "
        "and export it yourself with torch.onnx.export(..., external_data=True)"
    )


def _lock_for(path: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(path, threading.Lock())


def _export(python: str, spec: dict, path: Path, batch_size: int, seq_len: int) -> None:
    """Run the exporter into a scratch folder beside `path`, then move the model into place:
    a reader never sees a half-written file, and a failed export leaves nothing behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".export-", dir=path.parent))
    try:
        (scratch / "spec.json").write_text(json.dumps(spec))
        out = scratch / "model.onnx"
        command = [python, "-m", "agent.export", "--spec-file", str(scratch / "spec.json")]
        command += ["--out", str(out), "--batch-size", str(batch_size), "--seq-len", str(seq_len)]
        _check_exit(_run_child(command), spec)
        os.replace(out, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_child(command: list[str]) -> subprocess.CompletedProcess[str]:
    # The child finds `agent` as `python -m` does: installed, or in the server's working
    # directory (a checkout). PYTHONPATH is left alone: export_python may be another Python.
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ExportFailed(f"ONNX export took longer than {EXPORT_TIMEOUT_S:.0f} s") from None
    except OSError as exc:  # the configured interpreter is missing or not executable
        raise ExportUnavailable(f"{UNAVAILABLE} ({command[0]}: {exc.strerror})") from None


def _check_exit(done: subprocess.CompletedProcess[str], spec: dict) -> None:
    if done.returncode == 0:
        return
    if done.returncode == EXIT_MISSING_MODULE or "ModuleNotFoundError" in done.stderr:
        raise ExportUnavailable(UNAVAILABLE)
    if done.returncode == EXIT_TOO_LARGE:
        weight_bytes = parse_spec(spec).total_params() * _FLOAT32_BYTES
        raise InvalidSpec("format", _too_large(weight_bytes))
    lines = done.stderr.strip().splitlines() or ["no message"]
    raise ExportFailed(f"ONNX export failed (exit status {done.returncode}): {lines[-1]}")
