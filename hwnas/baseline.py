"""`hwnas baseline` and `hwnas report`: measure a space's layer-scaled baseline on a device
class through a running server, and compare a search's frontier with it.

Plain HTTP to the server's REST API (httpx); the agents of that device class measure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import httpx


def parse_layers(text: str) -> list[int]:
    """'1-16' or '1,2,4,8' -> the list of depths."""
    layers: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        layers.extend(range(int(lo), int(hi or lo) + 1))
    return layers


def _check(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 400:
        body = response.json() if "json" in response.headers.get("content-type", "") else {}
        raise SystemExit(f"hwnas: {response.status_code}: {body.get('message') or response.text}")
    return response.json()


def _wait(http: httpx.Client, search_id: int, poll_s: float) -> dict[str, Any]:
    while True:
        info = _check(http.get(f"/api/v1/searches/{search_id}"))
        progress = info["progress"]
        done = progress["measured"] + progress["failed"]
        print(
            f"\rbaseline {search_id}: {done}/{progress['budget']} measured", end="", file=sys.stderr
        )
        if info["status"] != "running":
            print(file=sys.stderr)
            return info
        time.sleep(poll_s)


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
    with httpx.Client(base_url=args.server.rstrip("/"), timeout=30) as http:
        info = _check(http.post("/api/v1/baselines", json=body))
        print(f"baseline search {info['id']} started for {args.device_class}", file=sys.stderr)
        if not args.wait:
            print(json.dumps(info) if args.json else info["id"])
            return 0
        info = _wait(http, info["id"], args.poll_interval)
        candidates = _check(http.get(f"/api/v1/searches/{info['id']}/candidates"))
    print(json.dumps(candidates) if args.json else _table(candidates))
    return 0 if info["status"] == "finished" else 1


def _describe(point: dict[str, Any] | None) -> str:
    if point is None:
        return "-"
    return (
        f"{point['arch_id']} ({point['n_layer']} layers, {point['decoder_params'] / 1e6:.2f}M "
        f"decoder params): {point['latency_ms']:.2f} ms, {point['memory_mb']:.1f} MB"
    )


def run_report(args: argparse.Namespace) -> int:
    with httpx.Client(base_url=args.server.rstrip("/"), timeout=30) as http:
        report = _check(http.get(f"/api/v1/searches/{args.search_id}/report"))
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
