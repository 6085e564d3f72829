"""The search-efficiency headline with real agents: a real `hwnas serve`, real `hwnas agent`
processes measuring real PyTorch models on this machine, and hwnas's strategy.

`bench/search_efficiency.py` compares strategies on a replayed device table. This script
checks its headline where nothing is replayed: the hwnas strategy runs through the service
with real agents, and the hypervolume of its real measurements (normalised exactly as the
replay benchmark does) is compared with what LTS reaches with its full paper budget of 3,000
measurements on the replay of this machine's table (3,000 real measurements would take
about two hours here). Reported: the measured hypervolume after 50, 100, ... measurements,
the first count reaching 99% of LTS's, the device-hours spent, and the cost models' error on
real measurements.

    .venv/bin/python -m bench.confirm_real --budget 300 --json bench/results/confirm_real.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from archvocab.space import GPT2Space
from bench.agent_loop import _free_port, _start_server
from bench.replay import DeviceReplay
from bench.search_efficiency import make_normaliser, run_one
from search.hypervolume import Normaliser

DEVICE_CLASS = "bench-real"
CHECKPOINTS = (50, 100, 150, 200, 250, 300, 400, 500, 600)


def lts_full_budget(replay: DeviceReplay, norm: Normaliser, seeds: int) -> list[float]:
    """LTS's hypervolume after 3,000 replayed measurements, per seed."""
    return [
        run_one("lts", GPT2Space(), replay, norm, seed, 3000)["hv"][-1] for seed in range(seeds)
    ]


def run_real(budget: int, seed: int, agents: int, normalisation: dict, workdir: Path) -> dict:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = _start_server(workdir / "real.db", port, workdir / "server.log")
    procs: list[subprocess.Popen] = []
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            created = http.post(
                "/api/v1/searches",
                json={
                    "name": "confirm with real agents",
                    "strategy": "hwnas",
                    "device_class": DEVICE_CLASS,
                    "budget": {"max_evaluations": budget},
                    "hypervolume": normalisation,
                    "seed": seed,
                },
            )
            created.raise_for_status()
            search_id = created.json()["id"]
            for i in range(agents):
                log = (workdir / f"agent{i}.log").open("w")
                cmd = [
                    sys.executable,
                    "-m",
                    "hwnas",
                    "agent",
                    "--server",
                    url,
                    "--device-class",
                    DEVICE_CLASS,
                    "--exit-when-idle",
                    "120",
                ]
                procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
            while True:
                info = http.get(f"/api/v1/searches/{search_id}").json()
                p = info["progress"]
                print(f"  {p['measured']}/{budget} measured, hv {p['hypervolume']}", flush=True)
                if info["status"] != "running":
                    break
                time.sleep(15)
            trace = http.get(f"/api/v1/searches/{search_id}/hypervolume").json()
            candidates = http.get(f"/api/v1/searches/{search_id}/candidates").json()
            return {"search": info, "trace": trace, "candidates": candidates}
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        server.terminate()
        server.wait(timeout=30)


def report(real: dict, lts: list[float], budget: int) -> list[str]:
    points = real["trace"]["points"]
    target = 0.99 * statistics.median(lts)
    lines = [
        f"LTS, 3,000 replayed measurements, {len(lts)} seeds: hypervolume median "
        f"{statistics.median(lts):.4f} (min {min(lts):.4f}, max {max(lts):.4f}); "
        f"99% of the median = {target:.4f}",
        "",
        "| measured | device h | hypervolume | vs LTS-3000 median |",
        "|---|---|---|---|",
    ]
    for n in (c for c in CHECKPOINTS if c <= budget):
        at = [p for p in points if p["measured"] <= n]
        if at:
            p = at[-1]
            ratio = p["hypervolume"] / statistics.median(lts)
            lines.append(
                f"| {p['measured']} | {p['device_s'] / 3600:.2f} | {p['hypervolume']:.4f} | "
                f"{100 * ratio:.1f}% |"
            )
    reached = next((p for p in points if p["hypervolume"] >= target), None)
    lines.append("")
    if reached:
        lines.append(
            f"99% of LTS-3000 reached after {reached['measured']} real measurements "
            f"({100 * reached['measured'] / 3000:.1f}% of 3,000), "
            f"{reached['device_s'] / 3600:.2f} device-hours"
        )
    else:
        lines.append(f"99% of LTS-3000 NOT reached within {budget} real measurements")
    busy = sum(
        1
        for c in real["candidates"]
        if (c.get("measurement") or {}).get("provenance", {}).get("busy")
    )
    lines.append(f"measurements flagged busy: {busy} of {len(real['candidates'])}")
    for e in real["search"]["surrogate"]:
        lines.append(
            f"cost model {e['objective']}: median error {e['median_abs_pct']:.1f}%, p90 "
            f"{e['p90_abs_pct']:.1f}%, latest 50 {e['recent_median_abs_pct']:.1f}% "
            f"({e['predictions']} predictions)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--agents", type=int, default=1)
    parser.add_argument("--lts-seeds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.time()
    replay = DeviceReplay.load()
    norm = make_normaliser(replay, GPT2Space())
    lts = lts_full_budget(replay, norm, args.lts_seeds)
    with tempfile.TemporaryDirectory(prefix="hwnas-confirm-") as tmp:
        real = run_real(args.budget, args.seed, args.agents, norm.to_dict(), Path(tmp))
    lines = report(real, lts, args.budget)
    lines.append(
        f"wall time {time.time() - started:.0f} s; command: bench/confirm_real.py "
        + " ".join(argv if argv is not None else sys.argv[1:])
    )
    print("\n".join(lines))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"lts_3000": lts, "real": real, "report": lines}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
