"""The dashboard's search page in a real browser says when no agent can measure the search
(issue 19), with the command that would start one, and stops saying it once one can."""

from __future__ import annotations

import pytest
from browser import chromium, screenshot, wait_for

from hwnas.testing.agents import start_agent
from hwnas.testing.ports import free_port, loopback_url
from hwnas.testing.processes import Processes
from hwnas.testing.servers import start_server
from tests.factories import search_request

pytestmark = pytest.mark.slow

BANNER = "return (b => b && !b.hidden && b.innerText)(document.getElementById('waiting'))"


def test_a_search_no_agent_can_measure_shows_a_banner_until_one_can(tmp_path):
    procs = Processes(tmp_path)
    try:
        port = free_port()
        start_server(procs, tmp_path / "banner.db", port)
        url = loopback_url(port)
        with procs.client(url) as api:
            created = api.post("/api/v1/searches", json=search_request(device_class="pi5"))
            assert created.status_code == 201, created.text
            search_id = created.json()["id"]
        with chromium() as browser:
            browser.get(f"{url}/dashboard/#/search/{search_id}")
            text = wait_for(lambda: browser.execute_script(BANNER), what="the waiting banner")
            assert "no agent of device class 'pi5' has ever registered" in text
            code = browser.find_element("css selector", "#waiting code").text
            assert code.endswith(f"hwnas agent --server {url} --device-class pi5")
            screenshot(browser, "search-waiting-for-an-agent")
            start_agent(procs, "agent-pi5", url, device_class="pi5")
            wait_for(
                lambda: browser.execute_script(BANNER) is False,
                timeout=120,
                what="the banner to go once an agent of the class registered",
            )
    finally:
        procs.stop_all()
