"""The request body `hwnas search start` sends: `--file`'s JSON, then each flag given on top of
it at its SearchCreate field. A flag not given sends nothing, so the API's defaults
(archvocab.wire.SearchCreate) are the CLI's: one source of truth, and the API validates every
value (a bad one is its 422, naming the field)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# flag's argparse dest -> the request field it sets (dotted: nested objects)
FIELDS = {
    "name": "name",
    "device_class": "device_class",
    "strategy": "strategy",
    "seed": "seed",
    "budget": "budget.max_evaluations",
    "kind": "space.kind",
    "n_layer": "space.n_layer",
    "d_model": "space.d_model",
    "d_inner": "space.d_inner",
    "seq_len": "measurement.seq_len",
    "runtime": "measurement.runtime",
    "max_latency_ms": "constraints.max_latency_ms",
    "max_memory_mb": "constraints.max_memory_mb",
    "min_decoder_params": "constraints.min_decoder_params",
    "max_decoder_params": "constraints.max_decoder_params",
}


def request_body(args: argparse.Namespace) -> dict[str, Any]:
    """`--file` (or stdin for '-'), `--space` merged into its space, then the flags."""
    body: dict[str, Any] = {}
    if args.file:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        body = json.loads(text)
    if args.space:
        space = json.loads(args.space)
        if not isinstance(space, dict):
            raise ValueError("--space: a JSON object of space settings, e.g. '{\"n_layer\": ...}'")
        body["space"] = {**body.get("space", {}), **space}
    for dest, field in FIELDS.items():
        value = getattr(args, dest, None)
        if value is not None:
            put(body, field, value)
    if args.objectives:
        body["objectives"] = [o.strip() for o in args.objectives.split(",") if o.strip()]
    return body


def put(body: dict[str, Any], field: str, value: Any) -> None:
    """Set a dotted `field` of `body`, keeping what its parents already hold."""
    *parents, last = field.split(".")
    node = body
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
