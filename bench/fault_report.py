"""bench/faults.py's printed report: the agent-kill and server-kill runs against their
undisturbed twins, as markdown tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.agent_kills import AGENT_KILL
from bench.markdown_table import table
from bench.medians import median_range
from bench.server_kills import SERVER_KILL


def _yes(value: bool) -> str:
    return "yes" if value else "NO"


RUN_COLUMNS = ["run", "wall s", "leases issued", "exactly once"]


def _run_cells(label: str, run: Mapping[str, Any]) -> list[object]:
    """RUN_COLUMNS, the columns every run has."""
    return [label, f"{run['wall_s']:.1f}", run["claims"], _yes(run["exactly_once"])]


def report(runs: Mapping[str, dict[str, Any]]) -> str:
    return "\n".join(agent_lines(runs) + [""] + server_lines(runs))


def agent_lines(runs: Mapping[str, dict[str, Any]]) -> list[str]:
    """The agent-kill run against the undisturbed one; median (min-max) over the kills."""
    calm, hit, a = runs["agents_undisturbed"], runs["agents_killed"], AGENT_KILL
    kills = hit["kills"]
    header = [
        *RUN_COLUMNS,
        "kills mid-measurement",
        "kill moment, share of the measurement",
        "kill -> leased again, s",
        "kill -> measured, s",
    ]
    rows = [
        [*_run_cells("undisturbed", calm), "-", "-", "-", "-"],
        [
            *_run_cells(f"{len(kills)} agent kills", hit),
            f"{sum(k['landed'] for k in kills)}/{len(kills)}",
            median_range([k["into_share"] for k in kills], 2),
            median_range([k["to_leased_s"] for k in kills], 1),
            median_range([k["to_measured_s"] for k in kills], 1),
        ],
    ]
    return [
        f"Agent kills: LTS budget {a['budget']} (seed {a['seed']}), 2 replay agents, "
        f"time scale {a['time_scale']}, lease {a['lease_s']:g} s; "
        "median (min-max) over the kills.",
        "",
        *table(header, rows, "lrrlrrrr"),
    ]


def server_lines(runs: Mapping[str, dict[str, Any]]) -> list[str]:
    """The server-kill run against the undisturbed one, then each restart."""
    calm, hit, s = runs["server_undisturbed"], runs["server_killed"], SERVER_KILL
    restarts = hit["restarts"]
    header = [*RUN_COLUMNS, "same proposals", "same frontier", "frontier size"]
    rows = [
        [*_run_cells("undisturbed", calm), "-", "-", len(calm["frontier"])],
        [
            *_run_cells(f"{len(restarts)} server kills", hit),
            _yes(hit["proposed"] == calm["proposed"]),
            _yes(hit["frontier"] == calm["frontier"]),
            len(hit["frontier"]),
        ],
    ]
    lines = [
        f"Server kills: LTS budget {s['budget']} (seed {s['seed']}), 2 replay agents, "
        f"time scale {s['time_scale']}, lease {s['lease_s']:g} s.",
        "",
        *table(header, rows, "lrrlllr"),
        "",
    ]
    return lines + restart_table(restarts)


def restart_table(restarts: list[dict[str, Any]]) -> list[str]:
    header = [
        "restart",
        "results at kill",
        "running at kill",
        "kill -> healthy, s",
        "healthy -> next result, s",
        "jobs in flight",
        "reported after restart",
        "leased again",
    ]
    rows = [
        [
            i,
            r["measured_at_kill"],
            r["running_at_kill"],
            f"{r['down_s']:.2f}",
            "-" if r["to_result_s"] is None else f"{r['to_result_s']:.2f}",
            r["in_flight"],
            r["carried"],
            r["re_leased"],
        ]
        for i, r in enumerate(restarts, 1)
    ]
    return table(header, rows, "r" * len(header))
