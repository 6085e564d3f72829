"""Typed failures: what went wrong with a candidate, in the kinds the server understands.

Torch-free, so the agent's main process can reject a bad spec before spawning a child.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from archvocab.errors import InvalidSpec
from archvocab.registry import ArchSpec, parse_spec
from archvocab.wire import Failure, MeasurementSettings

MAX_MESSAGE = 1000
_OOM_PATTERNS = ("out of memory", "can't allocate memory", "not enough memory")


def parse_job_spec(spec: Mapping[str, Any], settings: MeasurementSettings) -> ArchSpec:
    """The spec of a job, checked against its settings; raises InvalidSpec naming the field."""
    parsed = parse_spec(spec)
    limit = parsed.max_seq_len
    if limit is not None and settings.seq_len > limit:
        raise InvalidSpec(
            "settings.seq_len",
            f"{settings.seq_len} exceeds the longest sequence the spec takes ({limit})",
        )
    return parsed


def short(message: str, limit: int = MAX_MESSAGE) -> str:
    """`message` cut to `limit` characters, marking the cut."""
    return message if len(message) <= limit else message[: limit - 3] + "..."


def classify_exception(exc: BaseException) -> Failure:
    """Map an exception raised while building or running a candidate to a typed Failure."""
    text = short(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, (InvalidSpec, ValidationError)):
        return Failure(kind="invalid_spec", message=text)
    if isinstance(exc, MemoryError):
        return Failure(kind="out_of_memory", message=text)
    if isinstance(exc, RuntimeError) and any(p in str(exc).lower() for p in _OOM_PATTERNS):
        return Failure(kind="out_of_memory", message=text)
    return Failure(kind="error", message=text)
