"""The search page of a search whose frontier beyond noise is too large to draw point by
point (more than 3,000 points, as wide intervals make it in a large search): a real server
over a replayed 5,000-candidate search, in headless Chromium. The plots draw the nominal
frontier and say so; the page still counts and lists the whole frontier."""

from __future__ import annotations

import httpx
import pytest
from browser import chromium, wait_for

from bench.large_search import fill
from hwnas.testing.servers import serve

pytestmark = pytest.mark.slow
CANDIDATES = 5000

# Per trace of one plot: [name, type, points, error bars visible].
TRACES = """
return document.querySelector(arguments[0]).data.map(t =>
  [t.name, t.type, t.x.length, Boolean(t.error_y && t.error_y.visible !== false)]);
"""


def test_a_large_frontier_is_drawn_by_its_nominal_points(tmp_path):
    db = tmp_path / "large.db"
    search_id = fill(db, CANDIDATES, seed=1)
    with serve(tmp_path, db, "--no-auth") as server, chromium() as driver:
        points = httpx.get(f"{server.url}/api/v1/searches/{search_id}/points", timeout=60).json()
        frontier = points["frontier"]
        nominal = [a for a in frontier if points["groups"][a] == a]
        assert len(frontier) > 3000 > len(nominal) > 0, "a frontier too large to draw whole"
        driver.get(f"{server.url}/dashboard/#/search/{search_id}")
        view = "return document.getElementById('view').dataset"
        wait_for(lambda: driver.execute_script(view).get("ready") == "1", timeout=120, what="ready")
        assert driver.execute_script(view)["frontier"] == str(len(frontier))
        for plot in ("#plot-proxy-latency", "#plot-latency-memory"):
            traces = {name: rest for name, *rest in driver.execute_script(TRACES, plot)}
            drawn = f"nominal frontier ({len(nominal)} of {len(frontier)})"
            assert traces[drawn] == ["scatter", len(nominal), True]  # few: with their bars
            assert traces["measured"][1] == CANDIDATES  # the cloud whole below 20,000
