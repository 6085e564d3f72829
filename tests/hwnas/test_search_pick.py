"""`hwnas search pareto | pick | export` with bounds, an order and id prefixes, and the
client's `pareto`, `pick` and `architecture`, against the real app in-process."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from archvocab.wire import ApiError
from hwnas import search_cli
from hwnas.cli import build_parser, main
from hwnas.client import Client
from hwnas.frontier_view import choosing_params
from server.app.factory import create_app
from server.settings import Settings
from tests.factories import play_agent, register, search_request


@pytest.fixture
def http(tmp_path):
    with TestClient(create_app(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}"))) as c:
        c.post("/api/v1/searches", json=search_request(budget={"max_evaluations": 24}))
        play_agent(c, register(c))
        yield c


@pytest.fixture
def cli(http, monkeypatch, capsys):
    """`hwnas search ...` in-process, its Client on the app: (exit code, stdout, stderr)."""
    monkeypatch.setattr(search_cli, "Client", lambda server, token=None: Client(http=http))

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["search", *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def test_flags_become_the_query():
    args = build_parser().parse_args(
        [
            *("search", "pick", "3", "--max-latency-ms", "20", "--min-decoder-params", "5e6"),
            *("--min", "snip=0.5", "--max", "memory_mb=300", "--order-by", "latency_ms"),
            *("--asc", "--bounds-on", "interval", "--neighbours", "1"),
        ]
    )
    assert choosing_params(args) == {
        "max_latency_ms": 20.0,
        "min_decoder_params": 5e6,
        "min_snip": 0.5,
        "max_memory_mb": 300.0,
        "order_by": "latency_ms",
        "desc": False,
        "bounds_on": "interval",
        "neighbours": 1,
    }


@pytest.mark.parametrize(
    "flags",
    [
        ["--max", "latency_ms"],  # no value
        ["--max-latency-ms", "fast"],
        [],  # pick needs --order-by
    ],
)
def test_bad_flags_are_usage_errors(flags, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["search", "pick", "1", *flags])
    assert exited.value.code == 2
    assert "--" in capsys.readouterr().err


def test_pick_prints_the_pick_between_its_neighbours(http, cli):
    front = http.get("/api/v1/searches/1/pareto", params={"order_by": "latency_ms"}).json()
    floor = sorted(p["objectives"]["decoder_params"] for p in front)[len(front) // 2]
    expected = next(p for p in front if p["objectives"]["decoder_params"] >= floor)

    code, out, _ = cli("pick", "1", "--min-decoder-params", str(floor), "--order-by", "latency_ms")

    assert code == 0
    assert "best by latency_ms (ascending) with decoder_params >=" in " ".join(out.split())
    pick_line = next(line for line in out.splitlines() if "pick" in line and "│" in line)
    assert expected["arch_id"] in pick_line
    assert f"hwnas search export {expected['arch_id']} --format torch" in out
    code, out, _ = cli("pick", "1", "--order-by", "latency_ms", "--json")
    assert code == 0 and json.loads(out)["pick"]["arch_id"] == front[0]["arch_id"]


def test_pareto_prints_the_points_that_meet_the_bounds_in_order(http, cli):
    params = {"order_by": "decoder_params", "limit": 3}
    expected = [p["arch_id"] for p in http.get("/api/v1/searches/1/pareto", params=params).json()]
    code, out, _ = cli("pareto", "1", "--order-by", "decoder_params", "--limit", "3", "--json")
    assert code == 0 and [p["arch_id"] for p in json.loads(out)] == expected
    code, out, _ = cli("pareto", "1", "--order-by", "decoder_params", "--limit", "3")
    rows = [line for line in out.splitlines() if any(a in line for a in expected)]
    assert [next(a for a in expected if a in row) for row in rows] == expected  # in order
    assert "[low, high]: where a re-measurement should fall" in " ".join(out.split())


def test_nothing_meeting_the_bounds_is_one_line_naming_the_bound(cli):
    code, _, err = cli("pick", "1", "--max-latency-ms", "0.001", "--order-by", "latency_ms")
    assert code == 1 and len(err.splitlines()) == 1
    assert "404: max_latency_ms: no frontier point has latency_ms <= 0.001" in err
    code, _, err = cli("pareto", "1", "--max", "latency=3")
    assert code == 1 and "422: max_latency: 'latency' is not an objective" in err


def test_export_takes_a_prefix_and_writes_the_full_id(http, cli, tmp_path):
    arch_id = http.get("/api/v1/searches/1/pareto").json()[0]["arch_id"]
    code, out, _ = cli("export", arch_id[:8], "--format", "torch", "-o", str(tmp_path), "--json")
    assert code == 0, out
    done = json.loads(out)
    assert done["arch_id"] == arch_id and done["path"] == str(tmp_path / f"hwnas-{arch_id}.py")
    code, _, err = cli("export", arch_id[:6])
    assert code == 1 and "422: arch_id:" in err and "at least 8" in err


def test_the_client_resolves_prefixes_and_names_files_by_the_full_id(http, tmp_path):
    client = Client(http=http)
    arch_id = client.pareto(1)[0].arch_id
    assert client.architecture(arch_id[:10]).arch_id == arch_id
    path = client.export(arch_id[:8], "torch", tmp_path)
    assert path == tmp_path / f"hwnas-{arch_id}.py"
    path = client.export(arch_id[:8], "json", tmp_path)
    assert path == tmp_path / f"hwnas-{arch_id}.json"
    with pytest.raises(ApiError) as refused:
        client.pick(1, "latency_ms", max_latency_ms=0.001)
    assert refused.value.status == 404 and "latency_ms <= 0.001" in refused.value.message
    best: Any = client.pick(1, "decoder_params", neighbours=1, max_latency_ms=1e9)
    assert best.descending and len(best.neighbours) == 1
    assert best.pick.arch_id == client.pareto(1, order_by="decoder_params", limit=1)[0].arch_id
    ranked = [p.arch_id for p in client.pareto(1, order_by="decoder_params")]
    pages = [client.pareto(1, order_by="decoder_params", limit=2, offset=k) for k in (0, 2)]
    assert [p.arch_id for page in pages for p in page] == ranked[:4]  # pages of the order
