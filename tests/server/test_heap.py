"""Large long-lived state out of the garbage collector's walk (server.services.heap)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from server.services import heap
from server.services.heap import keep_settled, settle_after
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


def _held(count: int) -> list[Held]:
    return [Held() for _ in range(count)]


def test_what_a_server_holds_as_it_starts_is_frozen_without_a_walk():
    gc.unfreeze()
    before = _held(100)
    collections = gc.get_stats()[2]["collections"]
    with keep_settled():
        assert gc.get_stats()[2]["collections"] == collections  # no full collection
        walked = _walked()
        assert not any(id(h) in walked for h in before)
        assert heap._settled.walked > 0 and gc.get_freeze_count() > 0
    # Listed once: late in the suite the whole heap is millions of objects, and listing it
    # for each of them took CI five minutes.
    walked = _walked()
    assert all(id(h) in walked for h in before)  # given back at the end


def test_a_server_keeps_what_survives_its_full_collections_out_of_the_next(monkeypatch):
    monkeypatch.setattr(heap, "FREEZE_AT", 1_000)
    with keep_settled():
        few = _held(10)  # fewer survivors than FREEZE_AT stay the collector's
        gc.collect()
        walked = _walked()
        assert all(id(h) in walked for h in few)
        many = _held(2_000)
        gc.collect()
        walked = _walked()
        assert not any(id(h) in walked for h in many + few)
    assert gc.get_freeze_count() == 0  # given back at the end
    assert heap._settled.after not in gc.callbacks


def test_cycles_frozen_by_a_server_are_collected_once_the_frozen_objects_have_grown(monkeypatch):
    monkeypatch.setattr(heap, "FREEZE_AT", 1_000)
    with keep_settled():
        held = Held()
        held.me = held
        survivors = _held(2_000)  # noqa: F841 - enough of them to be frozen
        gc.collect()  # frozen with the other survivors
        gone = weakref.ref(held)
        del held
        gc.collect()
        assert gone() is not None  # garbage in a cycle while frozen
        monkeypatch.setattr(heap, "GROWTH", 1)  # any growth now calls for a walk of them all
        grown = _held(5_000)
        gc.collect()  # frozen objects grew: given back to the collector
        gc.collect()  # which walks them all
        assert gone() is None
        walked = _walked()
        assert not any(id(h) in walked for h in grown)  # and freezes again what survived


def test_apps_of_one_process_share_the_settling(client):
    assert heap._settled.after in gc.callbacks  # the client's app is running
    with keep_settled():
        assert gc.callbacks.count(heap._settled.after) == 1
    assert heap._settled.after in gc.callbacks  # the app still runs


def test_keeping_settled_does_not_break_a_tuple_another_thread_is_filling(tmp_path: Path):
    # bench.settled_tuple_race in a process of its own (a low collector threshold, a small
    # heap), threads taking turns every 0.1 ms: counting the survivors with a Python-held
    # `gc.get_objects` list failed 23 times in 4 s so (ad hoc, one run).
    out = tmp_path / "race.json"
    command = [sys.executable, "-m", "bench.settled_tuple_race", "--seconds", "4"]
    command += ["--switch-interval", "0.0001", "--json", str(out)]
    subprocess.run(command, cwd=Path(__file__).resolve().parents[2], check=True, timeout=120)
    race = json.loads(out.read_text())["keep_settled"]
    assert race["full_collections"] > 0
    assert race["system_errors"] == 0, race
