"""A spec in one line, for tables and hovers: the fields that say most about its shape, each
per-layer list shortened to its range. One definition for every place that shows specs (the
CLI's tables, the dashboard through /points?spec=summary)."""

from __future__ import annotations

from typing import Any

# Fields every spec of a kind shares or that say nothing about the shape at a glance.
QUIET = frozenset({"kind", "vocab_size", "n_positions", "cutoffs", "tgt_len", "mem_len"})


def spec_summary(spec: dict[str, Any]) -> str:
    """`spec` (its plain data) as "n_layer=4 d_model=256 d_inner=512..1024 ...": fields in
    the spec's order, a list of integers as its range, other lists and nested data left out."""
    parts = []
    for key, value in spec.items():
        if key in QUIET:
            continue
        if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            lo, hi = min(value), max(value)
            value = lo if lo == hi else f"{lo}..{hi}"
        elif isinstance(value, list | dict):
            continue
        parts.append(f"{key}={value}")
    return " ".join(parts)
