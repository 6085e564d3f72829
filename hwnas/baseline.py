"""`hwnas baseline` and `hwnas report`: measure a space's layer-scaled baseline on a device
class through a running server, and compare a search's frontier with it.

Through the Python client (hwnas.client); the agents of that device class measure. The
arguments are in hwnas.client_args.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from archvocab.wire import SearchInfo
from hwnas.client import ApiError, Client


def parse_layers(text: str) -> list[int]:
    """'1-16' or '1,2,4,8' -> the list of depths."""
    layers: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        layers.extend(range(int(lo), int(hi or lo) + 1))
    return layers


def _show(info: SearchInfo) -> None:
    progress = info.progress
    done = progress.measured + progress.failed
    print(f"\rbaseline {info.id}: {done}/{progress.budget} measured", end="", file=sys.stderr)
    if info.status != "running":
        print(file=sys.stderr)


def _table(candidates: list[dict[str, Any]]) -> str:
    rows = ["layers  decoder params  latency ms  memory MB  status"]
    for c in sorted(candidates, key=lambda c: c["spec"]["n_layer"]):
        o = c["objectives"]
        latency = f"{o['latency_ms']:10.2f}" if o["latency_ms"] is not None else " " * 10
        memory = f"{o['memory_mb']:9.1f}" if o["memory_mb"] is not None else " " * 9
        rows.append(
            f"{c['spec']['n_layer']:6d}  {o['decoder_params'] / 1e6:12.2f}M  {latency}  {memory}"
            f"  {c['status']}"
        )
    return "\n".join(rows)


@contextmanager
def _client(args: argparse.Namespace) -> Iterator[Client]:
    """A client; a refusal ends the command with the server's message."""
    try:
        with Client(args.server, token=args.token) as client:
            yield client
    except ApiError as exc:
        raise SystemExit(f"hwnas: {exc}") from None


def run_baseline(args: argparse.Namespace) -> int:
    space = json.loads(args.space) if args.space else {}
    if args.kind:
        space["kind"] = args.kind
    body: dict[str, Any] = {
        "space": space,
        "device_class": args.device_class,
        "layers": parse_layers(args.layers),
    }
    if args.measurement:
        body["measurement"] = json.loads(args.measurement)
    with _client(args) as client:
        info = client.start_baseline(body)
        print(f"baseline search {info.id} started for {args.device_class}", file=sys.stderr)
        if not args.wait:
            print(info.model_dump_json() if args.json else info.id)
            return 0
        info = client.wait(info.id, poll_s=args.poll_interval, on_progress=_show)
        candidates = [c.model_dump(mode="json") for c in client.candidates(info.id)]
    print(json.dumps(candidates) if args.json else _table(candidates))
    return 0 if info.status == "finished" else 1


def _describe(point: dict[str, Any] | None) -> str:
    if point is None:
        return "-"
    return (
        f"{point['arch_id']} ({point['n_layer']} layers, {point['decoder_params'] / 1e6:.2f}M "
        f"decoder params): {point['latency_ms']:.2f} ms, {point['memory_mb']:.1f} MB"
    )


def run_report(args: argparse.Namespace) -> int:
    with _client(args) as client:
        report = client.report(args.search_id).model_dump(mode="json")
    if args.json:
        print(json.dumps(report))
        return 0
    print(
        f"search {report['search_id']} ({report['status']}): {report['measured']} measured, "
        f"{report['frontier_size']} on the frontier"
    )
    comparison = report["baseline"]
    if comparison is None:
        print(report["note"])
        return 0
    print(
        f"deepest baseline (search {comparison['baseline_search_id']}): "
        f"{_describe(comparison['deepest'])}"
    )
    print(f"frontier point with as many decoder parameters: {_describe(comparison['matched'])}")
    if comparison["matched"] is not None:
        print(
            f"  {comparison['latency_speedup']:.2f}x faster, "
            f"{comparison['memory_reduction']:.2f}x less memory"
        )
    print(f"fastest at or above: {_describe(comparison['fastest'])}")
    print(f"leanest at or above: {_describe(comparison['leanest'])}")
    if comparison["note"]:
        print(comparison["note"])
    return 0
