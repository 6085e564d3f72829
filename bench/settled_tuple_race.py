"""Does keeping the heap settled break `tuple(generator)`? (server.services.heap; a 500 seen
in bench.create_blocking on 2026-12-07)

CPython 3.11 tracks a tuple that `tuple(generator)` is still filling, and grows it in place,
which it refuses (`SystemError: ... bad argument to internal function`) when anything else
holds a reference to it; `gc.get_objects()` can hand one out (cpython issue 39117). The
server's `keep_settled` counts the survivors of each full collection with it, and freezes or
gives back the frozen objects. Here one thread builds tuples from a generator, the way
`server.services.availability` does, while another keeps allocating, with a low threshold
for the collector, for `--seconds` each: with `keep_settled` on, and off. Reported: the
SystemErrors counted each way, and the full collections run. `--switch-interval` lets the
threads take turns more often than Python's 5 ms (`sys.setswitchinterval`), which makes the
race more frequent (1e-4 s: 23 SystemErrors in 4 s against 2 at 5 ms, ad hoc, one run each).

    .venv/bin/python -m bench.settled_tuple_race [--seconds 20] [--switch-interval S]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.machine import commit, machine
from bench.script import command_line, write_json
from server.services.heap import keep_settled


def _race(seconds: float, settled: bool) -> dict[str, int]:
    pairs = [([1, 2, 3], ["a", "b"]) for _ in range(50)]
    failures, stop = [0], threading.Event()

    def build() -> None:
        while not stop.is_set():
            try:
                tuple((tuple(r), tuple(d)) for r, d in pairs)
            except SystemError:
                failures[0] += 1

    def allocate() -> None:
        kept: list[list[list[int]]] = []
        while not stop.is_set():
            kept.append([[j] for j in range(100)])
            if len(kept) > 3000:
                kept = kept[1500:]

    thresholds = gc.get_threshold()
    full_before = gc.get_stats()[2]["collections"]
    gc.set_threshold(50, 2, 2)
    try:
        with keep_settled() if settled else contextlib.nullcontext():
            threads = [threading.Thread(target=build), threading.Thread(target=allocate)]
            for thread in threads:
                thread.start()
            time.sleep(seconds)
            stop.set()
            for thread in threads:
                thread.join()
    finally:
        gc.set_threshold(*thresholds)
    return {
        "system_errors": failures[0],
        "full_collections": gc.get_stats()[2]["collections"] - full_before,
    }


def run(args: argparse.Namespace, argv: list[str] | None) -> dict[str, Any]:
    return {
        "command": command_line([".venv/bin/python", "-m", "bench.settled_tuple_race"], argv),
        "commit": commit(),
        "machine": machine(),
        "python": sys.version.split()[0],
        "seconds": args.seconds,
        "switch_interval_s": args.switch_interval,
        "keep_settled": _race(args.seconds, settled=True),
        "plain": _race(args.seconds, settled=False),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="per way")
    parser.add_argument(
        "--switch-interval", type=float, default=sys.getswitchinterval(), help="seconds"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sys.setswitchinterval(args.switch_interval)
    result = run(args, argv)
    for way in ("keep_settled", "plain"):
        print(
            f"{way:13s} SystemErrors {result[way]['system_errors']:4d} in "
            f"{result[way]['full_collections']} full collections"
        )
    if args.json:
        write_json(args.json, result, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
