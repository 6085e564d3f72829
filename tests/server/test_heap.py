"""Large long-lived state out of the garbage collector's walk (server.services.heap)."""

from __future__ import annotations

import gc
import weakref

import pytest

from server.services.heap import settle_after
from tests.factories import play_agent, register, search_request


@pytest.fixture(autouse=True)
def _thawed():
    yield
    gc.unfreeze()  # the rest of the session's objects stay the collector's


class Held:
    pass


def _walked() -> set[int]:
    return {id(o) for o in gc.get_objects()}


def test_settling_takes_what_is_held_out_of_the_walk_and_collects_cycles_frozen_before():
    held = Held()
    held.me = held  # a reference cycle
    assert not settle_after(9, at_least=10) and id(held) in _walked()
    assert settle_after(10, at_least=10)
    assert id(held) not in _walked()
    gone = weakref.ref(held)
    del held
    gc.collect()
    assert gone() is not None  # garbage in a cycle while frozen
    settle_after(10, at_least=10)
    assert gone() is None  # the next settle gives it back first, and collects it


def test_reading_a_large_search_in_settles_its_table(client):
    client.app.state.services.results.settle_at = 5
    search = client.post(
        "/api/v1/searches", json=search_request(budget={"max_evaluations": 8})
    ).json()
    play_agent(client, register(client))
    results = client.app.state.services.results
    results._tables.clear()  # as after a restart: the next read reads every result in
    assert client.get(f"/api/v1/searches/{search['id']}/points").status_code == 200
    table = results._tables[search["id"]]
    assert len(table.rows) >= 5
    walked = _walked()
    assert all(id(t) not in walked for t in table.rows)
    gc.unfreeze()
    results.settle_at = 10**9  # small reads leave the heap as it is
    results._tables.clear()
    assert client.get(f"/api/v1/searches/{search['id']}/points").status_code == 200
    walked = _walked()
    assert all(id(t) in walked for t in results._tables[search["id"]].rows)
