"""The dashboard's polish (issue 19, item 8) in a real browser against a real server and
agents, at a 1400 x 900 window: plot toolbars clear of the titles, the 3-D view's labels
inside its box, the export links on screen, a note instead of empty axes, one row per
restarted agent, and a baseline hint whose command measures the baseline the report wants."""

from __future__ import annotations

import base64
import itertools
import os
import shlex
import subprocess

import pytest
from browser import ARTIFACTS, chromium, screenshot, wait_for
from test_end_to_end import _wait_finished, one_agent_service

from hwnas.testing.agents import start_agent
from hwnas.testing.processes import hwnas_command, stop
from tests.factories import TINY_SPACE, search_request

pytestmark = pytest.mark.slow

# Small baseline widths, so that the baseline the hint's command starts measures quickly.
SPACE = {**TINY_SPACE, "baseline_d_model": 64, "baseline_d_inner": 128, "baseline_n_head": 2}
VISITS = itertools.count()
PLOTS = ("#plot-proxy-latency", "#plot-proxy-memory", "#plot-latency-memory", "#plot-3d")
PLOTS_2D = (*PLOTS[:3], "#plot-hypervolume")

# The title's and the toolbar's boxes in one plot, and the plot's own.
BOXES = """
const div = document.querySelector(arguments[0]);
const box = (el) => {
  const b = el.getBoundingClientRect();
  return [b.left, b.top, b.right, b.bottom];
};
return [box(div.querySelector('.gtitle')), box(div.querySelector('.modebar')), box(div)];
"""

# Dark pixels ("ink": text, axis lines) of a PNG screenshot, decoded by the browser: how many
# in all, and how many within `edge` pixels of each side (text cut by the box's edge).
INK = """
const [png, edge, done] = arguments;
const image = new Image();
image.onload = () => {
  const canvas = document.createElement('canvas');
  canvas.width = image.width; canvas.height = image.height;
  const context = canvas.getContext('2d');
  context.drawImage(image, 0, 0);
  const pixels = context.getImageData(0, 0, image.width, image.height).data;
  const ink = {total: 0, left: 0, right: 0, top: 0, bottom: 0};
  for (let y = 0; y < image.height; y++) {
    for (let x = 0; x < image.width; x++) {
      const i = 4 * (y * image.width + x);
      if (Math.max(pixels[i], pixels[i + 1], pixels[i + 2]) > 140) continue;
      ink.total++;
      if (x < edge) ink.left++;
      if (x >= image.width - edge) ink.right++;
      if (y < edge) ink.top++;
      if (y >= image.height - edge) ink.bottom++;
    }
  }
  done(ink);
};
image.src = 'data:image/png;base64,' + png;
"""

# The first row's export links, the table's box, the window: where each ends on screen.
EXPORT_LINKS = """
const links = [...document.querySelectorAll('#table tbody tr:first-child a')];
const wrap = document.querySelector('#table .table-wrap');
return {
  rights: links.map((a) => a.getBoundingClientRect().right),
  formats: links.map((a) => a.textContent),
  wrap_right: wrap.getBoundingClientRect().right,
  scroll_left: wrap.scrollLeft,
  window: window.innerWidth,
};
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    url, procs = one_agent_service(tmp_path_factory.mktemp("polish"))
    yield url, procs
    procs.stop_all()


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        driver.set_window_size(1400, 900)
        yield driver


@pytest.fixture(scope="module")
def measured(service):
    """A finished search of 4 measured candidates, with no baseline measured yet."""
    url, procs = service
    request = search_request(space=SPACE, budget={"max_evaluations": 4})
    with procs.client(url) as api:
        search_id = api.post("/api/v1/searches", json=request).json()["id"]
        _wait_finished(api, search_id, procs)
    return search_id


def _dataset(driver, key):
    return driver.execute_script(f"return document.getElementById('view').dataset.{key}")


def _open(driver, url, hash_):
    driver.get(f"{url}/dashboard/?visit={next(VISITS)}{hash_}")
    return wait_for(lambda: _dataset(driver, "ready") == "1", what=f"{hash_} to render")


def _open_drawn(driver, url, search_id):
    _open(driver, url, f"#/search/{search_id}")
    drawn = "return document.querySelector(arguments[0]).data !== undefined"
    for plot in PLOTS:
        wait_for(lambda p=plot: driver.execute_script(drawn, p), what=f"{plot} to be drawn")


def _overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_plot_toolbars_leave_the_titles_clear(service, browser, measured):
    from selenium.webdriver import ActionChains

    url, _ = service
    _open_drawn(browser, url, measured)
    for plot in PLOTS:
        # The toolbar shows while the pointer is over the plot.
        ActionChains(browser).move_to_element(browser.find_element("css selector", plot)).perform()
        title, modebar, div = browser.execute_script(BOXES, plot)
        assert title[2] > title[0] and modebar[3] > modebar[1], (plot, title, modebar)
        assert not _overlap(title, modebar), f"{plot}: title {title} under toolbar {modebar}"
        for box in (title, modebar):
            assert div[0] <= box[0] and box[2] <= div[2] and div[1] <= box[1], (plot, box, div)
    screenshot(browser, "polish-plots")


def test_the_3d_views_axis_labels_lie_inside_its_box(service, browser, measured):
    url, _ = service
    _open_drawn(browser, url, measured)
    cube = browser.find_element("css selector", "#plot-3d")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", cube)
    # The toolbar, shown while the pointer is over the plot, is light grey: no ink.
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def drawn():
        # WebGL draws on a later frame than the plot's data is set: shoot until it has.
        shot = cube.screenshot_as_png
        ink = browser.execute_async_script(INK, base64.b64encode(shot).decode(), 4)
        (ARTIFACTS / "polish-3d.png").write_bytes(shot)
        return ink if ink["total"] > 500 else None

    ink = wait_for(drawn, 30, "the 3-D view's axes and labels to be drawn")
    cut = {side: n for side, n in ink.items() if side != "total" and n}
    assert not cut, f"labels or axes reach the 3-D view's edge (clipped): {ink}"


def test_the_export_links_are_on_screen_at_1400_px(service, browser, measured):
    url, _ = service
    _open(browser, url, f"#/search/{measured}")
    wait_for(lambda: _dataset(browser, "results") == "4", what="the table's rows")
    where = browser.execute_script(EXPORT_LINKS)
    assert where["window"] <= 1400 and where["formats"] == ["torch", "onnx", "json"], where
    assert where["scroll_left"] == 0
    # Without scrolling anything sideways, the last link ends inside the table's box and
    # inside the window.
    assert max(where["rights"]) <= min(where["wrap_right"], where["window"]), where
    screenshot(browser, "polish-table-1400")


def test_an_empty_search_shows_a_note_not_empty_axes(service, browser):
    url, procs = service
    request = search_request(space=SPACE, device_class="nobody-serves-this")
    with procs.client(url) as api:
        search_id = api.post("/api/v1/searches", json=request).json()["id"]
        try:
            _open(browser, url, f"#/search/{search_id}")
            note = browser.find_element("css selector", "#no-results")
            assert note.is_displayed() and "no results yet" in note.text.lower()
            assert "waiting for agents" in note.text
            assert not browser.find_element("css selector", ".plots").is_displayed()
            undrawn = "return document.querySelector(arguments[0]).data === undefined"
            assert all(browser.execute_script(undrawn, p) for p in (*PLOTS, *PLOTS_2D))
            # The banner saying no agent can measure it stays.
            banner = browser.find_element("css selector", "#waiting")
            assert banner.is_displayed() and "hwnas agent" in banner.text
            screenshot(browser, "polish-empty-search")
        finally:
            api.post(f"/api/v1/searches/{search_id}/cancel")


def test_the_baseline_hint_gives_a_command_that_measures_the_baseline(service, browser, measured):
    url, procs = service
    _open(browser, url, f"#/search/{measured}")
    assert browser.find_element("css selector", "#baseline").text == "none"
    hint = browser.find_element("css selector", "#baseline-hint")
    assert hint.is_displayed()
    hint.find_element("css selector", "summary").click()  # unfolds the command
    command = shlex.split(hint.find_element("css selector", "code.command").text)
    assert command[:6] == ["hwnas", "baseline", "--server", url, "--device-class", "test-cpu"]
    # Run as shown (two depths rather than sixteen, to be quick): the report then finds it.
    argv = [*hwnas_command(*command[1:]), "--layers", "1,2", "--wait"]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=600, env={**os.environ, **procs.user_env}
    )
    assert done.returncode == 0, done.stderr
    with procs.client(url) as api:
        report = api.get(f"/api/v1/searches/{measured}/report").json()
    assert report["baseline"] is not None, report
    _open(browser, url, f"#/search/{measured}")
    assert browser.find_element("css selector", "#baseline").text == "2 depths"
    assert not browser.find_element("css selector", "#baseline-hint").is_displayed()


def test_a_restarted_agent_is_one_row_with_its_registrations(service, browser):
    url, procs = service
    name, args = "restarted", ("--name", "restarted")
    with procs.client(url) as api:

        def registrations():
            return [a for a in api.get("/api/v1/agents").json() if a["name"] == name]

        first = start_agent(procs, "agent-restarted", url, *args, device_class="restart-cpu")
        wait_for(lambda: len(registrations()) == 1, what="the agent to register")
        stop(first)
        start_agent(procs, "agent-restarted", url, *args, device_class="restart-cpu")
        agents = wait_for(lambda: len(r := registrations()) == 2 and r, what="it to register again")
    _open(browser, url, "#/agents")
    rows = [
        r
        for r in browser.find_elements("css selector", "#agents-table tbody tr")
        if r.find_element("css selector", "td").text.startswith(name)
    ]
    assert len(rows) == 1
    latest = max(agents, key=lambda a: a["registered_at"])
    assert rows[0].get_attribute("data-agent") == latest["agent_id"]
    assert "2 registrations" in rows[0].text
    earlier = rows[0].get_attribute("data-earlier").split()
    assert earlier == [a["agent_id"] for a in agents if a is not latest]
    screenshot(browser, "polish-agents")
