"""Exporting an architecture so a user can train or deploy it: as JSON, as a Python file that
builds the untrained PyTorch model, or as an ONNX file.

The server never imports torch. The Python file is text written here; the ONNX file is made
by `python -m agent.export` in a child process (`Settings.export_python`) and cached on disk
by (arch_id, batch_size, seq_len): arch ids are content hashes, so an entry never goes stale.
"""

from __future__ import annotations

import json
import os
import pprint
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from string import Template

from sqlalchemy import select
from sqlalchemy.engine import make_url

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec, kind_of_spec, parse_spec
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
UNAVAILABLE = 'ONNX export needs torch and onnx where the server runs: pip install "hwnas[agent]"'
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
    """A standalone Python file whose `build_model()` returns the untrained torch module."""
    row, searches = _read(store, arch_id)
    return python_source(row.arch_id, row.spec, searches)


def onnx_file(store: Store, arch_id: str, batch_size: int, seq_len: int) -> Path:
    """The cached ONNX export for a (batch_size, seq_len) token input, made on first request.

    InvalidSpec (422) when seq_len is too long for the model or its weights need more than one
    file; ExportUnavailable (501) when the export interpreter lacks torch or onnx.
    """
    row, _ = _read(store, arch_id)
    spec = parse_spec(row.spec)
    _check_exportable(spec, seq_len)
    path = export_dir(store.settings) / f"{arch_id}-b{batch_size}-s{seq_len}.onnx"
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


# -- the PyTorch file ----------------------------------------------------------------------
# What a training step looks like depends on what the kind's forward returns (see each
# archvocab/spaces/*/build.py): log-probabilities (gpt2, transxl), log-probabilities and recurrent
# state (nasbench_nlp), or encoder hidden states that need a head (flexibert).
_LM = """\
    for tokens in batches:  # LongTensor (batch, seq_len + 1), seq_len <= $max_seq_len
        log_probs = model(tokens[:, :-1])  # (batch, seq_len, vocab): log-probabilities
        loss = F.nll_loss(log_probs.flatten(0, 1), tokens[:, 1:].flatten())
"""
_RECURRENT = """\
    hidden = exported["example_inputs"](batch_size)[1]  # zero states, (n_states, batch, width)
    for tokens in batches:  # LongTensor (batch_size, seq_len + 1), consecutive text chunks
        log_probs, hidden = model(tokens[:, :-1], hidden)  # (batch, seq_len, vocab) log-probs
        hidden = hidden.detach()  # truncated backpropagation through time
        loss = F.nll_loss(log_probs.flatten(0, 1), tokens[:, 1:].flatten())
"""
_ENCODER = """\
    head = torch.nn.Linear($hidden_size, $vocab_size)  # the encoder returns hidden states
    optimizer.add_param_group({"params": head.parameters()})
    for tokens, labels in batches:  # masked LM: labels are -100 except at masked positions
        hidden = model(tokens)  # (batch, seq_len, $hidden_size), seq_len <= $max_seq_len
        loss = F.cross_entropy(head(hidden).flatten(0, 1), labels.flatten(), ignore_index=-100)
"""
_GENERIC = """\
    for inputs in batches:  # shaped as exported["example_inputs"](batch_size, seq_len)
        outputs = model(*inputs)  # what it returns, and so the loss: see $builder
        loss = ...
"""
_TRAINING = {"gpt2": _LM, "transxl": _LM, "nasbench_nlp": _RECURRENT, "flexibert": _ENCODER}

_SOURCE = Template('''\
"""hwnas architecture $arch_id ($kind): the untrained model, to train.

Decoder parameters: $decoder_params; total parameters: $total_params. Proposed by hwnas
search(es) $searches. Building it needs hwnas's model builders and torch, not the server:

    pip install "hwnas[agent]"  # hwnas's architecture vocabulary, with torch
    python hwnas-$arch_id.py  # smoke test: builds the model, runs one forward pass

Training, in outline (bring your own tokenizer and data; token ids < $vocab_size):

    import runpy
    import torch
    from torch.nn import functional as F

    exported = runpy.run_path("hwnas-$arch_id.py")
    model = exported["build_model"]().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    batch_size = 16
$training\
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

from archvocab.registry import kind_of_spec, parse_spec

ARCH_ID = "$arch_id"
TOTAL_PARAMS = $total_params
SPEC = $spec


def build_model():
    """SPEC's untrained torch.nn.Module, built by hwnas's own builder (random init)."""
    spec = parse_spec(SPEC)
    return kind_of_spec(spec).load_builder().build_model(spec)


def example_inputs(batch_size=1, seq_len=$example_seq_len):
    """Random inputs for the model's forward, as a tuple of tensors."""
    import torch

    spec = parse_spec(SPEC)
    generator = torch.Generator().manual_seed(0)
    return kind_of_spec(spec).load_builder().example_inputs(spec, batch_size, seq_len, generator)


if __name__ == "__main__":
    import torch

    model = build_model().eval()
    with torch.no_grad():
        outputs = model(*example_inputs())
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    count = sum(p.numel() for p in model.parameters())
    print(f"{ARCH_ID}: {count} parameters (expected {TOTAL_PARAMS}); outputs", end=" ")
    print(", ".join(str(tuple(t.shape)) for t in outputs))
''')


def python_source(arch_id: str, data: dict, searches: list[int]) -> str:
    """The file's text: `data` (the stored spec) as a literal, and a training outline."""
    spec = parse_spec(data)
    longest = spec.max_seq_len
    values = {
        "arch_id": arch_id,
        "kind": spec.kind,
        "decoder_params": spec.decoder_params(),
        "total_params": spec.total_params(),
        "vocab_size": data.get("vocab_size", "the vocabulary size"),
        "hidden_size": data.get("hidden_size"),
        "max_seq_len": longest if longest is not None else "any length",
        "example_seq_len": min(64, longest or 64),
        "builder": kind_of_spec(spec).builder.replace(".", "/") + ".py",
        "searches": ", ".join(map(str, searches)) or "(none)",
        "spec": pprint.pformat(data, width=92, sort_dicts=False),
    }
    training = Template(_TRAINING.get(spec.kind, _GENERIC)).substitute(values)
    return _SOURCE.substitute(values, training=training)
