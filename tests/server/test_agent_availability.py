"""A search says whether any agent can measure it (issue 19): `agents` on the search, a
warning at once when no agent of its device class ever registered, and device classes matched
case-insensitively, old databases included."""

from __future__ import annotations

from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from server.app.factory import create_app
from server.services.availability import agent_command
from server.settings import Settings
from server.store.schema import alembic_config
from tests.factories import FINGERPRINT, register, search_request

COMMAND = "hwnas agent --server http://testserver --device-class pi5"


def test_a_search_for_a_class_no_agent_ever_registered_warns_at_once(client):
    register(client, device_class="test-cpu")
    created = client.post("/api/v1/searches", json=search_request(device_class="pi5"))
    assert created.status_code == 201, created.text
    info = created.json()
    [warning] = info["warnings"]
    assert "no agent of device class 'pi5' has ever registered" in warning
    assert "classes with agents: test-cpu" in warning and f"`{COMMAND}`" in warning
    agents = info["agents"]
    assert (agents["online"], agents["able"], agents["ever_registered"]) == (0, 0, 0)
    assert agents["command"] == COMMAND
    assert "nothing is measured until one is" in agents["waiting_for_agent"]
    # The same on every read while it lasts, in the list too.
    again = client.get(f"/api/v1/searches/{info['id']}").json()
    assert again["warnings"] == info["warnings"] and again["agents"] == agents
    [listed] = client.get("/api/v1/searches").json()
    assert listed["agents"]["command"] == COMMAND


def test_a_search_with_an_online_agent_has_no_warning(client):
    register(client)
    info = client.post("/api/v1/searches", json=search_request()).json()
    assert info["warnings"] == []
    assert info["agents"] == {
        "online": 1,
        "able": 1,
        "ever_registered": 1,
        "waiting_for_agent": None,
        "command": None,
    }


def test_a_search_whose_agents_went_silent_says_it_waits(client, clock):
    register(client)
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    clock.advance(31)  # the fixture's lease is 30 s: the agent is no longer online
    info = client.get(f"/api/v1/searches/{search_id}").json()
    assert info["warnings"] == []  # one registered once: not a typo
    agents = info["agents"]
    assert (agents["online"], agents["ever_registered"]) == (0, 1)
    assert (
        "is online (1 registered, none seen within a lease period)" in (agents["waiting_for_agent"])
    )
    client.post(f"/api/v1/searches/{search_id}/cancel")
    done = client.get(f"/api/v1/searches/{search_id}").json()["agents"]
    assert done["waiting_for_agent"] is None  # a search that no longer runs waits for nothing


def test_online_agents_that_cannot_run_the_search_are_not_enough(client):
    register(client, fingerprint={**FINGERPRINT, "runtimes": ["onnxruntime"]})
    info = client.post("/api/v1/searches", json=search_request()).json()
    agents = info["agents"]
    assert (agents["online"], agents["able"]) == (1, 0)
    assert "none can measure with runtime 'torch' on device 'cpu'" in agents["waiting_for_agent"]


def test_the_command_carries_the_enrollment_token_where_auth_is_on():
    assert agent_command("pi5", "http://h:8000", auth=True) == (
        "HWNAS_AGENT_TOKEN=<agent enrollment token> "
        "hwnas agent --server http://h:8000 --device-class pi5"
    )
    assert agent_command("pi5", None, auth=False).startswith("hwnas agent --server <")


def test_device_classes_are_one_class_whatever_their_case(client):
    agent = client.post(
        "/api/v1/agents", json={"device_class": "CPU", "fingerprint": FINGERPRINT}
    ).json()
    assert agent["device_class"] == "cpu"
    info = client.post("/api/v1/searches", json=search_request(device_class="Cpu")).json()
    assert info["device_class"] == "cpu" and info["request"]["device_class"] == "cpu"
    assert info["warnings"] == [] and info["agents"]["online"] == 1
    claimed = client.post(f"/api/v1/agents/{agent['agent_id']}/claim")
    assert claimed.status_code == 200 and claimed.json()["search_id"] == info["id"]
    baseline = client.post("/api/v1/baselines", json={"device_class": "CPU"}).json()
    assert baseline["device_class"] == "cpu" and baseline["warnings"] == []
    [view] = client.get("/api/v1/agents").json()
    assert view["device_class"] == "cpu"


def test_a_database_with_classes_in_upper_case_is_lowered_on_open(database_url, clock):
    url = database_url("mixed-case.db")
    with TestClient(create_app(Settings(database_url=url, clock=clock))) as client:
        agent = register(client, device_class="cpu")
        created = client.post("/api/v1/searches", json=search_request(device_class="cpu"))
        search_id = created.json()["id"]
    # As an older hwnas stored them: the spelling each was given.
    engine = create_engine(url)
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0003")
        connection.execute(text("UPDATE agents SET device_class = 'CPU'"))
        connection.execute(text("UPDATE searches SET device_class = 'Cpu'"))
    engine.dispose()
    with TestClient(create_app(Settings(database_url=url, clock=clock))) as client:
        assert client.get("/api/v1/agents").json()[0]["device_class"] == "cpu"
        info = client.get(f"/api/v1/searches/{search_id}").json()
        assert info["device_class"] == "cpu" and info["agents"]["ever_registered"] == 1
        claimed = client.post(f"/api/v1/agents/{agent}/claim")
        assert claimed.status_code == 200 and claimed.json()["search_id"] == search_id
