"""The search-efficiency headline with real agents: a real `hwnas serve`, real `hwnas agent`
processes measuring real PyTorch models on this machine, and hwnas's strategy.

`bench/search_efficiency.py` compares strategies on a replayed device table. This script
checks its headline where nothing is replayed: the hwnas strategy runs through the service
with real agents, and the hypervolume of its real measurements is compared with what LTS
reaches with its full paper budget of 3,000 measurements on the replay of this machine's
table (3,000 real measurements would take hours here).

The machine drifts (its latencies move by tens of percent over an hour), so the comparison is
anchored in the run, two ways: after the search the script measures, through the agent's own
path, the space's largest member (the reference point of the benchmark normalisation) and a
sample of the table's architectures again; and it compares every measurement the search made
with the replay's value for the same architecture (the drift during the search). The real
run is normalised with the reference measured after it, with the replayed reference scaled
by the drift during it, and with the table's reference unscaled. For each: hypervolume after
50, 100, ... measurements, the first count reaching 99% of LTS's, the device-hours spent;
and the cost models' error on real measurements.

    .venv/bin/python -m bench.confirm_real --budget 300 --json bench/results/confirm_real.json

`--resume PATH` skips the search and re-reads a previous run's JSON (then anchors it).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from agent.measure import measure_candidate
from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.wire import MeasurementSettings
from bench.normalisation import OBJECTIVES, extremes, make_normaliser
from bench.replay import DeviceReplay
from bench.strategy_runs import run_one
from hwnas.testing.agents import start_agent
from hwnas.testing.ports import free_port, loopback_url
from hwnas.testing.processes import Processes
from hwnas.testing.servers import start_server
from search.hypervolume import Normaliser, hypervolume

DEVICE_CLASS = "bench-real"
CHECKPOINTS = (50, 100, 150, 200, 250, 300, 400, 500, 600)


def lts_full_budget(replay: DeviceReplay, norm: Normaliser, seeds: int) -> list[float]:
    """LTS's hypervolume after 3,000 replayed measurements, per seed."""
    return [
        run_one("lts", GPT2Space(), replay, norm, seed, 3000)["hv"][-1] for seed in range(seeds)
    ]


def run_real(budget: int, seed: int, agents: int, normalisation: dict, workdir: Path) -> dict:
    procs = Processes(workdir)
    port = free_port()
    url = loopback_url(port)
    try:
        # A benchmark on loopback: what it measures does not depend on tokens.
        start_server(procs, workdir / "real.db", port, "--no-auth", lease_seconds=None)
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
                start_agent(
                    procs,
                    f"agent{i}",
                    url,
                    "--exit-when-idle",
                    "120",
                    device_class=DEVICE_CLASS,
                    poll_interval=1.0,
                )
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
        procs.stop_all()


def anchor(replay: DeviceReplay, repeats: int, sample: int, seed: int) -> dict:
    """The device now: the largest member measured `repeats` times, and `sample` table
    architectures measured again (now / when the table was taken)."""
    settings = MeasurementSettings(**replay.settings)
    largest = extremes(GPT2Space())[0].to_dict()
    ref = [measure_candidate(largest, settings) for _ in range(repeats)]
    rows = random.Random(seed).sample(replay.table["rows"], sample)
    again = [(row, measure_candidate(row["spec"], settings)) for row in rows]
    return {
        "largest": {
            "latency_ms": statistics.median(m.latency_ms for m in ref),
            "memory_mb": statistics.median(m.peak_memory_mb for m in ref),
        },
        "largest_replayed": {
            "latency_ms": replay.measure(largest).latency_ms,
            "memory_mb": replay.measure(largest).memory_mb,
        },
        "latency_now_vs_table": [m.latency_ms / row["latency_ms"] for row, m in again],
        "memory_now_vs_table": [m.peak_memory_mb / row["memory_mb"] for row, m in again],
    }


def run_drift(real: dict, replay: DeviceReplay) -> dict:
    """Median of each real measurement over the replay's value for the same architecture."""
    measured = [c for c in real["candidates"] if c["status"] == "measured"]
    ratios = {"latency_ms": [], "memory_mb": []}
    for c in measured:
        replayed = replay.measure(c["spec"])
        ratios["latency_ms"].append(c["objectives"]["latency_ms"] / replayed.latency_ms)
        ratios["memory_mb"].append(c["objectives"]["memory_mb"] / replayed.memory_mb)
    return {"n": len(measured), **{k: statistics.median(v) for k, v in ratios.items()}}


def real_curve(real: dict, norm: Normaliser) -> list[dict]:
    """Hypervolume after each real measurement, in the order they were taken, under `norm`."""
    measured = sorted(
        (c for c in real["candidates"] if c["status"] == "measured"),
        key=lambda c: c["measurement"]["measured_at"],
    )
    points, curve, device_s = [], [], 0.0
    for n, c in enumerate(measured, 1):
        device_s += c["measurement"]["total_s"]
        points.append(norm(c["objectives"]))
        curve.append({"measured": n, "device_s": device_s, "hv": hypervolume(points)})
    return curve


def curve_lines(curve: list[dict], lts: list[float], title: str) -> list[str]:
    median = statistics.median(lts)
    lines = [
        f"{title}:",
        "",
        "| measured | device h | hypervolume | vs LTS-3000 median |",
        "|---|---|---|---|",
    ]
    for n in CHECKPOINTS:
        if n <= len(curve):
            p = curve[n - 1]
            lines.append(
                f"| {n} | {p['device_s'] / 3600:.2f} | {p['hv']:.4f} | "
                f"{100 * p['hv'] / median:.1f}% |"
            )
    p = curve[-1]
    lines.append(
        f"| {p['measured']} (all) | {p['device_s'] / 3600:.2f} | {p['hv']:.4f} | "
        f"{100 * p['hv'] / median:.1f}% |"
    )
    reached = next((p for p in curve if p["hv"] >= 0.99 * median), None)
    lines.append("")
    if reached:
        lines.append(
            f"99% of LTS-3000 reached after {reached['measured']} real measurements "
            f"({100 * reached['measured'] / 3000:.1f}% of 3,000), "
            f"{reached['device_s'] / 3600:.2f} device-hours"
        )
    else:
        lines.append(f"99% of LTS-3000 NOT reached within {len(curve)} real measurements")
    return lines + [""]


def report(real: dict, lts: list[float], anchored: dict, replay: DeviceReplay) -> list[str]:
    bench = make_normaliser(replay, GPT2Space())
    in_run = Normaliser(
        OBJECTIVES,
        bench.ideal,
        {**bench.reference, **anchored["largest"]},
    )
    lat, mem = anchored["latency_now_vs_table"], anchored["memory_now_vs_table"]
    during = run_drift(real, replay)
    replayed = anchored["largest_replayed"]
    by_run = Normaliser(
        OBJECTIVES,
        bench.ideal,
        {
            **bench.reference,
            "latency_ms": replayed["latency_ms"] * during["latency_ms"],
            "memory_mb": replayed["memory_mb"] * during["memory_mb"],
        },
    )
    lines = [
        f"LTS, 3,000 replayed measurements, {len(lts)} seeds: hypervolume median "
        f"{statistics.median(lts):.4f} (min {min(lts):.4f}, max {max(lts):.4f})",
        f"Device now vs when the table was taken ({len(lat)} table architectures measured "
        f"again after the search): latency x{statistics.median(lat):.2f} (range "
        f"{min(lat):.2f}-{max(lat):.2f}), memory x{statistics.median(mem):.2f} (range "
        f"{min(mem):.2f}-{max(mem):.2f})",
        f"Largest member: measured now {anchored['largest']['latency_ms']:.1f} ms, "
        f"{anchored['largest']['memory_mb']:.1f} MB; replayed "
        f"{anchored['largest_replayed']['latency_ms']:.1f} ms, "
        f"{anchored['largest_replayed']['memory_mb']:.1f} MB",
        f"During the search: its {during['n']} real measurements / the replay of the same "
        f"architectures: latency x{during['latency_ms']:.2f}, memory x{during['memory_mb']:.2f}",
        "",
    ]
    lines += curve_lines(
        real_curve(real, in_run), lts, "Real run, reference measured in the run (drift cancels)"
    )
    lines += curve_lines(
        real_curve(real, by_run),
        lts,
        "Real run, reference = the replayed largest member x the drift during the search",
    )
    lines += curve_lines(
        real_curve(real, bench), lts, "Real run, reference replayed from the table (drift counts)"
    )
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
    parser.add_argument("--resume", type=Path, default=None, help="a previous run's JSON")
    parser.add_argument("--reference-repeats", type=int, default=3)
    parser.add_argument("--drift-sample", type=int, default=10)
    args = parser.parse_args(argv)
    started = time.time()
    replay = DeviceReplay.load()
    norm = make_normaliser(replay, GPT2Space())
    lts = lts_full_budget(replay, norm, args.lts_seeds)
    if args.resume:
        real = json.loads(args.resume.read_text())["real"]
    else:
        with tempfile.TemporaryDirectory(prefix="hwnas-confirm-") as tmp:
            real = run_real(args.budget, args.seed, args.agents, norm.to_dict(), Path(tmp))
    anchored = anchor(replay, args.reference_repeats, args.drift_sample, args.seed)
    lines = report(real, lts, anchored, replay)
    lines.append(
        f"wall time {time.time() - started:.0f} s; command: bench/confirm_real.py "
        + " ".join(argv if argv is not None else sys.argv[1:])
    )
    print("\n".join(lines))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        out = {"lts_3000": lts, "real": real, "anchor": anchored, "report": lines}
        args.json.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
