"""A server's threads take short turns at the interpreter (server.app.turns)."""

from __future__ import annotations

import sys

from fastapi.testclient import TestClient

from server.app.factory import create_app
from server.app.turns import TURN_S
from server.settings import Settings


def test_a_server_hands_the_interpreter_over_in_short_turns_for_its_life(tmp_path) -> None:
    before = sys.getswitchinterval()
    assert before > TURN_S  # CPython's 5 ms, as a test process has it
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 's.db'}"))
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        assert sys.getswitchinterval() == TURN_S
    assert sys.getswitchinterval() == before
