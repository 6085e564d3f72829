"""How `hwnas search wait` (and `search start --wait`) shows a search moving.

On a terminal, a progress bar. Elsewhere (a log file, CI, a pipe) a bar draws nothing until the
end, so one line instead each time the counts change and every `every_s` seconds while they
do not, with the rate so far and the time left at that rate. Either way, a line when the
search stalls: nothing moved for `stall_s` seconds while the server says no live agent can
measure it (hwnas.client's StallWatch), with the command that would start one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from archvocab.wire import SearchInfo
from hwnas.client import Client, moved, stall_message


def duration(seconds: float) -> str:
    """A time span as people read it: 40 s, 12 min, 3 h 05 min."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


class Rate:
    """Results per second since the first poll seen (None until one more result arrives)."""

    def __init__(self) -> None:
        self._first: tuple[float, int] | None = None

    def per_s(self, now: float, done: int) -> float | None:
        if self._first is None:
            self._first = (now, done)
        start, done_then = self._first
        if done <= done_then or now <= start:
            return None
        return (done - done_then) / (now - start)


def progress_line(info: SearchInfo, per_s: float | None) -> str:
    """One line: results against the budget, what is running and queued, the frontier, and
    while the search runs its rate and the time left at that rate."""
    p = info.progress
    done = p.measured + p.failed
    line = (
        f"search {info.id} {info.status}: {done}/{p.budget} done ({p.measured} measured, "
        f"{p.reused} of them reused; {p.failed} failed), {p.running} running, {p.queued} queued, "
        f"frontier {info.frontier_size}"
    )
    if p.remeasure_budget and (p.remeasured or p.remeasuring):
        line += f", re-measured {p.remeasured} (+{p.remeasuring}) of {p.remeasure_budget}"
    if info.status != "running":
        return line
    if per_s is None:
        return line + "; time left: unknown until a result arrives"
    left = max(p.budget - done, 0) / per_s
    return line + f"; {per_s * 60:.1f} results/min, about {duration(left)} left"


class ProgressLines:
    """`progress_line` through `write` on each change of the counts, and every `every_s`
    seconds while nothing changes."""

    def __init__(
        self,
        write: Callable[[str], None],
        every_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.write, self.every_s, self.clock = write, every_s, clock
        self.rate = Rate()
        self._last: tuple | None = None
        self._at = 0.0

    def __call__(self, info: SearchInfo) -> None:
        now = self.clock()
        p = info.progress
        per_s = self.rate.per_s(now, p.measured + p.failed)
        key = (*moved(info), info.status, info.frontier_size)
        if key == self._last and now - self._at < self.every_s:
            return
        self._last, self._at = key, now
        self.write(progress_line(info, per_s))


def follow(
    client: Client,
    search_id: int,
    err: Console,
    *,
    bar: bool,
    poll_s: float,
    timeout_s: float | None,
    stall_s: float,
    every_s: float,
) -> SearchInfo:
    """Wait for the search to end, showing its progress on `err` (a bar where `bar`, lines
    otherwise); the server's warnings and a stall are one line each."""
    progress = _bar(err) if bar else None
    lines = ProgressLines(lambda text: say(text), every_s)
    warned: set[str] = set()

    def say(text: str) -> None:
        if progress is not None:  # above the bar, never wrapped
            progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
            return
        err.file.write(text + "\n")
        err.file.flush()

    def show(info: SearchInfo) -> None:
        for warning in info.warnings:
            if warning not in warned:
                warned.add(warning)
                say(f"search {info.id}: warning: {warning}")
        if progress is None:
            lines(info)
            return
        p = info.progress
        progress.update(
            progress.task_ids[0],
            total=p.budget,
            completed=p.measured + p.failed,
            status=info.status,
            frontier=info.frontier_size,
            hv="-" if p.hypervolume is None else f"{p.hypervolume:.3f}",
        )

    with progress or contextlib.nullcontext():
        if progress is not None:
            progress.add_task("", total=None, search_id=search_id, status="", frontier=0, hv="-")
        return client.wait(
            search_id,
            poll_s=poll_s,
            timeout_s=timeout_s,
            on_progress=show,
            stall_s=stall_s,
            on_stall=lambda info, idle_s: say(stall_message(info, idle_s)),
        )


def _bar(err: Console) -> Progress:
    return Progress(
        TextColumn("search {task.fields[search_id]} [bold]{task.fields[status]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("frontier {task.fields[frontier]}  hv {task.fields[hv]}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    )
