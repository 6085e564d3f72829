"""bench/ is a package its scripts import properly: no script edits the import path, and none
is named like a package it imports (run as a file, its folder comes first on the path)."""

from __future__ import annotations

import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
PACKAGES = {"archvocab", "search", "proxies", "server", "agent", "hwnas", "bench", "tests"}


def test_no_script_edits_the_import_path() -> None:
    edits = re.compile(r"sys\.path\s*(\[|\.insert|\.append|\.extend|=)")
    offenders = [p.name for p in BENCH.rglob("*.py") if edits.search(p.read_text())]
    assert offenders == []


def test_no_module_shadows_a_package() -> None:
    names = {p.stem for p in BENCH.glob("*.py")} | {p.name for p in BENCH.iterdir() if p.is_dir()}
    assert names & PACKAGES == set()
