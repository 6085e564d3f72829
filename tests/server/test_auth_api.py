"""Authentication: user tokens, agent enrollment tokens, agent credentials; 401 and 403 with
messages that say what to do; tokens stored hashed; revocation; `hwnas token` commands."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sqlalchemy import select

from server.services import auth
from server.store.rows import AgentRow, TokenRow
from tests.factories import FINGERPRINT, search_request, synthetic_measurement


@pytest.fixture
def secured(make_client):
    """A server with authentication on: (client, user token, enrollment token)."""
    client = make_client(auth=True)
    store = client.app.state.store
    with store.write() as session:
        _, user = auth.create_token(session, "alice", "user", store.now())
        _, enroll = auth.create_token(session, "pi-fleet", "agent", store.now())
    return client, user, enroll


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def enroll_agent(client, enroll: str) -> tuple[str, str]:
    """Register with the enrollment token: (agent id, its credential)."""
    body = {"device_class": "test-cpu", "fingerprint": FINGERPRINT}
    response = client.post("/api/v1/agents", json=body, headers=bearer(enroll))
    assert response.status_code == 201, response.text
    info = response.json()
    assert info["credential"].startswith("hwnas_a_")
    return info["agent_id"], info["credential"]


def test_every_write_needs_a_user_token_and_says_how_to_make_one(secured):
    client, user, _ = secured
    writes = [
        ("/api/v1/searches", search_request()),
        ("/api/v1/baselines", {"device_class": "x", "space": {"kind": "gpt2"}}),
        ("/api/v1/searches/1/cancel", None),
    ]
    for path, body in writes:
        refused = client.post(path, json=body)
        assert refused.status_code == 401, (path, refused.text)
        assert "needs a user token" in refused.json()["detail"]
        assert "hwnas token create --kind user" in refused.json()["detail"]
        assert refused.headers["www-authenticate"] == "Bearer"
    created = client.post("/api/v1/searches", json=search_request(), headers=bearer(user))
    assert created.status_code == 201, created.text
    # Reads stay open unless the server keeps them private.
    assert client.get("/api/v1/searches").status_code == 200


def test_unknown_malformed_and_revoked_tokens_get_401_naming_the_problem(secured):
    client, user, _ = secured
    body = search_request()
    forged = client.post("/api/v1/searches", json=body, headers=bearer("hwnas_u_" + "x" * 43))
    assert forged.status_code == 401 and "never issued" in forged.json()["detail"]
    basic = client.post("/api/v1/searches", json=body, headers={"Authorization": "Basic abc"})
    assert basic.status_code == 401 and "'Bearer <token>'" in basic.json()["detail"]
    store = client.app.state.store
    with store.write() as session:
        [revoked] = auth.revoke_token(session, "alice", store.now())
    assert revoked.kind == "user"
    gone = client.post("/api/v1/searches", json=body, headers=bearer(user))
    assert gone.status_code == 401 and "'alice' was revoked" in gone.json()["detail"]


def test_tokens_are_stored_only_as_hashes(secured):
    client, user, enroll = secured
    agent_id, credential = enroll_agent(client, enroll)
    store = client.app.state.store
    with store.read() as session:
        hashes = set(session.scalars(select(TokenRow.token_hash)))
        agent = session.get(AgentRow, agent_id)
        stored = json.dumps([list(hashes), agent.credential_hash, agent.fingerprint])
    assert hashes == {auth.digest(user), auth.digest(enroll)}
    assert agent.credential_hash == auth.digest(credential)
    for secret in (user, enroll, credential):
        assert secret not in stored


def test_each_kind_of_token_does_only_its_own_job(secured):
    client, user, enroll = secured
    registration = {"device_class": "test-cpu", "fingerprint": FINGERPRINT}
    # A user token cannot enroll agents, an enrollment token cannot start searches.
    as_user = client.post("/api/v1/agents", json=registration, headers=bearer(user))
    assert as_user.status_code == 403
    assert "registering an agent needs an agent enrollment token" in as_user.json()["detail"]
    as_enroller = client.post("/api/v1/searches", json=search_request(), headers=bearer(enroll))
    assert as_enroller.status_code == 403
    assert "carries an agent enrollment token" in as_enroller.json()["detail"]
    no_token = client.post("/api/v1/agents", json=registration)
    assert no_token.status_code == 401 and "enrollment token" in no_token.json()["detail"]

    client.post("/api/v1/searches", json=search_request(), headers=bearer(user))
    alice, alice_key = enroll_agent(client, enroll)
    bob, bob_key = enroll_agent(client, enroll)
    # Claims: only with the agent's own credential.
    assert client.post(f"/api/v1/agents/{alice}/claim").status_code == 401
    with_user = client.post(f"/api/v1/agents/{alice}/claim", headers=bearer(user))
    assert with_user.status_code == 403 and "a user token cannot act for an agent" in with_user.text
    as_bob = client.post(f"/api/v1/agents/{alice}/claim", headers=bearer(bob_key))
    assert as_bob.status_code == 403 and f"belongs to agent {bob!r}" in as_bob.json()["detail"]
    lease = client.post(f"/api/v1/agents/{alice}/claim", headers=bearer(alice_key)).json()
    job = f"/api/v1/jobs/{lease['job_id']}"
    ref = {"agent_id": alice, "lease_id": lease["lease_id"]}
    # Bob cannot beat or report for Alice's lease, even naming her in the body.
    assert client.post(f"{job}/heartbeat", json=ref, headers=bearer(bob_key)).status_code == 403
    result = {**ref, "measurement": synthetic_measurement(lease["spec"])}
    assert client.post(f"{job}/result", json=result, headers=bearer(bob_key)).status_code == 403
    assert client.post(f"{job}/heartbeat", json=ref, headers=bearer(alice_key)).status_code == 200
    done = client.post(f"{job}/result", json=result, headers=bearer(alice_key))
    assert done.status_code == 200 and done.json()["accepted"] is True


def test_revoking_an_enrollment_token_locks_out_the_agents_it_enrolled(secured):
    client, _, enroll = secured
    agent_id, credential = enroll_agent(client, enroll)
    assert client.post(
        f"/api/v1/agents/{agent_id}/claim", headers=bearer(credential)
    ).status_code in (
        200,
        204,
    )
    store = client.app.state.store
    with store.write() as session:
        auth.revoke_token(session, "pi-fleet", store.now())
    refused = client.post(f"/api/v1/agents/{agent_id}/claim", headers=bearer(credential))
    assert refused.status_code == 401 and "register again" in refused.json()["detail"]
    again = client.post(
        "/api/v1/agents",
        json={"device_class": "test-cpu", "fingerprint": FINGERPRINT},
        headers=bearer(enroll),
    )
    assert again.status_code == 401 and "revoked" in again.json()["detail"]


def test_private_reads_need_a_user_token_but_health_and_dashboard_do_not(make_client):
    client = make_client(auth=True, private_reads=True)
    store = client.app.state.store
    with store.write() as session:
        _, user = auth.create_token(session, "alice", "user", store.now())
    assert client.get("/api/v1/searches").status_code == 401
    assert client.get("/api/v1/spaces").status_code == 401
    assert client.get("/api/v1/searches", headers=bearer(user)).status_code == 200
    assert client.get("/healthz").status_code == 200
    assert client.get("/dashboard/").status_code == 200


def test_the_openapi_schema_declares_the_bearer_scheme_and_auth_errors(secured):
    client, _, _ = secured
    schema = client.get("/openapi.json").json()
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    create = schema["paths"]["/api/v1/searches"]["post"]
    assert {"401", "403"} <= set(create["responses"]) and create["security"]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_hwnas_token_commands_create_list_and_revoke(database_url, make_client):
    url = database_url("tokens.db")
    hwnas = [sys.executable, "-m", "hwnas", "token"]

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*hwnas, *args, "--db", url], capture_output=True, text=True)

    made = run("create", "--name", "ci", "--kind", "user", "--json")
    assert made.returncode == 0, made.stderr
    secret = json.loads(made.stdout)["token"]
    plain = run("create", "--name", "pis", "--kind", "agent")
    assert plain.returncode == 0 and plain.stdout.strip().startswith("hwnas_e_")
    assert "shown once" in plain.stderr
    listed = json.loads(run("list", "--json").stdout)
    assert [(t["name"], t["kind"], t["revoked_at"]) for t in listed] == [
        ("ci", "user", None),
        ("pis", "agent", None),
    ]
    client = make_client("tokens.db", auth=True)
    ok = client.post("/api/v1/searches", json=search_request(), headers=bearer(secret))
    assert ok.status_code == 201, ok.text
    revoked = run("revoke", "ci")
    assert revoked.returncode == 0 and "revoked user token 1 (ci)" in revoked.stdout
    refused = client.post("/api/v1/searches", json=search_request(), headers=bearer(secret))
    assert refused.status_code == 401
    missing = run("revoke", "ci")
    assert missing.returncode == 1 and "no live token named 'ci'" in missing.stderr


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_first_start_makes_the_first_tokens_once(database_url, monkeypatch, capsys):
    from server.cli.serve import prepare_database
    from server.settings import Settings

    settings = Settings(database_url=database_url("first.db"), auth=True)
    monkeypatch.setenv("HWNAS_AGENT_TOKEN", "hwnas_e_shared-by-compose")
    prepare_database(settings, "first.db")
    shown = capsys.readouterr().err
    secret = shown.split("export HWNAS_TOKEN=")[1].split()[0]
    prepare_database(settings, "first.db")  # a restart: nothing new, nothing shown
    assert "export HWNAS_TOKEN" not in capsys.readouterr().err

    from server.store.database import make_engine

    engine = make_engine(settings.database_url)
    with engine.connect() as connection:
        rows = connection.execute(select(TokenRow.name, TokenRow.kind, TokenRow.token_hash))
        tokens = {(name, kind): hashed for name, kind, hashed in rows}
    engine.dispose()
    assert tokens == {
        ("$HWNAS_AGENT_TOKEN", "agent"): auth.digest("hwnas_e_shared-by-compose"),
        ("admin", "user"): auth.digest(secret),
    }


def test_a_credential_checked_in_the_request_answers_as_a_lookup_first_would(secured):
    """Claims, heartbeats and results check the agent's credential against the agent row
    they load anyway (no read of their own): the answers must be those of a lookup made
    before anything else: 401 for a credential nobody holds, 403 for another agent's, even
    where the job or the agent named does not exist, and a revoked credential is refused at
    once, also for an agent whose last claim found nothing; a refused result changes
    nothing."""
    client, user, enroll = secured
    alice, alice_key = enroll_agent(client, enroll)
    bob, bob_key = enroll_agent(client, enroll)
    forged = "hwnas_a_" + "x" * 43
    ref = {"agent_id": alice, "lease_id": "0" * 32}
    nowhere = "/api/v1/jobs/999999"
    for path, body in (
        (f"{nowhere}/heartbeat", ref),
        (f"{nowhere}/result", {**ref, "failure": {"kind": "error", "message": "m"}}),
    ):
        unknown = client.post(path, json=body, headers=bearer(forged))
        assert unknown.status_code == 401 and "not recognised" in unknown.json()["detail"]
        other = client.post(path, json=body, headers=bearer(bob_key))
        assert other.status_code == 403 and f"belongs to agent {bob!r}" in other.json()["detail"]
    ghost = client.post("/api/v1/agents/no-such-agent/claim", headers=bearer(alice_key))
    assert ghost.status_code == 403 and f"belongs to agent {alice!r}" in ghost.json()["detail"]
    unknown = client.post(f"/api/v1/agents/{alice}/claim", headers=bearer(forged))
    assert unknown.status_code == 401

    # Alice's result sent with Bob's credential is refused and leaves the job running.
    client.post("/api/v1/searches", json=search_request(), headers=bearer(user))
    lease = client.post(f"/api/v1/agents/{alice}/claim", headers=bearer(alice_key)).json()
    job = f"/api/v1/jobs/{lease['job_id']}"
    result = {"agent_id": alice, "lease_id": lease["lease_id"]}
    result["measurement"] = synthetic_measurement(lease["spec"])
    assert client.post(f"{job}/result", json=result, headers=bearer(bob_key)).status_code == 403
    progress = client.get("/api/v1/searches/1", headers=bearer(user)).json()["progress"]
    assert progress["measured"] == 0 and progress["running"] == 1

    # An agent whose claims found nothing is answered from a read; revoked, it gets a 401 too.
    client.post("/api/v1/searches/1/cancel", headers=bearer(user)).raise_for_status()
    for _ in range(2):
        idle = client.post(f"/api/v1/agents/{bob}/claim", headers=bearer(bob_key))
        assert idle.status_code == 204
    store = client.app.state.store
    with store.write() as session:
        auth.revoke_token(session, "pi-fleet", store.now())
    for agent_id, key in ((bob, bob_key), (alice, alice_key)):
        refused = client.post(f"/api/v1/agents/{agent_id}/claim", headers=bearer(key))
        assert refused.status_code == 401 and "register again" in refused.json()["detail"]
    late = client.post(f"{job}/result", json=result, headers=bearer(alice_key))
    assert late.status_code == 401
