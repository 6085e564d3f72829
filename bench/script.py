"""The edges every benchmark script shares: its defaults from a preset (full or `--quick`),
the command line a result file records, paths as it shows them, the JSON file it writes, and
the environment that serves another checkout's code."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.machine import ROOT


def fill_preset(args: argparse.Namespace, preset: Mapping[str, Any]) -> None:
    """Every option left unset (None) takes the preset's value."""
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def command_line(program: Sequence[str], argv: Sequence[str] | None) -> str:
    """The shell command that ran `program` with `argv` (this process's own arguments when
    None), quoted so that it can be pasted back."""
    return shlex.join([*program, *(sys.argv[1:] if argv is None else argv)])


def shown(path: Path) -> str:
    """A path relative to the repository where it lies inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def write_json(path: Path, payload: Any, **dumps: Any) -> None:
    """`payload` as JSON in `path` (its folder made if missing), one newline at the end;
    `dumps` go to json.dumps (each result file keeps its own layout)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, **dumps) + "\n")


def served_from(pythonpath: str | None) -> dict[str, str] | None:
    """The environment in which `hwnas serve` runs the code `pythonpath` finds (a worktree of
    the commit before a change); None: this checkout's. PYTHONSAFEPATH: `python -m hwnas`
    would put the working directory (this checkout) ahead of PYTHONPATH."""
    return {"PYTHONPATH": pythonpath, "PYTHONSAFEPATH": "1"} if pythonpath else None
