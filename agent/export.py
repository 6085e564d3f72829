"""`python -m agent.export --spec-file IN.json --out OUT.onnx`: one architecture to ONNX.

The server runs this in a child process when a user asks for an architecture as ONNX: the
server never imports torch, and may run where torch is not installed at all. The model is the
one an agent measures (the same seeded, untrained weights), with named inputs and outputs
(`input_ids` -> `log_probs`) and dynamic batch and sequence axes (`export`), so one file runs
any batch size and any length the model takes. Where the server runs, it needs torch, onnx
and onnxscript installed (`pip install torch onnx onnxscript`).

Exit status: 0 written; 2 bad arguments or spec (argparse); EXIT_MISSING_MODULE when torch,
onnx or onnxscript cannot be imported here; EXIT_TOO_LARGE when the weights would not fit in
one .onnx file. The reason is the last line of stderr.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec, kind_of_spec, parse_spec

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


# What each kind's forward takes and returns, named in the ONNX graph. A recurrent model is
# unrolled over its time steps when traced, so its sequence axis stays the traced length.
_INPUT_NAMES = {"nasbench_nlp": ["input_ids", "states"]}
_OUTPUT_NAMES = {"flexibert": ["hidden_states"], "nasbench_nlp": ["log_probs", "next_states"]}
_FIXED_SEQUENCE = {"nasbench_nlp"}


def io_names(spec: ArchSpec) -> tuple[list[str], list[str]]:
    """The exported graph's input and output names for `spec`'s kind."""
    kind = kind_of_spec(spec).name
    return _INPUT_NAMES.get(kind, ["input_ids"]), _OUTPUT_NAMES.get(kind, ["log_probs"])


def export(spec: ArchSpec, out: Path, batch_size: int, seq_len: int) -> None:
    """Write `spec`'s model to `out` as one self-contained .onnx file (no inputs beside it).

    The model is the one an agent measures (`agent.in_process.build_for`: seeded weights), with
    scores at every position: what training and a user's own decoding loop need (a search times
    the last position only; see MeasurementSettings.output). Inputs and outputs are named
    (`io_names`: `input_ids` int64 (batch, sequence) -> `log_probs`, or `hidden_states` for an
    encoder); the batch axis is dynamic, and so is the sequence axis up to the model's longest
    input, except a recurrent model's, which is `seq_len` (its cell is unrolled per step).
    `batch_size` and `seq_len` are the example input it is traced with.
    """
    import torch

    from agent.in_process import build_for, make_inputs
    from agent.onnx_backend import OPSET, make_exportable
    from archvocab.wire import MeasurementSettings

    kind = kind_of_spec(spec).name
    fixed_sequence = kind in _FIXED_SEQUENCE
    # torch.export specializes an axis whose example size is 1: trace with at least 2.
    longest = spec.max_seq_len
    traced_len = seq_len if fixed_sequence else max(seq_len, min(2, longest or 2))
    settings = MeasurementSettings(
        runtime="onnxruntime", batch_size=max(batch_size, 2), seq_len=traced_len, output="all"
    )
    model, _ = build_for(spec, settings, torch.device("cpu"))
    make_exportable(model)
    inputs = make_inputs(spec, settings, torch.device("cpu"))
    input_names, output_names = io_names(spec)
    with warnings.catch_warnings(), torch.no_grad(), _dct_for_a_symbolic_length():
        # torch 2.13's exporter trips its own pytree deprecation; nothing we can change.
        warnings.filterwarnings(
            "ignore", message=r"`isinstance\(treespec, LeafSpec\)`", category=FutureWarning
        )
        # the states' batch axis is the tokens': the exporter says it names it once
        warnings.filterwarnings("ignore", message=r"# The axis name: batch will not be used")
        torch.onnx.export(
            model,
            inputs,
            str(out),
            dynamo=True,
            opset_version=OPSET,
            input_names=input_names,
            output_names=output_names,
            dynamic_shapes=_dynamic_shapes(
                len(inputs), None if fixed_sequence else longest or 2**20
            ),
            external_data=False,  # main() refuses weights beyond one file's limit
            verbose=False,
        )


@contextmanager
def _dct_for_a_symbolic_length() -> Iterator[None]:
    """While exporting: FlexiBERT's DCT matrix with its scale made by tensor ops.

    The builder's `_dct_matrix` scales by math.sqrt(2 / n); with a dynamic sequence n is
    symbolic, and ONNX has no op for the square root of a symbolic size. The same values up to
    rounding (tests compare ONNX Runtime with torch). The builder module's global is swapped,
    which is safe here: the exporter is a process of its own (the server's child).
    """
    import torch

    from archvocab.spaces.flexibert import build

    def dct_matrix(n: Any, like: torch.Tensor) -> torch.Tensor:
        position = torch.arange(n, dtype=like.dtype, device=like.device)
        basis = torch.cos(math.pi * (2 * position[None, :] + 1) * position[:, None] / (2 * n))
        scale = (torch.full((n, 1), 2.0, dtype=like.dtype, device=like.device) / n).sqrt()
        scale[0] = scale[0] / math.sqrt(2.0)  # sqrt(1 / n)
        return basis * scale

    original = build._dct_matrix
    build._dct_matrix = dct_matrix
    try:
        yield
    finally:
        build._dct_matrix = original


def _dynamic_shapes(n_inputs: int, longest: int | None) -> tuple[dict[int, Any], ...]:
    """Token ids (batch, sequence): both axes dynamic, the sequence up to `longest`, or fixed
    where `longest` is None; a recurrent model's states (n_states, batch, width) share the
    batch axis."""
    import torch

    batch = torch.export.Dim("batch", min=1)
    tokens: dict[int, Any] = {0: batch}
    if longest is not None:
        tokens[1] = torch.export.Dim("sequence", min=1, max=longest)
    return (tokens, {1: batch}) if n_inputs == 2 else (tokens,)


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
