"""The Python client against the real app in-process (TestClient is an httpx.Client)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from archvocab.summary import spec_summary
from archvocab.wire import SearchCreate
from hwnas.client import ApiError, Client
from server.app.factory import create_app
from server.settings import Settings
from tests.factories import play_agent, register, search_request


@pytest.fixture
def http(tmp_path):
    with TestClient(create_app(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}"))) as c:
        yield c


@pytest.fixture
def hw(http):
    return Client(http=http)


def test_a_search_started_waited_on_and_read_through_the_client(hw, http):
    search = hw.start_search(search_request())
    assert search.status == "running" and search.progress.queued > 0
    agent = register(http)
    seen = []

    def measure_some(info):  # the agent works between polls
        seen.append(info.progress.measured)
        play_agent(http, agent, max_jobs=3)

    done = hw.wait(search.id, poll_s=0, on_progress=measure_some)
    assert done.status == "finished" and done.progress.measured == 12
    assert seen == sorted(seen) and len(seen) > 2
    front = hw.pareto(search.id)
    assert {p.arch_id for p in front} == {
        c.arch_id for c in hw.candidates(search.id) if c.on_frontier
    }
    table = hw.points(search.id)
    assert sorted(table.frontier) == sorted(p.arch_id for p in front)
    assert len(table.rows) == 12 and table.columns[-1] == "spec"
    short = hw.points(search.id, spec="summary")
    assert short.columns[-1] == "summary"
    assert [r[-1] for r in short.rows] == [spec_summary(r[-1]) for r in table.rows]
    frame = hw.points_frame(search.id)
    assert len(frame) == 12 and list(frame.columns[:2]) == ["arch_id", "result"]
    assert set(frame.loc[frame.on_frontier, "arch_id"]) == {p.arch_id for p in front}
    fastest = min(hw.candidates(search.id), key=lambda c: c.objectives["latency_ms"])
    assert frame.sort_values("latency_ms").iloc[0].arch_id == fastest.arch_id
    assert [s.id for s in hw.searches()] == [search.id]
    assert hw.hypervolume(search.id).points[-1].results == 12
    assert hw.agents()[0].jobs_done == 12
    assert hw.health()["status"] == "ok"


def test_a_search_starts_from_a_model_a_dict_or_keyword_fields(hw):
    model = SearchCreate.model_validate(search_request(name="model"))
    assert hw.start_search(model).name == "model"
    assert hw.start_search(search_request(), name="override").name == "override"
    assert hw.start_search(**search_request(name="keywords")).name == "keywords"


def test_refusals_raise_api_error_with_the_status_field_and_message(hw):
    with pytest.raises(ApiError) as bad:
        hw.start_search(search_request(budget={"max_evaluations": 0}))
    assert bad.value.status == 422
    assert bad.value.field == "budget.max_evaluations"
    assert "greater than or equal to 1" in bad.value.message
    with pytest.raises(ApiError) as missing:
        hw.search(42)
    assert missing.value.status == 404 and "42" in missing.value.message


def test_wait_gives_up_after_its_timeout(hw):
    search = hw.start_search(search_request())
    with pytest.raises(TimeoutError, match=f"search {search.id} still running"):
        hw.wait(search.id, poll_s=0.01, timeout_s=0.05)


def test_cancel_stops_a_search(hw):
    search = hw.start_search(search_request())
    assert hw.cancel(search.id).status == "cancelled"
    assert hw.search(search.id).progress.queued == 0
