"""Hostile input: every operation in the OpenAPI document, fuzzed by Schemathesis against a
server with state (searches with results, an agent, jobs in every status). No answer may be
a 5xx, have an undocumented status or content type, or a body that breaks its schema.

Schemathesis's fixture-based schemas (`schemathesis.pytest.from_fixture`) do not run under
pytest 9.2 (they set `request.node._nodeid`), so the schema is read at import time from an
app over an in-memory database, and each case is sent to the seeded app of the fixture.
"""

from __future__ import annotations

import zlib
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from archvocab.wire import MAX_CLAIM_WAIT_S
from server.app.factory import create_app
from server.settings import Settings
from tests.factories import play_agent, register, search_request

# What every request carries: the one place to add `Authorization: Bearer <token>` once
# the routes need it.
HEADERS: dict[str, str] = {}
CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]
SEARCHES, JOBS = 3, 20
ONNX_SHAPE = {"batch_size": 1, "seq_len": 8}
CLAIM_WAIT_S = 0.05  # the longest a fuzzed claim waits for work


def _openapi() -> dict[str, Any]:
    app = create_app(Settings(database_url="sqlite://"))
    try:
        return app.openapi()
    finally:
        app.state.store.close()


OPENAPI = _openapi()
schema = schemathesis.openapi.from_dict(OPENAPI)
# The same cases every run (and no .hypothesis folder): a failure here is the change's.
schema.config.generation.update(max_examples=30, deterministic=True, database="none")
# An answer later than this is a hang. The largest valid search (an initial population of
# 10,000) takes seconds to propose on a busy machine; Schemathesis's default is 10 s.
schema.config.update(request_timeout=60)

# Ids of what the fixture seeded, for the hooks below to aim at.
SEEDED: dict[str, list[str]] = {}


@schema.hook
def before_generate_path_parameters(_context, strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Half the cases name what exists: searches 1..3, jobs 1..20, the agent, an architecture
    (the rest keep Schemathesis's values, mostly ids that name nothing)."""
    return st.one_of(strategy, strategy.map(_existing))


@schema.hook
def before_generate_body(_context, strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Half the heartbeats and results come from the registered agent (a wrong lease: 409)."""
    return st.one_of(strategy, strategy.map(_from_agent))


@schema.hook
def map_query(_context, query: Any) -> Any:
    """One ONNX input shape, exported by the fixture: a new one would take a child process
    seconds, past the 10 s Schemathesis waits for an answer (a hang). A claim's wait for work
    cut to CLAIM_WAIT_S."""
    if isinstance(query, dict) and query.get("format") == "onnx":
        return {**query, **ONNX_SHAPE}
    if isinstance(query, dict) and _long_wait(query.get("wait")):
        # A claim allowed to wait with nothing queued for it waits out its `wait`: up to
        # MAX_CLAIM_WAIT_S a case, a minute a run. A short one takes the same path.
        return {**query, "wait": CLAIM_WAIT_S}
    return query


def _long_wait(wait: Any) -> bool:
    """A claim's `wait` the server accepts and would wait longer than CLAIM_WAIT_S for;
    values it refuses (negative, past its bound, not numbers) stay as generated."""
    try:
        seconds = float(wait)
    except (TypeError, ValueError):
        return False
    return CLAIM_WAIT_S < seconds <= MAX_CLAIM_WAIT_S


def _existing(params: Any) -> Any:
    if not isinstance(params, dict):
        return params
    params = dict(params)
    for name, count in (("search_id", SEARCHES), ("job_id", JOBS)):
        if isinstance(params.get(name), int):
            params[name] = 1 + params[name] % count
    for name, key in (("agent_id", "agents"), ("arch_id", "archs")):
        if name in params and SEEDED.get(key):
            params[name] = SEEDED[key][zlib.crc32(str(params[name]).encode()) % len(SEEDED[key])]
    return params


def _from_agent(body: Any) -> Any:
    if isinstance(body, dict) and "agent_id" in body and SEEDED.get("agents"):
        return {**body, "agent_id": SEEDED["agents"][0]}
    return body


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def fuzz_app(request, tmp_path_factory):
    """On each store, searches 1..3 with 4 results each; jobs 1..20, of which 13 and 14 are
    running, the rest of search 1's and 2's queued, and search 3 cancelled."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('fuzz')}/fuzz.db"
    else:  # skips where PostgreSQL is not installed (tests/conftest.py)
        url = request.getfixturevalue("postgres_cluster").create_database("schema_fuzz")
    app = create_app(Settings(database_url=url))
    with TestClient(app, headers=HEADERS) as client:
        for seed in range(SEARCHES):
            created = client.post("/api/v1/searches", json=search_request(seed=seed))
            assert created.status_code == 201, created.text
        agent = register(client)
        assert play_agent(client, agent, max_jobs=12) == 12
        for _ in range(2):
            assert client.post(f"/api/v1/agents/{agent}/claim").status_code == 200
        assert client.post("/api/v1/searches/3/cancel").status_code == 200
        arch = client.get("/api/v1/searches/1/candidates").json()[0]["arch_id"]
        exported = client.get(
            f"/api/v1/architectures/{arch}/export", params={"format": "onnx", **ONNX_SHAPE}
        )
        assert exported.status_code == 200, exported.text
        SEEDED.update(agents=[agent], archs=[arch])
    # Schemathesis runs the app's lifespan itself, test by test. One held open here as well
    # would run a second sweeper, whose connections each of those lifespans' ends (the store
    # closed) would strand in a disposed pool: "psycopg.Connection deleted while still open".
    yield app
    SEEDED.clear()


@schema.parametrize()
def test_api(case, fuzz_app):
    case.call_and_validate(app=fuzz_app, headers=HEADERS, checks=CHECKS)


def test_every_operation_is_fuzzed():
    """test_api runs once per operation Schemathesis could read: that is every one."""
    documented = {
        f"{method.upper()} {path}" for path, ops in OPENAPI["paths"].items() for method in ops
    }
    read = [result.ok().label for result in schema.get_all_operations()]  # ok(): no errors
    assert sorted(read) == sorted(documented)
    assert "POST /api/v1/jobs/{job_id}/result" in documented
