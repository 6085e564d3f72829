"""The printed summary of a reproducibility run (markdown tables and lines)."""

from __future__ import annotations

from typing import Any

from bench import frontier_stability
from search.noise import METRICS


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def summary(p: dict[str, Any]) -> list[str]:
    s, r, load = p["search"], p["remeasure"], p["load"]["phases"]
    lines = [
        f"device {p['device']['cpu_model']} ({p['device']['cores']} cores), "
        f"{p['load']['processes']} load processes ({p['load']['kind']}); commit {p['commit']}",
        f"search {s['strategy']}: {s['measured']} measured, {s['failed']} failed, {s['busy']} "
        f"busy, {s['on_frontier']} on the frontier beyond noise (plain "
        f"{s['noise']['plain_frontier_size']}), {s['noise']['reference_readings']} reference "
        f"readings, {s['wall_s']:.0f} s",
        f"re-measured: {r['measurements']} candidates x{r['repeats']} + "
        f"{r['reference_readings']} reference, {r['pause_s']:g} s later, {r['wall_s']:.0f} s; "
        f"busy {r['busy']}, failed {r['failed']}, busy retries {r['busy_retries']}",
        "load average (1 min) mean/max and machine CPU busy: "
        + "; ".join(
            f"{name} {fmt(x['loadavg_1m_mean'])}/{fmt(x['loadavg_1m_max'])}, "
            f"{pct(x['cpu_busy_share'])}"
            for name, x in load.items()
        ),
        "",
        "| metric | hwnas coverage (all / quiet) | today's CI coverage | hwnas width | "
        "today width | between-process median abs log | within ci_rel |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in METRICS:
        a, q, w = p["coverage"]["all"][m], p["coverage"]["quiet"][m], p["spread"][m]
        lines.append(
            f"| {m} | {pct(a['hwnas'])} / {pct(q['hwnas'])} (n={a['n']}) | {pct(a['today'])} | "
            f"{pct(w['hwnas_rel_width'])} | {pct(w.get('today_rel_width'))} | "
            f"{pct(w['between_median_abs_log'])} | {pct(w.get('within_ci_rel'))} |"
        )
    mem, ref = p["memory"]["candidates"], p["memory"]["reference"]
    lines += [
        "",
        f"memory CV between fresh processes, per candidate: median {pct(mem['median'])}, "
        f"p90 {pct(mem['p90'])}, max {pct(mem['max'])}, "
        f"within 3%: {pct(mem['share_within_target'])} (n={mem['n']})",
        f"reference readings: memory CV agent {pct(ref['agent_cv'])} "
        f"(n={ref['agent_readings']}), re-measure {pct(ref['remeasure_cv'])} "
        f"(n={ref['remeasure_readings']}), all {pct(ref['all_cv'])}; latency CV all "
        f"{pct(ref['latency_all_cv'])}",
        f"sigma (log scale): server {fmt_d(p['sigma']['server'])}; "
        f"from the candidates' repeats {fmt_d(p['sigma']['from_candidates'])}",
        "",
        f"frontier (params, latency, memory; and two at a time) over "
        f"{p['frontier']['pool']:.0f} candidates quiet in both "
        f"(script vs server frontier disagreements: {p['frontier']['server_disagreements']}):",
        *frontier_stability.table(p["frontier"]),
    ]
    c = p["cost"]
    lines += [
        "",
        f"cost: candidates {c['candidates_s']:.0f} device-s; reference "
        f"{c['reference_measurements']} x {c['reference_each_s']:.1f} s = "
        f"{c['reference_s']:.0f} s; busy retries {c['busy_retries']} = {c['busy_s']:.0f} s "
        f"(+{c['busy_pause_s']:.0f} s paused); extra {pct(c['extra_share'])}",
        "targets: " + ", ".join(f"{k} {v}" for k, v in p["targets"].items()),
    ]
    return lines


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def fmt_d(values: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in values.items())
