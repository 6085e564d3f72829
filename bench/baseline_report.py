"""A search against its layer-scaled baseline, measured for real on this machine.

A real `hwnas serve` on loopback and one real `hwnas agent` process measure an LTS search of
the chosen space kind and the kind's layer-scaled baseline (LTS section 4), then the search's
report (`GET /api/v1/searches/{id}/report`) is printed: the frontier point with the same
decoder parameters as the deepest baseline, and how much faster and leaner it is.

    .venv/bin/python bench/baseline_report.py --kind transxl --budget 100 --layers 1-16 \\
        --space '{"div_val": [4], "tgt_len": 64, "mem_len": 64}' \\
        --constraints '{"min_decoder_params": 50000000}'

`--constraints` aims the search at the deepest baseline's size, as a user who wants that
model's perplexity for less latency would.

A short search on a 2-core machine: an illustration of the report, not LTS's 3,000-candidate
search on LTS's devices.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

from hwnas.baseline import parse_layers
from hwnas.testing.agents import start_agent
from hwnas.testing.ports import free_port, loopback_url
from hwnas.testing.processes import Processes
from hwnas.testing.servers import start_server


def _wait(http: httpx.Client, search_id: int, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = http.get(f"/api/v1/searches/{search_id}").json()
        if info["status"] != "running":
            return info
        time.sleep(1.0)
    raise RuntimeError(f"search {search_id} did not finish within {timeout_s} s")


def run(args: argparse.Namespace) -> dict:
    space = {"kind": args.kind, **json.loads(args.space)}
    measurement = {"seq_len": args.seq_len}
    with tempfile.TemporaryDirectory(prefix="hwnas-report-") as tmp:
        procs = Processes(Path(tmp))
        port = free_port()
        url = loopback_url(port)
        try:
            # A benchmark on loopback: what it measures does not depend on tokens.
            start_server(procs, Path(tmp) / "report.db", port, "--no-auth", lease_seconds=None)
            start_agent(procs, "agent", url, device_class="bench-cpu")
            with httpx.Client(base_url=url, timeout=60) as http:
                search = {
                    "name": f"{args.kind} LTS",
                    "device_class": "bench-cpu",
                    "space": space,
                    "measurement": measurement,
                    "budget": {"max_evaluations": args.budget},
                    "constraints": json.loads(args.constraints),
                    # LTS's proportions (100 / 20 / 40 / 40) scaled to a short budget
                    "population": {"initial": 20, "parents": 4, "mutations": 8, "crossovers": 8},
                    "seed": args.seed,
                }
                search_id = http.post("/api/v1/searches", json=search).json()["id"]
                body = {
                    "space": space,
                    "device_class": "bench-cpu",
                    "measurement": measurement,
                    "layers": parse_layers(args.layers),
                }
                baseline = http.post("/api/v1/baselines", json=body)
                baseline.raise_for_status()
                _wait(http, search_id, args.timeout)
                _wait(http, baseline.json()["id"], args.timeout)
                return http.get(f"/api/v1/searches/{search_id}/report").json()
        finally:
            procs.stop_all()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", default="transxl")
    parser.add_argument("--space", default="{}", help="space settings as JSON")
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument(
        "--constraints",
        default="{}",
        help='search constraints as JSON, e.g. {"min_decoder_params": 5e7}',
    )
    parser.add_argument("--layers", default="1-16")
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args()
    print(json.dumps(run(args), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
