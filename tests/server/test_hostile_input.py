"""Hostile input the schema fuzzer does not reach, and regressions for what it found: bodies
Python's JSON reader refuses, free-form JSON the server could not write back out, and error
answers that broke the OpenAPI document's own schemas."""

from __future__ import annotations

import json

import pytest
import schemathesis

from tests.factories import FINGERPRINT, play_agent, register, search_request, synthetic_measurement

JSON = {"content-type": "application/json"}
DEEP = 100_000


def post_raw(client, path: str, body: str | bytes):
    return client.post(path, content=body, headers=JSON)


@pytest.mark.parametrize("path", ["/api/v1/searches", "/api/v1/spaces/check"])
@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("[" * DEEP + "]" * DEEP, "nested too deeply"),
        ('{"space": ' + "[" * DEEP + "]" * DEEP + "}", "nested too deeply"),
        ("1" * 100_000, "an integer has too many digits"),
        ('{"seed": ' + "9" * 100_000 + "}", "an integer has too many digits"),
        (b'{"name": "\xff"}', "not UTF-8"),
    ],
    ids=["deep-array", "deep-field", "huge-integer", "huge-field", "not-utf8"],
)
def test_a_body_json_cannot_read_is_400_saying_why(client, path, body, says):
    response = post_raw(client, path, body)
    assert response.status_code == 400, response.text
    assert response.json()["detail"].startswith("the request body could not be read as JSON")
    assert says in response.json()["detail"]


def _claim(client, agent):
    claimed = client.post(f"/api/v1/agents/{agent}/claim")
    assert claimed.status_code == 200, claimed.text
    return claimed.json()


def _result(agent, lease, details: str) -> str:
    measurement = {**synthetic_measurement(lease["spec"]), "details": {"x": "HOLE"}}
    body = {"agent_id": agent, "lease_id": lease["lease_id"], "measurement": measurement}
    return json.dumps(body).replace('"HOLE"', details)


@pytest.mark.parametrize(
    ("details", "says"),
    [
        ("[" * 300 + "]" * 300, "x[0][0][0]"),  # was a 500: pydantic would not serialise it
        ('"\\ud800"', "is not valid Unicode"),  # was stored, then every read of it was a 500
        ('{"\\udfff": 1}', "is not valid Unicode"),
    ],
    ids=["nested-300", "lone-surrogate", "surrogate-key"],
)
def test_a_measurement_the_server_could_not_write_back_is_422(client, details, says):
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    lease = _claim(client, agent)
    response = post_raw(
        client, f"/api/v1/jobs/{lease['job_id']}/result", _result(agent, lease, details)
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", "measurement", "details"]
    assert says in response.json()["message"]
    # Nothing was stored: the search reads, and the job takes a proper result.
    assert client.get("/api/v1/searches/1/candidates").status_code == 200
    accepted = post_raw(
        client, f"/api/v1/jobs/{lease['job_id']}/result", _result(agent, lease, "1")
    )
    assert accepted.status_code == 200, accepted.text


def test_free_form_json_may_nest_32_levels_below_its_field(client):
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    first, second = _claim(client, agent), _claim(client, agent)
    # details.x is level 1; the innermost of 32 lists is level 32.
    deepest = _result(agent, first, "[" * 32 + "]" * 32)
    response = post_raw(client, f"/api/v1/jobs/{first['job_id']}/result", deepest)
    assert response.status_code == 200, response.text
    deeper = _result(agent, second, "[" * 33 + "]" * 33)
    response = post_raw(client, f"/api/v1/jobs/{second['job_id']}/result", deeper)
    assert response.status_code == 422
    assert "nested deeper than 32 levels" in response.json()["message"]


def test_a_spec_key_that_is_not_unicode_is_422(client):
    """Was a 500: the 422 naming the unknown key could not be encoded as UTF-8."""
    response = post_raw(client, "/api/v1/spaces/check", '{"spec": {"\\ud800": 1}}')
    assert response.status_code == 422, response.text
    assert "is not valid Unicode" in response.json()["message"]


ID_ROUTES = [
    ("GET", "/api/v1/searches/{id}"),
    ("GET", "/api/v1/searches/{id}/report"),
    ("GET", "/api/v1/searches/{id}/hypervolume"),
    ("GET", "/api/v1/searches/{id}/pareto"),
    ("GET", "/api/v1/searches/{id}/points"),
    ("GET", "/api/v1/searches/{id}/candidates"),
    ("POST", "/api/v1/searches/{id}/cancel"),
    ("POST", "/api/v1/jobs/{id}/heartbeat"),
    ("POST", "/api/v1/jobs/{id}/result"),
]


@pytest.mark.parametrize(("method", "path"), ID_ROUTES)
def test_an_id_past_the_databases_integer_keys_is_422(client, method, path):
    """Was a 500 on PostgreSQL, whose INTEGER keys are 32-bit; 2**31 - 1 is merely unknown."""
    body = {"agent_id": "a", "lease_id": "b", "failure": {"kind": "error"}}
    if path.endswith("/heartbeat"):
        body.pop("failure")
    kwargs = {"json": body} if method == "POST" else {}
    response = client.request(method, path.format(id=2**31), **kwargs)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][0] == "path"
    response = client.request(method, path.format(id=2**31 - 1), **kwargs)
    assert response.status_code == 404, response.text


def _nul_cases() -> list:
    results = [{"arch_id": f"a{i}\x00", "value": 1.0} for i in range(3)]
    fingerprint = {**FINGERPRINT, "hostname": "host\x00"}
    return [
        ("/api/v1/searches", search_request(name="a\x00b"), ["body", "name"]),
        (
            "/api/v1/agents",
            {"device_class": "cpu", "name": "\x00", "fingerprint": FINGERPRINT},
            ["body", "name"],
        ),
        (
            "/api/v1/agents",
            {"device_class": "cpu", "fingerprint": fingerprint},
            ["body", "fingerprint", "hostname"],
        ),
        (
            "/api/v1/proxies/check",
            {"results": results, "lower_is_better": True},
            ["body", "results", 0, "arch_id"],
        ),
    ]


@pytest.mark.parametrize(
    ("path", "body", "loc"), _nul_cases(), ids=["search", "agent", "fingerprint", "proxies"]
)
def test_text_holding_nul_is_422_naming_the_field(client, path, body, loc):
    """Was a 500 on PostgreSQL, whose text cannot hold NUL; refused on every store alike."""
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == loc
    assert "NUL" in response.json()["message"]


def test_an_agent_id_holding_nul_is_422(client):
    response = client.post("/api/v1/agents/a%00b/claim")
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["path", "agent_id"]


def test_a_failure_message_holding_nul_is_kept_with_a_replacement_character(client):
    """An agent reports what a crash printed: cleaned, not refused, so the report goes in."""
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    lease = _claim(client, agent)
    failure = {"kind": "error", "message": "segfault\x00\x00 in libfoo"}
    body = {"agent_id": agent, "lease_id": lease["lease_id"], "failure": failure}
    response = client.post(f"/api/v1/jobs/{lease['job_id']}/result", json=body)
    assert response.status_code == 200, response.text
    (failed,) = client.get("/api/v1/searches/1/candidates", params={"status": "failed"}).json()
    assert failed["failure"]["message"] == "segfault\ufffd\ufffd in libfoo"


def _conforms(client, method: str, path: str, response) -> None:
    """The answer has a documented status and content type and matches the documented body."""
    schema = schemathesis.openapi.from_dict(client.get("/openapi.json").json())
    schema[path][method].validate_response(response)


def test_every_kind_of_error_answer_is_the_one_documented(client, make_client):
    """Schemathesis found 404s, 409s and 400s undocumented, and 422s from domain checks
    (InvalidSpec: a string `detail` and `field`) breaking the documented 422 schema."""
    client.post("/api/v1/searches", json=search_request())
    agent = register(client)
    play_agent(client, agent, max_jobs=1)
    lease = _claim(client, agent)
    cases = [
        ("GET", "/api/v1/searches/{search_id}", client.get("/api/v1/searches/99"), 404),
        ("GET", "/api/v1/searches/{search_id}", client.get("/api/v1/searches/0"), 422),
        (
            "POST",
            "/api/v1/spaces/check",
            client.post("/api/v1/spaces/check", json={"spec": {}}),
            422,
        ),
        ("POST", "/api/v1/searches", post_raw(client, "/api/v1/searches", b"\xff"), 400),
        (
            "POST",
            "/api/v1/jobs/{job_id}/heartbeat",
            client.post(
                f"/api/v1/jobs/{lease['job_id']}/heartbeat",
                json={"agent_id": agent, "lease_id": "not-the-lease"},
            ),
            409,
        ),
        (
            "POST",
            "/api/v1/searches",
            client.post("/api/v1/searches", content=b" " * (16 * 2**20 + 1), headers=JSON),
            413,
        ),
    ]
    for method, path, response, status in cases:
        assert response.status_code == status, (path, response.text)
        _conforms(client, method, path, response)


def test_the_pareto_csv_is_documented(client):
    client.post("/api/v1/searches", json=search_request())
    play_agent(client, register(client))
    response = client.get("/api/v1/searches/1/pareto", params={"format": "csv"})
    assert response.headers["content-type"].startswith("text/csv")
    _conforms(client, "GET", "/api/v1/searches/{search_id}/pareto", response)
