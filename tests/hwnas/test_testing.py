"""hwnas.testing, the harness of tests and benchmarks: ports, named processes and their logs,
and a server that does not start saying why."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from hwnas.testing.ports import free_port, loopback_url
from hwnas.testing.processes import Processes
from hwnas.testing.servers import ServerDidNotStart, api_client, start_server, wait_healthy
from tests.factories import register, search_request


def test_a_free_port_can_be_bound() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    assert loopback_url(port) == f"http://127.0.0.1:{port}"


def test_a_name_logs_afresh_then_appends_on_restart(tmp_path: Path) -> None:
    procs = Processes(tmp_path)
    procs.log_path("job").write_text("left by an earlier run\n")
    say = [sys.executable, "-c", "import sys; print(sys.argv[1])"]
    procs.spawn("job", [*say, "first"]).wait()
    procs.spawn("job", [*say, "second"]).wait()
    assert procs.log("job") == "first\nsecond\n"
    assert procs.log("never-started") == ""


def test_stop_all_ends_every_process_and_kill_is_immediate(tmp_path: Path) -> None:
    procs = Processes(tmp_path)
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    procs.spawn("a", sleep)
    procs.spawn("b", sleep)
    procs.kill("a")
    assert procs.by_name["a"].returncode == -9
    procs.stop_all(grace_s=10)
    assert all(proc.poll() is not None for proc in procs.procs)


def test_a_server_that_exits_raises_with_its_log(tmp_path: Path) -> None:
    procs = Processes(tmp_path)
    bad_db = tmp_path / "missing-folder" / "x.db"
    with pytest.raises(ServerDidNotStart, match="exited; its log ends") as info:
        start_server(procs, f"sqlite:///{bad_db}", free_port(), "--no-auth")
    assert procs.by_name["server"].poll() is not None
    assert procs.log("server") and procs.log("server")[-200:] in str(info.value)


def test_a_server_s_tokens_are_those_its_first_start_printed_else_made(tmp_path: Path) -> None:
    db = tmp_path / "hwnas.db"
    first = Processes(tmp_path / "first")
    try:
        start_server(first, db, free_port())
        log = first.log("server")
        assert first.user_token.startswith("hwnas_u_") and first.user_token in log
        assert first.agent_token.startswith("hwnas_e_") and first.agent_token in log
    finally:
        first.stop_all(grace_s=30)
    # The same database again, by a new harness: nothing printed, so two are made.
    again = Processes(tmp_path / "again")
    port = free_port()
    try:
        start_server(again, db, port)
        assert "first start" not in again.log("server")
        assert again.user_token not in (None, first.user_token)
        assert again.agent_token not in (None, first.agent_token)
        for procs in (first, again):  # each works where its kind is needed
            with procs.client(loopback_url(port)) as client:
                created = client.post("/api/v1/searches", json=search_request())
                assert created.status_code == 201, created.text
            with api_client(loopback_url(port), procs.agent_token) as agent:
                register(agent)
    finally:
        again.stop_all(grace_s=30)


def test_waiting_for_nothing_times_out(tmp_path: Path) -> None:
    with pytest.raises(ServerDidNotStart, match="not healthy within 0.3 s"):
        wait_healthy(loopback_url(free_port()), timeout=0.3)


def test_the_synthetic_device_is_deterministic_and_grows_with_size() -> None:
    from archvocab.wire import MeasurementResult
    from hwnas.testing.measurements import synthetic_measurement

    small = {"n_layer": 2, "d_model": 64, "d_inner": [128, 128], "d_embed": 64}
    large = {"n_layer": 4, "d_model": 256, "d_inner": [1024] * 4, "d_embed": 256}
    assert synthetic_measurement(small) == synthetic_measurement(dict(small))
    assert synthetic_measurement(large)["latency_ms"] > synthetic_measurement(small)["latency_ms"]
    MeasurementResult.model_validate(synthetic_measurement(small, busy=True))
