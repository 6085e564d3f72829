"""Imported once by the agent's forkserver, so forked measuring processes start warm.

No tensor work here: a thread pool started in the server would not survive the fork
(OpenMP's pool is not fork-safe), and what a first forward pass initialises belongs in each
child's own memory baseline (`agent.in_process.prime_runtime`). Only imports, one run of the
protocol's statistics on fixed numbers (numpy loads parts of itself on first use), and
`gc.freeze()`: the hundreds of thousands of objects the imports made are left out of every
child's garbage collections (a full collection over them costs about 0.2 s) and their pages
are not copied by the collector touching them.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import sys

# CUDA must not be initialised before a fork (the children would fail to use it). Should
# anything imported below ask torch.cuda.is_available() or device_count(), let it ask NVML.
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

import torch  # noqa: E402, F401

import agent.child  # noqa: E402, F401
import agent.in_process  # noqa: E402, F401
import archvocab.spaces.gpt2.build  # noqa: E402, F401
from agent import latency_protocol  # noqa: E402


def _warm_statistics() -> None:
    samples = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.2]
    latency_protocol.is_stable(samples)
    latency_protocol.summarize(
        samples,
        confidence=0.95,
        inner=1,
        stop_reason="ci_target",
        warmup=latency_protocol.Warmup(runs=len(samples), per_run_s=samples),
        timed_s=1.0,
    )


def _onnx_export_stack() -> None:
    """Where ONNX Runtime jobs can run, torch's exporter stack too (about 2 s of imports that
    every export would pay again otherwise)."""
    if all(importlib.util.find_spec(name) for name in ("onnxruntime", "onnxscript")):
        import onnxscript  # noqa: F401
        import torch._dynamo  # noqa: F401
        import torch.onnx  # noqa: F401


def _main_script() -> None:
    """Import the agent's main script as multiprocessing would in every child (see
    agent.launch.PRELOAD): once here, so that each child finds it loaded.

    Python puts a script's folder first on sys.path; CPython 3.11's forkserver does not pass
    the parent's sys.path on, so the folder is added here for the script's own imports. A
    script that still fails to import is left to the children (each imports it, as without
    this), and the rest of the preload goes on: a failure here must not cost every candidate
    the torch import.
    """
    path = os.environ.get("HWNAS_FORKSERVER_MAIN")
    if not path or not os.path.isfile(path):
        return
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    from multiprocessing import spawn

    try:
        spawn.import_main_path(path)
    except Exception as exc:  # the script's business; the children will report it
        print(f"agent.preload: main script {path} not preloaded: {exc!r}", file=sys.stderr)


_main_script()
_warm_statistics()
_onnx_export_stack()
gc.collect()
gc.freeze()
