"""What kill -9 costs a search, measured with real processes on loopback.

Every run is a fresh, real `hwnas serve` (a temporary SQLite file, authentication on, its
tokens made with `hwnas token create` as a deployment makes them, `--log-format json`) and two
real agent processes (`python -m bench.replay_agent`: the agent's own Worker over HTTP, whose
device replays recorded real measurements and sleeps each one's device time times a time
scale). The same seeded LTS search runs once undisturbed and once under faults:

- **agent kills**: `--agent-kills` times, after a random pause, the next job an agent claims
  (one not interrupted before) is interrupted: that agent is killed (SIGKILL) at a random
  moment of the measurement
  (KILL_WINDOW_S after the claim; every replayed measurement here lasts longer) and a
  replacement agent starts. Leases last 3 s. Reported: kills that landed mid-measurement (the
  killed agent never reported the job, and the job was leased again), how far into the
  measurement they landed, the time from a kill to the job's next lease and to its accepted
  result, and the search's wall time against the undisturbed run's.
- **server kills**: `--server-kills` times, once the search has a random number of results,
  the server is SIGKILLed and restarted on the same database and port; the agents keep
  running. Reported: time from the kill to a healthy server, from there to the next accepted
  result, results that crossed a restart (measured or held by an agent through the outage),
  the wall time, and whether the proposals and the frontier equal the undisturbed run's.

Each run also checks exactly-once: every candidate measured, one measurement row each, and the
agents' jobs_done adding up to the budget. tests/test_fault_tolerance.py asserts the same
scenarios; this script measures them.

    .venv/bin/python -m bench.faults [--agent-kills 20] [--server-kills 5] [--seed 0]
        [--json bench/results/faults.json]

The script is this command line; its parts: bench.fault_cluster (server, agents, the search
and how it ended), bench.agent_kills, bench.server_kills, bench.server_events (the server's
event log) and bench.fault_report (what is printed).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.agent_kills import AGENT_KILL, agent_kills
from bench.fault_report import report
from bench.script import command_line, write_json
from bench.server_kills import SERVER_KILL, server_kills


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.faults", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--agent-kills", type=int, default=20)
    parser.add_argument("--server-kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0, help="seeds the kill moments")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH")
    parser.add_argument("--keep", type=Path, default=None, help="keep logs and databases here")
    return parser.parse_args(argv)


def run_scenarios(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Each scenario in a folder of its own (under --keep, else a temporary one), each with a
    fresh random.Random(--seed); a failed one prints its server log's tail."""
    scenarios = {
        "agents_undisturbed": (agent_kills, 0),
        "agents_killed": (agent_kills, args.agent_kills),
        "server_undisturbed": (server_kills, 0),
        "server_killed": (server_kills, args.server_kills),
    }
    runs = {}
    with tempfile.TemporaryDirectory(prefix="hwnas-faults-") as tmp:
        for name, (scenario, kills) in scenarios.items():
            where = (args.keep or Path(tmp)) / name
            where.mkdir(parents=True)
            try:
                runs[name] = scenario(where, kills, random.Random(args.seed))
            except Exception:
                log = where / "server.log"
                print(f"--- {log} (tail)\n{log.read_text()[-3000:]}", file=sys.stderr)
                raise
            print(f"{name}: {runs[name]['wall_s']} s", file=sys.stderr, flush=True)
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started, load_before = time.perf_counter(), os.getloadavg()
    runs = run_scenarios(args)
    load = [round(x, 2) for x in (*load_before, *os.getloadavg())]
    print(f"{report(runs)}\n\nLoad average (1, 5, 15 min) before: {load[:3]}, after: {load[3:]}")
    if args.json is not None:
        payload = {
            "command": command_line(["python", "-m", "bench.faults"], argv),
            "settings": {"agent_kill": AGENT_KILL, "server_kill": SERVER_KILL, **vars(args)},
            "elapsed_s": round(time.perf_counter() - started, 1),
            "load_avg_before_after": [load[:3], load[3:]],
            "runs": runs,
        }
        write_json(args.json, payload, indent=1, default=str)
    return 0 if all(run["exactly_once"] for run in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
