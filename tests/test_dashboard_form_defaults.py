"""The new-search form starts with the API's defaults (issue 19): SearchCreate is the one
source of truth, which the form reads from the OpenAPI document and the CLI leaves to the
server; left as it is, the form starts the search a bare POST starts."""

from __future__ import annotations

import pytest
from browser import chromium, wait_for

from archvocab.wire import Budget, MeasurementSettings, SearchCreate
from hwnas import client_args
from hwnas.testing.servers import serve

pytestmark = pytest.mark.slow

FIELDS = """return Object.fromEntries(
  ['strategy', 'budget', 'seq_len', 'seed', 'device_class', 'proxy']
  .map(k => [k, document.getElementById('f-' + k).value]))"""
READY = "return document.getElementById('view').dataset.ready"


def test_the_form_shows_the_apis_defaults_and_starts_what_a_bare_post_starts(tmp_path):
    defaults = SearchCreate()
    with serve(tmp_path, tmp_path / "form.db") as server, chromium() as browser:
        browser.get(f"{server.url}/dashboard/#/new")
        wait_for(lambda: browser.execute_script(READY), what="the form")
        shown = browser.execute_script(FIELDS)
        assert shown == {
            "strategy": defaults.strategy,
            "budget": str(defaults.budget.max_evaluations),
            "seq_len": str(defaults.measurement.seq_len),
            "seed": str(defaults.seed),
            "device_class": defaults.device_class,  # no agent yet: nothing better to offer
            "proxy": defaults.proxy_objective,
        }
        options = browser.execute_script(
            "return [...document.querySelectorAll('#f-strategy option')].map(o => o.value)"
        )
        assert set(options) == {"lts", "nsga2", "hwnas"}
        checked = browser.execute_script(
            "return ['latency_ms', 'memory_mb'].filter(n => "
            "document.querySelector(`input[name=${n}]`).checked)"
        )
        assert [defaults.proxy_objective, *checked] == defaults.objectives
        browser.find_element("css selector", "#f-token").send_keys(server.procs.user_token)
        browser.find_element("css selector", "#new-search button[type=submit]").click()
        wait_for(lambda: "#/search/" in browser.current_url, what="the new search's page")
        form_id = int(browser.current_url.rsplit("/", 1)[1])
        with server.client() as api:
            by_form = api.get(f"/api/v1/searches/{form_id}").json()["request"]
            bare = api.post("/api/v1/searches", json={})
            assert bare.status_code == 201, bare.text
            for search_id in (form_id, bare.json()["id"]):
                api.post(f"/api/v1/searches/{search_id}/cancel")
        assert by_form == bare.json()["request"]
    # The CLI sends no default of its own; the values its --help names are these.
    assert client_args.REQUEST_DEFAULTS == {
        "strategy": defaults.strategy,
        "budget": Budget().max_evaluations,
        "device_class": defaults.device_class,
        "seq_len": MeasurementSettings().seq_len,
    }
