"""bench/dashboard_scale.py at tiny sizes: every metric for both sizes, and the page shows
every result, sorts and filters (no timings asserted)."""

from __future__ import annotations

import json
import math
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from bench import dashboard_scale as ds

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (Path(ds.CHROMIUM).exists() and Path(ds.CHROMEDRIVER).exists()),
        reason=f"needs {ds.CHROMIUM} and {ds.CHROMEDRIVER} (Debian's chromium, chromium-driver)",
    ),
]
pytest.importorskip("selenium", reason="the dashboard bench drives chromium with selenium")

SIZES = {"small": 30, "large": 60}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    workdir = tmp_path_factory.mktemp("dashboard_scale")
    out = workdir / "result.json"
    argv = ["--small", "30", "--large", "60", "--repeats", "2", "--calls", "1"]
    assert ds.main([*argv, "--workdir", str(workdir), "--json", str(out)]) == 0
    return json.loads(out.read_text()), workdir


def expected_metrics() -> set[str]:
    api = {f"api {name} {unit}" for name in ds.ENDPOINTS for unit in ("ms", "kB")}
    page = {f"page {timing}" for timing in ds.PAGE_TIMINGS}
    clicks = {f"page {name} ms" for name in ("sort", "filter on", "filter off")}
    return api | page | clicks | {"page wall ms", "page ready ms", "page js heap MB"}


def test_every_metric_for_both_sizes(run: tuple[dict, Path]) -> None:
    result, _ = run
    assert result["sizes"] == SIZES
    assert set(result["ratios"]) == expected_metrics()
    for label in SIZES:
        medians, samples = result["medians"][label], result["samples"][label]
        assert set(medians) == set(samples) == expected_metrics()
        assert all(math.isfinite(v) and v >= 0 for v in medians.values())
        assert len(samples["api points ms"]) == len(samples["page ready ms"]) == 2
    assert result["machine"]["nproc"] >= 1 and result["machine"]["chromium"]


def test_the_page_shows_every_result_sorts_and_filters(run: tuple[dict, Path]) -> None:
    result, workdir = run
    for label, size in SIZES.items():
        fastest = fastest_arch(workdir / f"{label}-{size}.db", result["search_ids"][label])
        for shown in result["checks"][label]:
            front = shown["frontier"]
            assert shown["results"] == size
            assert 0 < front < size
            assert shown["sort"] == {"first": fastest, "count": f"{size} shown of {size} ({size} results)"}
            assert shown["filter on"]["count"] == f"{front} shown of {front} ({size} results)"
            assert shown["filter off"]["count"] == shown["sort"]["count"]


def fastest_arch(db: Path, search_id: int) -> str:
    with closing(sqlite3.connect(db)) as conn:
        (arch,) = conn.execute(
            "SELECT arch_id FROM measurements WHERE search_id = ? ORDER BY latency_ms, created_at LIMIT 1",
            (search_id,),
        ).fetchone()
    return arch
