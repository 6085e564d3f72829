"""Result tables off the write lock: a search near its end has its table built by the sweep
(`remeasure.keep_tables_ready`), and building one search's table keeps no other waiting."""

from __future__ import annotations

import threading

from server.services import remeasure, result_tables
from server.store.store import get_search
from tests.factories import play_agent, register, search_request

BUDGET = 20


def _services(client):
    return client.app.state.services


def test_a_search_within_a_tenth_of_its_budget_has_its_table_built_by_the_sweep(client):
    search = client.post(
        "/api/v1/searches", json=search_request(budget={"max_evaluations": BUDGET})
    )
    search_id = search.json()["id"]
    quiet = search_request(budget={"max_evaluations": BUDGET}, noise={"remeasure_share": 0})
    other = client.post("/api/v1/searches", json=quiet).json()["id"]
    services = _services(client)
    agent = register(client)
    play_agent(client, agent, max_jobs=BUDGET)  # both searches share the agent's work
    told = {
        i: client.get(f"/api/v1/searches/{i}").json()["progress"]["measured"]
        for i in (search_id, other)
    }
    services.results = result_tables.ResultTables()  # forget the tables the reads built
    assert remeasure.keep_tables_ready(services) == (
        [search_id] if told[search_id] >= 0.9 * BUDGET else []
    )
    play_agent(client, agent)  # to the end: re-measurements included
    services.results = result_tables.ResultTables()
    assert remeasure.keep_tables_ready(services) == []  # finished: nothing to keep ready


def test_near_the_end_the_table_is_kept_up_to_date_and_far_from_it_it_is_not(client):
    search_id = client.post(
        "/api/v1/searches", json=search_request(budget={"max_evaluations": BUDGET})
    ).json()["id"]
    services = _services(client)
    agent = register(client)
    play_agent(client, agent, max_jobs=BUDGET // 2)
    assert remeasure.keep_tables_ready(services) == []
    assert (services.results.read_up_to(search_id) or 0) < BUDGET // 2  # not brought up to date
    play_agent(client, agent, max_jobs=BUDGET // 2 - 1)
    assert remeasure.keep_tables_ready(services) == [search_id]
    assert services.results.read_up_to(search_id) == BUDGET - 1


def test_building_one_searchs_table_keeps_no_other_search_waiting(client, monkeypatch):
    first = client.post("/api/v1/searches", json=search_request()).json()["id"]
    second = client.post("/api/v1/searches", json=search_request()).json()["id"]
    agent = register(client)
    play_agent(client, agent, max_jobs=6)
    told = {i: client.get(f"/api/v1/searches/{i}/points").json()["last"] for i in (first, second)}
    assert told[first] and told[second]
    services = _services(client)
    services.results = result_tables.ResultTables()  # none built yet
    release, reading = threading.Event(), threading.Event()
    read = result_tables._read

    def slow_read(session, search, after):  # the first search's build stalls until released
        if search.id == first:
            reading.set()
            assert release.wait(30)
        return read(session, search, after)

    monkeypatch.setattr(result_tables, "_read", slow_read)

    def build(search_id: int) -> None:
        with services.store.read() as session:
            services.results.get(session, get_search(session, search_id))

    stalled = threading.Thread(target=build, args=(first,))
    stalled.start()
    try:
        assert reading.wait(30)
        other = threading.Thread(target=build, args=(second,))
        other.start()
        other.join(10)
        assert not other.is_alive(), "the second search's table waited for the first's"
        assert services.results.read_up_to(second) == told[second]
        assert not services.results.read_up_to(first)  # its rows not read yet
    finally:
        release.set()
        stalled.join(30)
    assert services.results.read_up_to(first) == told[first]
