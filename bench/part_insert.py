"""A round's part written beside a thread that runs Python: one statement per row, or one
statement for the part (issue 20, "Bad input": a round's parts hold the write lock).

A SQLite file with hwnas's schema and one search. Each part is `--rows` proposals of the
GPT-2 space (their architectures, then their jobs), written in a write transaction two ways,
one after the other in every round, so that the machine's drift falls on both:

- `per_row`: each table by one statement run for every row (`executemany`), as
  `server.store.proposals.enqueue` wrote them up to 3bf0915;
- `one_statement`: each table by one statement of many VALUES (`server.store.store.insert_rows`).

Each way is timed quiet and beside a thread that runs Python all along (as a server's event
loop and its other requests do under a fleet): SQLite's driver lets the interpreter go at
each row it writes, and must win it back. Reported per way: the part's insert time (ms),
median (p50), p90, p99 and max over `--parts` parts.

    .venv/bin/python -m bench.part_insert [--parts 60] [--rows 50] [--json out.json]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, sessionmaker

from archvocab.spaces.gpt2.space import GPT2Space
from archvocab.wire import JobStatus
from bench.load_checks import latency_stats
from bench.machine import commit, machine
from bench.script import command_line, write_json
from server.store.database import WRITE, make_engine
from server.store.rows import ArchitectureRow, CandidateRow, SearchRow
from server.store.store import insert_rows

ARCHITECTURES = ArchitectureRow.__table__
CANDIDATES = CandidateRow.__table__


def _per_row(session: Session, architectures: list[dict], candidates: list[dict]) -> None:
    skip = sqlite_insert(ARCHITECTURES).on_conflict_do_nothing(index_elements=["arch_id"])
    session.execute(skip, architectures)
    session.execute(insert(CANDIDATES), candidates)


def _one_statement(session: Session, architectures: list[dict], candidates: list[dict]) -> None:
    insert_rows(session, ARCHITECTURES, architectures, skip_existing="arch_id")
    insert_rows(session, CANDIDATES, candidates)


WAYS: dict[str, Callable[[Session, list[dict], list[dict]], None]] = {
    "per_row": _per_row,
    "one_statement": _one_statement,
}


class Busy:
    """A thread that runs Python while `on` (a server's other threads at work)."""

    def __init__(self) -> None:
        self.on = threading.Event()
        self.stop = False
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        total = 0
        while not self.stop:
            if not self.on.wait(0.05):
                continue
            for i in range(1000):
                total += i

    def close(self) -> None:
        self.stop = True
        self.thread.join()


def _part(space: GPT2Space, rng: random.Random, search_id: int, rows: int) -> tuple[list, list]:
    """`rows` new proposals of the search: their architectures' rows and their jobs' rows."""
    now = datetime.now(UTC)
    architectures, candidates = [], []
    for _ in range(rows):
        spec = space.sample(rng)
        key = f"{spec.arch_id}{rng.getrandbits(64):016x}"  # new on every draw
        architectures.append(
            {"arch_id": key, "spec": spec.to_dict(), "decoder_params": 1, "total_params": 2}
        )
        candidates.append(
            {
                "search_id": search_id,
                "arch_id": key,
                "round": 0,
                "generation": 1,
                "status": JobStatus.QUEUED,
                "queued_at": now,
                "attempts": 0,
                "reused": False,
                "finished_at": None,
                "measurement_id": None,
                "prediction": None,
            }
        )
    return architectures, candidates


def run(args: argparse.Namespace, argv: list[str] | None) -> dict[str, Any]:
    space, rng = GPT2Space(), random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'parts.db'}")
        sessions = sessionmaker(engine.execution_options(**WRITE))
        with sessions() as session, session.begin():
            search_id = session.execute(
                insert(SearchRow.__table__).values(
                    name="bench",
                    status="running",
                    device_class="bench-cpu",
                    request={},
                    runtime="torch",
                    device="cpu",
                    created_at=datetime.now(UTC),
                )
            ).inserted_primary_key[0]
        busy = Busy()
        times: dict[str, list[float]] = {
            f"{way}_{beside}": [] for way in WAYS for beside in ("quiet", "busy")
        }
        try:
            for round_ in range(args.parts + 1):  # the first round warms up, untimed
                for beside in ("quiet", "busy"):
                    for way, write in WAYS.items():
                        architectures, candidates = _part(space, rng, search_id, args.rows)
                        if beside == "busy":
                            busy.on.set()
                        with sessions() as session, session.begin():
                            session.connection()  # the transaction's BEGIN, untimed
                            start = time.perf_counter()
                            write(session, architectures, candidates)
                            elapsed = time.perf_counter() - start
                        busy.on.clear()
                        if round_:
                            times[f"{way}_{beside}"].append(elapsed * 1000)
            with sessions() as session:  # every part's rows, warm-up included
                written = {
                    table.name: session.scalar(select(func.count()).select_from(table))
                    for table in (ARCHITECTURES, CANDIDATES)
                }
        finally:
            busy.close()
            engine.dispose()
    return {
        "command": command_line([".venv/bin/python", "-m", "bench.part_insert"], argv),
        "commit": commit(),
        "machine": machine(),
        "rows": args.rows,
        "parts": args.parts,
        "ms": {key: latency_stats(values) for key, values in times.items()},
        "written": written,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", type=int, default=60, help="timed parts per way")
    parser.add_argument("--rows", type=int, default=50, help="proposals per part")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = run(args, argv)
    for key, summary in result["ms"].items():
        print(
            f"{key:24s} median {summary['p50']:7.2f} ms  p90 {summary['p90']:7.2f}"
            f"  max {summary['max']:7.2f}"
        )
    if args.json:
        write_json(args.json, result, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
