"""`python -m agent.export --spec-file IN.json --out OUT.onnx`: one architecture to ONNX.

The server runs this in a child process when a user asks for an architecture as ONNX: the
server never imports torch, and may run where torch is not installed at all. The export is
the ONNX Runtime backend's (`agent.onnx_backend.export_onnx`): the same seeded, untrained
weights and the same graph an agent measures, for a (batch_size, seq_len) token input.

Exit status: 0 written; 2 bad arguments or spec (argparse); EXIT_MISSING_MODULE when torch,
onnx or onnxscript cannot be imported here; EXIT_TOO_LARGE when the weights would not fit in
one .onnx file. The reason is the last line of stderr.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec, parse_spec

EXIT_MISSING_MODULE = 3
EXIT_TOO_LARGE = 4
_EXPORT_MODULES = ("torch", "onnx", "onnxscript")  # torch's dynamo exporter needs all three
_FLOAT32_BYTES = 4  # the builders make float32 weights


def missing_module() -> str | None:
    """The first export dependency this interpreter cannot import, or None."""
    for name in _EXPORT_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            return name
    return None


def export(spec: ArchSpec, out: Path, batch_size: int, seq_len: int) -> None:
    """Write `spec`'s model to `out` as one self-contained .onnx file (no inputs beside it)."""
    from agent.onnx_backend import export_onnx, inputs_path
    from archvocab.wire import MeasurementSettings

    # The whole model, scores at every position: what training and a user's own decoding
    # loop need (a search times the last position only; see MeasurementSettings.output).
    settings = MeasurementSettings(
        runtime="onnxruntime", batch_size=batch_size, seq_len=seq_len, output="all"
    )
    export_onnx(spec, settings, str(out))
    os.remove(inputs_path(str(out)))  # the measurement input is the agent's business only


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.export", description=__doc__)
    parser.add_argument("--spec-file", type=Path, required=True, help="the spec as JSON")
    parser.add_argument("--out", type=Path, required=True, help="the .onnx file to write")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--seq-len", type=int, default=64)
    args = parser.parse_args(argv)
    try:
        spec = parse_spec(json.loads(args.spec_file.read_text()))
    except (OSError, ValueError, InvalidSpec) as exc:
        parser.error(f"--spec-file: {exc}")
    from agent.onnx_backend import EMBEDDED_WEIGHTS_LIMIT

    weight_bytes = spec.total_params() * _FLOAT32_BYTES
    if weight_bytes > EMBEDDED_WEIGHTS_LIMIT:  # checked before paying for torch's import
        print(
            f"weights of {weight_bytes / 2**20:.0f} MiB exceed the "
            f"{EMBEDDED_WEIGHTS_LIMIT / 2**20:.0f} MiB one .onnx file holds",
            file=sys.stderr,
        )
        return EXIT_TOO_LARGE
    missing = missing_module()
    if missing is not None:
        print(
            f"cannot import {missing}: ONNX export needs torch, onnx, onnxscript", file=sys.stderr
        )
        return EXIT_MISSING_MODULE
    export(spec, args.out, args.batch_size, args.seq_len)
    return 0


if __name__ == "__main__":
    sys.exit(main())
