"""The real-measurement side by side (bench/peers_real.py): every contender measures through
the agent's path, the frontiers are measured again interleaved with a drift reference, and
the scores are those re-measured values."""

from __future__ import annotations

import json

import pytest

from archvocab.spaces.gpt2.spec import GPT2Spec
from bench.peers_real import (
    drift_at,
    front_of,
    main,
    parse_args,
    ratios,
    report,
    run,
    target_lines,
)
from search.hypervolume import Normaliser, hypervolume
from tests.factories import FAST_MEASUREMENT, TINY_SPACE


def _row(params: float, latency: float, memory: float) -> dict:
    return {"values": {"decoder_params": params, "latency_ms": latency, "memory_mb": memory}}


def test_the_front_keeps_what_nothing_beats_on_all_three_objectives():
    rows = [_row(10, 5, 5), _row(20, 5, 5), _row(5, 1, 9), _row(5, 2, 9), _row(20, 5, 5)]
    assert front_of(rows) == [1, 2, 4]  # more parameters at equal cost wins; copies stay
    assert front_of([]) == []


def test_drift_is_the_nearest_reference_reading_over_their_median():
    readings = [
        {"at": 0, "latency_ms": 10.0},
        {"at": 10, "latency_ms": 12.0},
        {"at": 20, "latency_ms": 11.0},
    ]
    assert drift_at(readings, 1) == pytest.approx(10 / 11)
    assert drift_at(readings, 9) == pytest.approx(12 / 11)
    assert drift_at(readings, 30) == pytest.approx(1.0)


def test_ratios_count_the_seeds_hwnas_won():
    scored = [
        {"contender": c, "seed": s, "count": 60, "hypervolume": hv}
        for c, s, hv in [("hwnas", 0, 0.4), ("gp", 0, 0.2), ("hwnas", 1, 0.3), ("gp", 1, 0.6)]
    ]
    lines = ratios(scored, ["hwnas", "gp"], [60])
    assert lines[-1] == "| gp | 60 | 1.250 | 2.000, 0.500 | 1/2 |"


def test_a_peer_with_an_empty_frontier_volume_still_gets_its_row():
    # On a tiny space a few re-measured points can all fall outside the reference box.
    scored = [
        {"contender": c, "seed": s, "count": 3, "hypervolume": hv}
        for c, s, hv in [("hwnas", 0, 0.1), ("tpe", 0, 0.0), ("hwnas", 1, 0.0), ("tpe", 1, 0.0)]
    ]
    lines = ratios(scored, ["hwnas", "tpe"], [3])
    assert lines[-1] == "| tpe | 3 | inf | inf, both 0 | 1/2 |"
    only_empty = [r for r in scored if r["seed"] == 1]
    assert ratios(only_empty, ["hwnas", "tpe"], [3])[-1] == "| tpe | 3 | both 0 | both 0 | 0/1 |"


def test_seeds_run_apart_are_reported_together(tmp_path, capsys):
    columns = {"frontier": 3, "pooled_share": 0.5, "device_s": 1.0, "wall_s": 2.0, "repeats": 0}
    paths = []
    for seed, hv in [(0, {"hwnas": 0.4, "gp": 0.2}), (1, {"hwnas": 0.3, "gp": 0.6})]:
        scored = [
            {"contender": c, "seed": seed, "count": 60, "hypervolume": v,
             "hypervolume_drift_scaled": v, **columns}
            for c, v in hv.items()
        ]  # fmt: skip
        part = {"space": {"n_layer": {}}, "wall_s": 10.0, "runs": [], "scored": scored}
        paths.append(tmp_path / f"s{seed}.json")
        paths[-1].write_text(json.dumps({**part, "references": [{"seed": seed}]}))
    out = tmp_path / "all.json"
    assert main(["--merge", *map(str, paths), "--json", str(out)]) == 0
    assert "| gp | 60 | 1.250 | 2.000, 0.500 | 1/2 |" in capsys.readouterr().out
    written = json.loads(out.read_text())
    assert written["wall_s"] == 20.0 and len(written["scored"]) == 4
    with pytest.raises(SystemExit, match="more than one file"):
        main(["--merge", str(paths[0]), str(paths[0])])


@pytest.mark.slow
def test_two_contenders_measured_for_real_and_judged_on_their_re_measured_frontiers():
    args = parse_args(
        [
            "--seeds", "0", "--budget", "3", "--checkpoints", "2",
            "--contenders", "hwnas", "optuna-tpe", "--reference-every", "2",
            "--measurement", json.dumps(FAST_MEASUREMENT), "--space", json.dumps(TINY_SPACE),
        ]
    )  # fmt: skip
    assert args.checkpoints == [2, 3]
    heard = []  # what a run cut short after this seed would have kept
    result = run(args, lambda _line: None, heard.append)
    assert [h["scored"] for h in heard] == [result["scored"]] and heard[0]["references"]
    runs = {r["contender"]: r for r in result["runs"]}
    assert set(runs) == {"hwnas", "optuna-tpe"}
    for r in runs.values():
        ids = [GPT2Spec.from_dict(m["spec"]).arch_id for m in r["measured"]]
        assert len(set(ids)) == len(ids) == 3  # the budget, distinct architectures
        assert all(m["values"]["device_s"] > 0 for m in r["measured"])
    (ref,) = result["references"]
    again, readings = ref["again"], ref["readings"]
    assert readings[0]["at"] == 0 and readings[-1]["at"] == len(again) and len(readings) >= 2
    normaliser = Normaliser(["decoder_params", "latency_ms", "memory_mb"], **ref["normaliser"])
    scored = result["scored"]
    assert {(s["contender"], s["count"]) for s in scored} == {(c, n) for c in runs for n in (2, 3)}
    for s in scored:
        rows = runs[s["contender"]]["measured"][: s["count"]]
        front = [GPT2Spec.from_dict(rows[i]["spec"]).arch_id for i in front_of(rows)]
        assert all(a in again for a in front)  # every frontier point was measured again
        expected = hypervolume(normaliser.points([again[a] for a in front]))
        assert s["hypervolume"] == pytest.approx(expected)
        # 0 is possible: on a tiny space the other's points can dominate all of a frontier.
        assert s["frontier"] == len(front) and 0 <= s["pooled_share"] <= 1
    for n in (2, 3):  # the pooled frontier's points all came from someone
        assert sum(s["pooled_share"] for s in scored if s["count"] == n) >= 1 - 1e-9
    lines = report(scored, ["hwnas", "optuna-tpe"], [2, 3])
    assert any(line.startswith("| optuna-tpe | 3 |") for line in lines)


def test_targets_name_the_checkpoint_and_device_seconds_where_hwnas_reaches_the_best_peer():
    def row(contender: str, seed: int, count: int, hv: float, device_s: float) -> dict:
        return {
            "contender": contender,
            "seed": seed,
            "count": count,
            "hypervolume": hv,
            "device_s": device_s,
        }

    scored = [
        # seed 0: the GP is the best peer at 60 (0.38); hwnas passes it at 20, after 70 s
        row("hwnas", 0, 10, 0.30, 35),
        row("hwnas", 0, 20, 0.385, 70),
        row("hwnas", 0, 60, 0.42, 210),
        row("optuna-gp", 0, 60, 0.38, 200),
        row("optuna-tpe", 0, 60, 0.36, 190),
        row("lts", 0, 60, 0.50, 180),  # hwnas's own strategy is no peer
        # seed 1: TPE is best (0.40); hwnas gets there only at 60
        row("hwnas", 1, 10, 0.30, 35),
        row("hwnas", 1, 20, 0.35, 70),
        row("hwnas", 1, 60, 0.41, 220),
        row("optuna-gp", 1, 60, 0.37, 200),
        row("optuna-tpe", 1, 60, 0.40, 200),
        # seed 2: never
        row("hwnas", 2, 10, 0.20, 35),
        row("hwnas", 2, 60, 0.30, 200),
        row("optuna-gp", 2, 60, 0.31, 200),
    ]
    lines = target_lines(scored, ["hwnas", "lts", "optuna-gp", "optuna-tpe"])
    assert "| 0 | optuna-gp | 0.3800 | 200 | 20 | 0.3850 | 70 | 0.35 |" in lines
    assert "| 1 | optuna-tpe | 0.4000 | 200 | 60 | 0.4100 | 220 | 1.10 |" in lines
    assert "| 2 | optuna-gp | 0.3100 | 200 | never |  |  |  |" in lines
    # Median seed: reached at 60 (20, 60, never), device-seconds ratio 1.10 (0.35, 1.10, inf).
    assert lines[-2].startswith("FAIL: hwnas reaches") and "median checkpoint 60" in lines[-2]
    assert lines[-1].startswith("FAIL: hwnas spends") and "median ratio 1.10" in lines[-1]
    passing = [r for r in scored if r["seed"] == 0]
    verdicts = target_lines(passing, ["hwnas", "optuna-gp"])[-2:]
    assert verdicts[0].startswith("PASS") and "median checkpoint 20" in verdicts[0]
    assert verdicts[1].startswith("PASS") and "median ratio 0.35" in verdicts[1]
    assert target_lines(scored, ["hwnas", "lts"]) == []
