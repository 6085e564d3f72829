"""`hwnas demo` says how many results it measured and how many it reused from the database's
measurement cache (issue 19: a second demo said `24 measured` while all were reused), and
leaves nothing in the working directory."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from server.cli.demo import summary


def info(measured: int, reused: int, failed: int = 0) -> dict:
    progress = {"measured": measured, "reused": reused, "failed": failed, "generation": 2}
    return {"id": 2, "status": "finished", "finish_reason": "budget", "progress": progress}


def test_the_summary_tells_measured_from_reused():
    assert summary(info(24, 24)) == (
        "Search 2 finished (budget): 0 measured now, 24 reused from earlier measurements in "
        "this database, 0 failed, 3 generations."
    )
    assert "20 measured now, 4 reused" in summary(info(24, 4))
    assert "23 measured now, none reused, 1 failed" in summary(info(23, 0, failed=1))


# The search's candidates that an earlier search measured quietly (what the cache may reuse).
QUIET_BEFORE = """SELECT count(*) FROM candidates c WHERE c.search_id = ? AND EXISTS (
    SELECT 1 FROM measurements m WHERE m.arch_id = c.arch_id AND m.search_id < ? AND NOT m.busy)"""


def demo(db, cwd) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "hwnas", "demo", "--json", "--budget", "3", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["search"], done.stderr


@pytest.mark.slow
def test_a_second_demo_says_what_it_reused_and_leaves_the_working_directory_alone(tmp_path):
    work, db = tmp_path / "work", tmp_path / "store" / "demo.db"
    work.mkdir()
    db.parent.mkdir()
    for run in range(2):
        search, said = demo(db, work)
        assert summary(search) in said  # the server's numbers, on one line
        log = Path(said.split("the agent's log is ")[1].split()[0].rstrip("."))
        assert "hwnas-demo-" in str(log) and log.is_file()
        if run == 0:  # the second may be all reused and done before its agent has said a word
            assert "registered" in log.read_text()
    # The second search proposes what the first did (same seed) and reuses what the first
    # measured on a quiet machine (a busy measurement never is): the line says how many.
    with sqlite3.connect(db) as store:
        (quiet_before,) = store.execute(QUIET_BEFORE, (search["id"], search["id"])).fetchone()
    assert search["progress"]["reused"] == quiet_before
    assert list(work.iterdir()) == []  # no log, no database in the working directory
