"""Measure a candidate in fresh processes, with one timeout and typed failures.

The entry point the worker uses. No HTTP and no torch in this process: the spec is checked
here, then measured by a fresh process per candidate (`agent.launch`), so that each
candidate's memory high-water mark is its own and a crash or an OOM kill takes down only that
process.

- runtime "torch": one process forked from the forkserver (torch preloaded) builds and times.
- runtime "onnxruntime": two processes under one deadline: a forked one builds the model and
  exports it to a temporary ONNX file, then ``python -m agent.child`` (never imports torch,
  so ORT's memory high-water mark holds no torch copy of the model) times it.

Failure kinds: invalid_spec (the spec or its settings do not validate; found before spawning),
out_of_memory (MemoryError or an "out of memory" RuntimeError in the child, or the child
SIGKILLed by someone other than us: the OOM killer), timeout (no result within
settings.timeout_s; the child is killed), error (anything else).
"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agent.child import FAULT_ENV
from agent.failures import classify_exception, parse_job_spec, short
from agent.launch import CancelFlag, Ended, run_forked, run_subprocess
from archvocab.errors import InvalidSpec
from archvocab.wire import Failure, MeasurementResult, MeasurementSettings, ProxyRequest

__all__ = ["CancelFlag", "MeasurementCancelled", "measure_candidate"]

logger = logging.getLogger(__name__)


class MeasurementCancelled(Exception):
    """The caller's cancel event was set; the child was killed and nothing was measured."""


def measure_candidate(
    spec: Mapping[str, Any],
    settings: MeasurementSettings,
    *,
    cancel: CancelFlag | None = None,
    proxies: ProxyRequest | None = None,
) -> MeasurementResult | Failure:
    """Build and measure `spec` in fresh processes; a MeasurementResult or a typed Failure.

    `proxies` (low-cost proxies the search optimises) are computed after the measurement in
    one more fresh process, under the same deadline; the result carries them.
    Raises MeasurementCancelled if `cancel` is set before the measurement finishes.
    """
    try:
        parse_job_spec(spec, settings)
    except (InvalidSpec, ValidationError) as exc:
        return classify_exception(exc)
    deadline = time.monotonic() + settings.timeout_s
    job = {
        "spec": dict(spec),
        "settings": settings.model_dump(mode="json"),
        "fault": os.environ.get(FAULT_ENV) or None,  # test hook; see agent.child
    }
    try:
        if settings.runtime == "onnxruntime":
            outcome = _onnx(job, settings, deadline, cancel)
        else:
            outcome = _outcome(run_forked({**job, "step": "torch"}, deadline, cancel), settings)
        if isinstance(outcome, MeasurementResult) and proxies is not None and proxies.names:
            return _with_proxies(outcome, job, proxies, settings, deadline, cancel)
        return outcome
    except OSError as exc:
        return Failure(kind="error", message=short(f"could not start the measuring process: {exc}"))


def _with_proxies(
    measured: MeasurementResult,
    job: dict[str, Any],
    proxies: ProxyRequest,
    settings: MeasurementSettings,
    deadline: float,
    cancel: CancelFlag | None,
) -> MeasurementResult | Failure:
    started = time.monotonic()
    request = {**job, "step": "proxies", "proxies": proxies.model_dump(mode="json")}
    ended = run_forked(request, deadline, cancel)
    answer = ended.answer or {}
    if ended.status != "done" or "proxies" not in answer:
        outcome = _outcome(ended, settings)
        if isinstance(outcome, Failure):
            names = ", ".join(proxies.names)
            outcome.message = short(f"computing proxies {names}: {outcome.message}")
            return outcome
        return Failure(kind="error", message="the proxies process answered no proxies")
    details = {**measured.details, "proxies_s": time.monotonic() - started}
    try:  # validated again: a proxy can overflow to inf or come out NaN
        return MeasurementResult.model_validate(
            {
                **measured.model_dump(),
                "proxies": answer["proxies"],
                "proxy_inputs": proxies.inputs.key(),
                "details": details,
            }
        )
    except ValidationError as exc:
        return Failure(kind="error", message=short(f"proxy values unusable: {exc}"))


def _onnx(
    job: dict[str, Any], settings: MeasurementSettings, deadline: float, cancel: CancelFlag | None
) -> MeasurementResult | Failure:
    with tempfile.TemporaryDirectory(prefix="hwnas-onnx-") as tmp:
        path = os.path.join(tmp, "model.onnx")
        exported = run_forked({**job, "step": "export_onnx", "path": path}, deadline, cancel)
        if exported.status != "done" or "exported" not in (exported.answer or {}):
            return _outcome(exported, settings)
        measure_job = {
            **job,
            "step": "measure_onnx",
            "path": path,
            "build_s": exported.answer["exported"]["build_s"],
            "fault": None,
        }
        env = {**os.environ, "OMP_NUM_THREADS": str(settings.threads)}
        return _outcome(run_subprocess(measure_job, deadline, cancel, env), settings)


def _outcome(ended: Ended, settings: MeasurementSettings) -> MeasurementResult | Failure:
    if ended.log_tail.strip():
        logger.debug("measuring process output:\n%s", ended.log_tail)
    if ended.status == "cancelled":
        raise MeasurementCancelled("measurement cancelled; child killed")
    if ended.status == "timeout":
        return Failure(
            kind="timeout", message=f"no result within timeout_s={settings.timeout_s:g}; killed"
        )
    answer = ended.answer
    if answer is not None:
        try:
            if "measurement" in answer:
                return MeasurementResult.model_validate(answer["measurement"])
            return Failure.model_validate(answer["failure"])
        except (ValueError, KeyError, TypeError) as exc:
            return Failure(kind="error", message=short(f"unreadable result from child: {exc}"))
    return _died(ended)


def _died(ended: Ended) -> Failure:
    tail = short(ended.log_tail.strip()[-400:], 400)
    code = ended.returncode if ended.returncode is not None else 0
    if ended.unreadable:
        return Failure(kind="error", message=short(f"{ended.unreadable}. {tail}"))
    if code == -getattr(signal, "SIGKILL", 9):
        return Failure(
            kind="out_of_memory",
            message=f"measuring process was killed by SIGKILL (likely the OOM killer). {tail}",
        )
    if code < 0:
        return Failure(
            kind="error", message=f"measuring process died from {_signal_name(-code)}. {tail}"
        )
    return Failure(
        kind="error",
        message=f"measuring process exited with status {code} without a result. {tail}",
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
