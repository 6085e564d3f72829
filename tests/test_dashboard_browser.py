"""The dashboard in a real browser (headless Chromium) against a real server and a real
agent: a layer-scaled baseline and a search measured while the page watches, then the
frontier plots, the table, the agents page and the new-search form."""

from __future__ import annotations

import itertools

import httpx
import pytest
from browser import chromium, screenshot, wait_for
from test_end_to_end import _wait_finished, one_agent_service

from hwnas.testing.agents import start_agent
from tests.factories import FAST_MEASUREMENT, TINY_SPACE, search_request

pytestmark = pytest.mark.slow

SPACE = {**TINY_SPACE, "baseline_d_model": 64, "baseline_d_inner": 128, "baseline_n_head": 2}
VISITS = itertools.count()
BUDGET = 12
# Two objectives: a 2-D frontier leaves measured points off it, so the counts below differ.
OBJECTIVES = ["decoder_params", "latency_ms"]

# The frontier trace's drawn points (SVG) in one plot, found by the trace's name.
COUNT_POINTS = """
const div = document.querySelector(arguments[0]);
const trace = [...div.querySelectorAll('.scatterlayer .trace')]
  .find(g => g.__data__ && g.__data__[0].trace.name === arguments[1]);
return trace ? trace.querySelectorAll('path.point').length : -1;
"""


# The frontier trace's marker symbols: filled for a certain point, hollow for one the noise
# cannot tell on or off the frontier.
FRONTIER_SYMBOLS = """
const trace = document.querySelector(arguments[0]).data.find(t => t.name === 'frontier');
return trace.marker.symbol;
"""


# The frontier trace's latencies (its y) and error bars above and below, in one plot.
# The text of one table cell: the row of an arch id, the column of a key.
TABLE_CELL = """
const [arch, key] = arguments;
const headers = [...document.querySelectorAll("#table thead th")];
const column = headers.findIndex((th) => th.dataset.key === key);
const row = document.querySelector(`#table tbody tr[data-arch="${arch}"]`);
return row.children[column].textContent;
"""
FRONTIER_BARS = """
const trace = document.querySelector(arguments[0]).data.find(t => t.name === 'frontier');
return [trace.y, trace.error_y.array, trace.error_y.arrayminus];
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    url, procs = one_agent_service(tmp_path_factory.mktemp("dashboard"))
    yield url, procs
    procs.stop_all()


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


def _dataset(driver, key):
    return driver.execute_script(f"return document.getElementById('view').dataset.{key}")


def _open(driver, url, hash_):
    # A new query string makes every open a fresh document: a hash change alone would keep
    # the old page's state (and a reload right after a navigation can be aborted by it).
    driver.get(f"{url}/dashboard/?visit={next(VISITS)}{hash_}")
    return wait_for(lambda: _dataset(driver, "ready") == "1", what=f"{hash_} to render")


def test_a_search_page_updates_live_then_shows_the_frontier_and_the_table(service, browser):
    url, procs = service
    with procs.client(url) as api:
        baseline = api.post(
            "/api/v1/baselines",
            json={
                "space": SPACE,
                "device_class": "test-cpu",
                "layers": [1, 2],
                "measurement": FAST_MEASUREMENT,
            },
        ).json()
        _wait_finished(api, baseline["id"], procs)
        # No agent while the page opens: it must see the search with nothing measured yet.
        agent = next(p for p in procs.procs if "agent" in p.args)
        agent.terminate()
        agent.wait(timeout=60)
        request = search_request(
            space=SPACE, budget={"max_evaluations": BUDGET}, objectives=OBJECTIVES
        )
        search_id = api.post("/api/v1/searches", json=request).json()["id"]
        _open(browser, url, f"#/search/{search_id}")
        first = (_dataset(browser, "status"), _dataset(browser, "results"))
        start_agent(procs, "agent-1", url)
        wait_for(lambda: _dataset(browser, "status") == "finished", 300, "the search to finish")
        wait_for(lambda: _dataset(browser, "results") == str(BUDGET), 30, "the last results")
        pareto = api.get(f"/api/v1/searches/{search_id}/pareto").json()
        candidates = api.get(f"/api/v1/searches/{search_id}/candidates").json()
        final = api.get(f"/api/v1/searches/{search_id}").json()
        api_noise = final["noise"]
        trace = api.get(f"/api/v1/searches/{search_id}/hypervolume").json()["points"]
    assert first == ("running", "0")  # the page saw the search start and caught up by itself
    measured = [c for c in candidates if c["status"] == "measured"]
    # The frontier beyond noise holds the nominal one and what the noise cannot separate
    # from it (with a reading or two of the reference, that can be every point).
    plain = api_noise["plain_frontier_size"]
    assert 0 < plain <= len(pareto) <= len(measured)
    assert plain < len(measured)  # two objectives: some points are nominally dominated
    for plot in ("#plot-proxy-latency", "#plot-proxy-memory", "#plot-latency-memory"):
        assert browser.execute_script(COUNT_POINTS, plot, "frontier") == len(pareto)
        assert browser.execute_script(COUNT_POINTS, plot, "measured") == len(measured)
        assert browser.execute_script(COUNT_POINTS, plot, "layer-scaled baseline") == 2
    # Each frontier point's latency carries the bar where a re-measurement should fall.
    bars = browser.execute_script(FRONTIER_BARS, "#plot-proxy-latency")
    expected = {p["arch_id"]: p["intervals"]["latency_ms"] for p in pareto}
    for x, above, below in zip(*bars):
        point = next(p for p in pareto if p["objectives"]["latency_ms"] == pytest.approx(x))
        low, high = expected[point["arch_id"]]
        assert (x - below, x + above) == (pytest.approx(low), pytest.approx(high))
    assert len(bars[0]) == len(pareto)
    symbols = browser.execute_script(FRONTIER_SYMBOLS, "#plot-proxy-latency")
    certain = sum(p["frontier_certain"] for p in pareto)
    assert symbols.count("circle") == certain == api_noise["certain_frontier_size"]
    assert symbols.count("circle-open") == len(pareto) - certain
    shown = browser.find_element("css selector", "#frontier-certain").text
    assert shown == str(certain)
    busy = browser.find_element("css selector", "#busy-results").text
    assert busy == str(api_noise["busy_results"])
    remeasured = browser.find_element("css selector", "#remeasured").text
    assert remeasured == str(final["progress"]["remeasured"])
    # Every result has its hypervolume, also those told before the normalisation was fixed;
    # the step line is drawn from the results where it changed, and the last.
    volumes = {p["results"]: p["hypervolume"] for p in trace}
    assert sorted(volumes) == list(range(1, BUDGET + 1))
    drawn = browser.execute_script(
        "const t = document.querySelector('#plot-hypervolume').data[0]; return [t.x, t.y];"
    )
    changed = [r for r in range(1, BUDGET + 1) if r == 1 or volumes[r] != volumes[r - 1]]
    assert drawn[0] == sorted({*changed, BUDGET})
    steps = dict(zip(*drawn, strict=True))
    held = None
    for result in range(1, BUDGET + 1):
        held = steps.get(result, held)
        assert held == pytest.approx(volumes[result])
    rows = browser.find_elements("css selector", "#table tbody tr")
    assert sorted(r.get_attribute("data-arch") for r in rows) == sorted(
        c["arch_id"] for c in candidates
    )
    bold = browser.find_elements("css selector", "#table tbody tr.frontier")
    assert {r.get_attribute("data-arch") for r in bold} == {p["arch_id"] for p in pareto}
    # A re-measured candidate's row shows its best estimate, the value /candidates gives.
    for c in (c for c in measured if c["measurements"] > 1):
        for key in ("latency_ms", "memory_mb"):
            shown = browser.execute_script(TABLE_CELL, c["arch_id"], key)
            assert float(shown) == pytest.approx(c["objectives"][key], rel=1e-3)
    screenshot(browser, "dashboard-search")

    browser.find_element("css selector", "#table th[data-key=latency_ms]").click()
    first_row = browser.find_element("css selector", "#table tbody tr")
    fastest = min(measured, key=lambda c: c["objectives"]["latency_ms"])
    assert first_row.get_attribute("data-arch") == fastest["arch_id"]
    browser.find_element("css selector", "#frontier-only").click()
    shown = browser.find_elements("css selector", "#table tbody tr")
    assert len(shown) == len(pareto)


def test_the_searches_and_agents_pages_list_what_the_server_has(service, browser):
    url, _ = service
    with httpx.Client(base_url=url, timeout=30) as api:
        searches = api.get("/api/v1/searches").json()
        agents = wait_for(lambda: api.get("/api/v1/agents").json(), what="an agent to register")
    _open(browser, url, "#/")
    listed = browser.find_elements("css selector", "#searches-table tbody tr")
    assert [r.get_attribute("data-search") for r in listed] == [
        str(s["id"]) for s in reversed(searches)
    ]
    _open(browser, url, "#/agents")
    shown = browser.find_elements("css selector", "#agents-table tbody tr")
    # agent-1 is agent-0's machine started again: one row, the latest, the earlier one in it.
    listed = [r.get_attribute("data-agent") for r in shown]
    earlier = [e for r in shown for e in r.get_attribute("data-earlier").split()]
    assert sorted(listed + earlier) == sorted(a["agent_id"] for a in agents)
    live = agents[-1]  # the agent still running (the first test stops the first one)
    row = browser.find_element("css selector", f"tr[data-agent='{live['agent_id']}']")
    cells = [c.text for c in row.find_elements("css selector", "td")]
    assert cells[-2:] == [str(live["jobs_done"]), str(live["failures"])]
    assert "online" in cells


def test_the_form_shows_the_apis_refusal_and_starts_a_valid_search(service, browser):
    url, procs = service
    _open(browser, url, "#/new")
    submit = browser.find_element("css selector", "#new-search button[type=submit]")
    submit.click()  # no token yet: the server with authentication refuses
    error = wait_for(
        lambda: browser.find_element("css selector", "#form-error").text, what="the 401"
    )
    assert "needs a user token" in error and "hwnas token create" in error
    token = browser.find_element("css selector", "#f-token")
    assert "invalid" in token.get_attribute("class")
    token.send_keys(procs.user_token)
    budget = browser.find_element("css selector", "#f-budget")
    budget.clear()
    budget.send_keys("0")
    browser.find_element("css selector", "#new-search button[type=submit]").click()
    error = wait_for(
        lambda: "budget" in (t := browser.find_element("css selector", "#form-error").text) and t,
        what="the refusal",
    )
    assert "budget.max_evaluations" in error and "greater than or equal to 1" in error
    assert "invalid" in budget.get_attribute("class")
    screenshot(browser, "dashboard-form-refusal")

    budget.clear()
    budget.send_keys("3")
    device = browser.find_element("css selector", "#f-device_class")
    device.clear()
    device.send_keys("nobody-serves-this")  # stays queued: the test agent serves test-cpu
    browser.find_element("css selector", "#new-search button[type=submit]").click()
    wait_for(lambda: "#/search/" in browser.current_url, what="the new search's page")
    search_id = int(browser.current_url.rsplit("/", 1)[1])
    with procs.client(url) as api:
        created = api.get(f"/api/v1/searches/{search_id}").json()
        api.post(f"/api/v1/searches/{search_id}/cancel")
    assert created["device_class"] == "nobody-serves-this"
    assert created["request"]["budget"]["max_evaluations"] == 3
    assert created["request"]["strategy"] == "lts"  # the API's default, which the form shows
