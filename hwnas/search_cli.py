"""`hwnas search start | list | status | wait | pareto | pick | cancel | export`, on the Python
client (its arguments are in hwnas/client_args.py; pareto and pick show through
hwnas/frontier_view.py).

Tables and the progress bar are for people (rich, on a terminal); `--json` prints the
server's objects for scripts, and nothing else on stdout. Errors go to stderr with the
server's message and exit code 1 (2 for a usage error).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from hwnas.client import DEFAULT_SERVER, ApiError, Client
from hwnas.client_args import SERVER_ENV
from hwnas.frontier_view import choosing_params, pareto_table, pick_table
from hwnas.frontier_view import number as _number
from hwnas.search_progress import follow
from hwnas.search_request import request_body


def run(args: argparse.Namespace) -> int:
    out = Console(highlight=False)
    if not out.is_terminal:  # a pipe or a file: wide lines, not wrapped at 80 columns
        out = Console(highlight=False, width=200)
    err = Console(stderr=True, highlight=False)
    server = args.server or os.environ.get(SERVER_ENV) or DEFAULT_SERVER
    try:
        with Client(server, token=args.token) as client:
            return _COMMANDS[args.search_command](client, args, out, err)
    except ApiError as exc:
        field = f"{exc.field}: " if exc.field and exc.field not in exc.message else ""
        return _refused(args, f"{exc.status}: {field}{exc.message}")
    except httpx.TransportError as exc:
        return _refused(args, f"cannot reach {server}: {exc}")
    except TimeoutError as exc:  # before OSError, of which it is one
        return _refused(args, str(exc), code=3)
    except (OSError, ValueError) as exc:
        return _refused(args, str(exc))


def _refused(args: argparse.Namespace, message: str, code: int = 1) -> int:
    """One line on stderr, however long: `hwnas search COMMAND: STATUS: FIELD: MESSAGE`
    (written as is: a console would wrap it at the terminal's width)."""
    text = " ".join(f"hwnas search {args.search_command}: {message}".split())
    sys.stderr.write(text + "\n")
    return code


def _emit(out: Console, data: Any) -> None:
    """JSON on stdout, exactly the server's objects (pydantic models or plain data)."""
    if hasattr(data, "model_dump"):
        data = data.model_dump(mode="json")
    elif isinstance(data, list):
        data = [d.model_dump(mode="json") if hasattr(d, "model_dump") else d for d in data]
    out.file.write(json.dumps(data) + "\n")


def _start(client: Client, args: argparse.Namespace, out: Console, err: Console) -> int:
    info = client.start_search(request_body(args))
    if not args.wait:  # (waiting shows them itself)
        for warning in info.warnings:  # e.g. no agent of the class ever registered
            _line(err, f"search {info.id}: warning: {warning}")
        if args.json:
            _emit(out, info)
        else:
            out.print(f"search {info.id} started: {info.progress.queued} candidates queued")
        return 0
    args.search_id, args.timeout = info.id, None
    return _wait(client, args, out, err)


def _line(console: Console, text: str) -> None:
    """`text` as one line, never wrapped."""
    console.file.write(text + "\n")
    console.file.flush()


def _list(client: Client, args: argparse.Namespace, out: Console, _err: Console) -> int:
    searches = client.searches()
    if args.json:
        _emit(out, searches)
        return 0
    table = Table("id", "name", "device class", "strategy", "status", "measured", "frontier")
    for s in searches:
        p = s.progress
        table.add_row(
            str(s.id),
            s.name or "",
            s.device_class,
            s.request.strategy,
            s.status,
            f"{p.measured + p.failed}/{p.budget}",
            str(s.frontier_size),
        )
    out.print(table)
    return 0


def _status(client: Client, args: argparse.Namespace, out: Console, _err: Console) -> int:
    info = client.search(args.search_id)
    if args.json:
        _emit(out, info)
        return 0
    p = info.progress
    out.print(f"search {info.id} [bold]{info.status}[/bold] {info.finish_reason or ''}")
    out.print(
        f"  measured {p.measured} (reused {p.reused}), failed {p.failed}, running {p.running}, "
        f"queued {p.queued} of a budget of {p.budget}; generation {p.generation}; "
        f"re-measured {p.remeasured} (+{p.remeasuring} to go) of {p.remeasure_budget}",
        soft_wrap=True,
    )
    hv = "-" if p.hypervolume is None else f"{p.hypervolume:.4f}"
    out.print(f"  frontier: {info.frontier_size} architectures; hypervolume {hv}")
    if info.noise is not None:
        out.print(f"  {_noise_line(info.noise)}", markup=False, soft_wrap=True)
    for best in info.best:
        line = f"  best {best.objective} ({best.sense}): {_number(best.value)}  {best.arch_id}"
        out.print(line, markup=False)
    waiting = info.agents.waiting_for_agent if info.agents else None
    for warning in info.warnings or ([f"waiting: {waiting}"] if waiting else []):
        _line(out, f"  {warning}")
    return 0


def _noise_line(noise: Any) -> str:
    """How far values may move when measured again, and what that does to the frontier."""
    widths = ", ".join(
        f"{name} -{(1 - lo) * 100:.0f}%/+{(hi - 1) * 100:.0f}%"
        for name, (lo, hi) in noise.interval_rel.items()
    )
    return (
        f"noise: {noise.confidence:.0%} interval of a re-measurement: {widths} "
        f"(from {noise.reference_readings} reference readings); busy results "
        f"{noise.busy_results} (kept off the frontier); {noise.plain_frontier_size} on the "
        f"frontier if values were exact, {noise.certain_frontier_size} on it whatever the noise"
    )


def _wait(client: Client, args: argparse.Namespace, out: Console, err: Console) -> int:
    info = follow(
        client,
        args.search_id,
        err,
        bar=err.is_terminal and not args.json,
        poll_s=args.poll_interval,
        timeout_s=args.timeout,
        stall_s=args.stall_after,
        every_s=args.progress_every,
    )
    if args.json:
        _emit(out, info)
    else:
        out.print(f"search {info.id} {info.status}: {info.finish_reason or ''}")
    return 0 if info.status == "finished" else 1


def _pareto(client: Client, args: argparse.Namespace, out: Console, _err: Console) -> int:
    points = client.pareto(args.search_id, **choosing_params(args))
    if args.json:
        _emit(out, points)
        return 0
    out.print(pareto_table(points, args))
    return 0


def _pick(client: Client, args: argparse.Namespace, out: Console, _err: Console) -> int:
    params = choosing_params(args)
    pick = client.pick(args.search_id, params.pop("order_by"), **params)
    if args.json:
        _emit(out, pick)
        return 0
    out.print(pick_table(pick))
    out.print(f"export it: hwnas search export {pick.pick.arch_id} --format torch", markup=False)
    return 0


def _cancel(client: Client, args: argparse.Namespace, out: Console, _err: Console) -> int:
    info = client.cancel(args.search_id)
    if args.json:
        _emit(out, info)
    else:
        out.print(f"search {info.id} {info.status}")
    return 0


def _export(client: Client, args: argparse.Namespace, out: Console, _err: Console) -> int:
    arch_id = client.architecture(args.arch_id).arch_id  # a prefix: the full id it names
    params = {"seq_len": args.seq_len} if args.seq_len else {}
    target = Path(args.output) if args.output else Path.cwd()
    path = client.export(arch_id, args.format, target, **params)
    if args.json:
        _emit(out, {"arch_id": arch_id, "format": args.format, "path": str(path)})
    else:
        out.print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


_COMMANDS = {
    "start": _start,
    "list": _list,
    "status": _status,
    "wait": _wait,
    "pareto": _pareto,
    "pick": _pick,
    "cancel": _cancel,
    "export": _export,
}
