"""Request size limits (server.app.middleware.body_limit): a body over
Settings.max_request_bytes is refused with 413 before the app reads it (a declared length) or
as soon as the count passes it (chunked)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from hwnas.cli import build_parser
from server.app.factory import create_app
from server.app.middleware.body_limit import LimitRequestBody
from server.cli import serve as server_cli
from server.settings import Settings
from tests.factories import FINGERPRINT, search_request

LIMIT = 4096


@pytest.fixture
def small_limit(make_client) -> TestClient:
    """A client of a server whose request bodies may be LIMIT bytes at most."""
    return make_client(max_request_bytes=LIMIT)


def padded(size: int) -> bytes:
    """A search request of exactly `size` bytes (whitespace pads the JSON)."""
    body = json.dumps(search_request()).encode()
    assert len(body) <= size
    return body + b" " * (size - len(body))


def assert_refused(response: httpx.Response, limit: int) -> None:
    assert response.status_code == 413, response.text
    detail = response.json()["detail"]
    assert f"limit of {limit} bytes" in detail
    assert "max_request_bytes" in detail and "--max-request-mb" in detail


def test_the_default_limit_fits_the_largest_body_a_schema_admits():
    # A ProxyCheck at its 100,000-result cap with 64-character arch ids (the schema's maximum).
    results = [{"arch_id": "f" * 64, "value": 123.456789012345678} for _ in range(100_000)]
    body = json.dumps({"results": results, "target": "perplexity", "lower_is_better": True})
    assert 10 * 2**20 < len(body) < Settings().max_request_bytes


def test_a_declared_length_over_the_limit_is_refused_unread(client):
    too_big = Settings().max_request_bytes + 1
    response = client.post(
        "/api/v1/searches",
        content=b"x" * too_big,
        headers={"content-type": "application/json"},
    )
    assert_refused(response, Settings().max_request_bytes)
    assert client.get("/api/v1/searches").json() == []


def test_a_body_at_the_limit_is_read(small_limit):
    response = small_limit.post(
        "/api/v1/searches", content=padded(LIMIT), headers={"content-type": "application/json"}
    )
    assert response.status_code == 201, response.text
    response = small_limit.post(
        "/api/v1/searches", content=padded(LIMIT + 1), headers={"content-type": "application/json"}
    )
    assert_refused(response, LIMIT)
    assert len(small_limit.get("/api/v1/searches").json()) == 1


def test_a_chunked_body_over_the_limit_is_refused(small_limit):
    """No Content-Length: the middleware counts. The route's own answer to the read it could
    not finish (FastAPI: 400) is dropped for the 413."""

    def chunks() -> Iterator[bytes]:
        yield from [b"[" + b"0," * 500] * 10

    response = small_limit.post(
        "/api/v1/agents", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert_refused(response, LIMIT)
    assert small_limit.get("/api/v1/agents").json() == []


def test_a_chunked_body_under_the_limit_is_read(small_limit):
    body = json.dumps({"device_class": "cpu", "fingerprint": FINGERPRINT}).encode()
    response = small_limit.post(
        "/api/v1/agents",
        content=iter([body[:10], body[10:]]),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 201, response.text


def test_the_refusal_comes_as_soon_as_the_count_passes_the_limit():
    """The app stops being fed at the chunk that passes the limit: the rest is never read."""
    received: list[int] = []
    sent: list[dict] = []

    async def app(scope, receive, send):
        while (await receive())["more_body"]:
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"read it all"})

    async def receive():
        received.append(1)
        return {"type": "http.request", "body": b"x" * 4, "more_body": len(received) < 100}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
    asyncio.run(LimitRequestBody(app, max_bytes=10)(scope, receive, send))
    assert len(received) == 3  # 12 bytes > 10
    assert sent[0]["status"] == 413
    assert b"limit of 10 bytes" in sent[1]["body"]


@contextmanager
def serving(settings: Settings) -> Iterator[str]:
    """The real app under uvicorn on a free loopback port until the block ends."""
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=0, log_config=None, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="limits-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_real_server_refuses_chunked_and_declared_bodies_and_carries_on(tmp_path):
    limit = 64 * 1024
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'live.db'}", max_request_bytes=limit)

    def chunks() -> Iterator[bytes]:
        for _ in range(64):  # 1 MiB in 16 KiB chunks
            yield b" " * 16384

    with serving(settings) as url, httpx.Client(base_url=url, timeout=30) as http:
        chunked = http.post(
            "/api/v1/searches", content=chunks(), headers={"content-type": "application/json"}
        )
        assert chunked.request.headers["transfer-encoding"] == "chunked"
        assert "content-length" not in chunked.request.headers
        assert_refused(chunked, limit)
        declared = http.post(
            "/api/v1/searches",
            content=b" " * (limit + 1),
            headers={"content-type": "application/json"},
        )
        assert_refused(declared, limit)
        # The same connection and server go on serving.
        assert http.post("/api/v1/searches", json=search_request()).status_code == 201
        assert len(http.get("/api/v1/searches").json()) == 1


def test_serve_takes_the_limit_in_mib(monkeypatch, tmp_path):
    served = {}
    monkeypatch.setattr(server_cli, "configure_logging", lambda *_: None)
    monkeypatch.setattr(server_cli.uvicorn, "run", lambda app, **_: served.update(app=app))
    db = str(tmp_path / "serve.db")
    assert server_cli.serve(build_parser().parse_args(["serve", "--db", db, "--no-auth"])) == 0
    assert served["app"].state.store.settings.max_request_bytes == Settings().max_request_bytes
    served["app"].state.store.close()
    args = build_parser().parse_args(["serve", "--db", db, "--no-auth", "--max-request-mb", "2.5"])
    assert server_cli.serve(args) == 0
    assert served["app"].state.store.settings.max_request_bytes == int(2.5 * 2**20)
    served["app"].state.store.close()
