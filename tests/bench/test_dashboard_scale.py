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
    return (
        api
        | page
        | clicks
        | {"page wall ms", "page ready ms", "page settled ms", "page js heap MB"}
    )


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
        fastest = fastest_archs(workdir / f"{label}-{size}.db", result["search_ids"][label])
        for shown in result["checks"][label]:
            front, every = shown["frontier"], f"{size} shown of {size} ({size} results)"
            assert shown["results"] == size
            assert 0 < front < size
            assert shown["sort"] == {"top": fastest, "count": every}
            assert shown["filter on"]["count"] == f"{front} shown of {front} ({size} results)"
            assert shown["filter off"]["count"] == every


def fastest_archs(db: Path, search_id: int) -> list[str]:
    """The five fastest of the search's architectures, as the table's first rows sorted on
    latency should list them."""
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT arch_id FROM measurements WHERE search_id = ?"
            " ORDER BY latency_ms, created_at LIMIT 5",
            (search_id,),
        ).fetchall()
    return [arch for (arch,) in rows]
