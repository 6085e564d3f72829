"""`hwnas search start`'s flags, `wait`'s progress without a terminal and its stall line, and
one-line refusals (issue 19), against the real app in-process."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient

from archvocab.wire import Budget, MeasurementSettings, SearchCreate, SearchInfo
from hwnas import client as client_module
from hwnas import client_args, search_cli
from hwnas.cli import build_parser, main
from hwnas.client import Client, StallWatch
from hwnas.search_progress import ProgressLines, duration
from hwnas.search_request import request_body
from server.app.factory import create_app
from server.settings import Settings
from tests.factories import search_request


@pytest.fixture
def http(tmp_path):
    with TestClient(create_app(Settings(database_url=f"sqlite:///{tmp_path / 'c.db'}"))) as c:
        yield c


@pytest.fixture
def cli(http, monkeypatch):
    """`hwnas search ...` in-process, its Client on the app; (exit code, stdout, stderr)."""
    monkeypatch.setattr(search_cli, "Client", lambda server, token=None: Client(http=http))
    monkeypatch.setenv("COLUMNS", "40")  # a narrow terminal: nothing may wrap

    def run(capsys: Any, *args: str) -> tuple[int, str, str]:
        code = main(["search", *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def start_args(*flags: str) -> Any:
    return build_parser().parse_args(["search", "start", *flags])


def test_each_flag_sets_its_search_create_field():
    args = start_args(
        *("--device-class", "pi5", "--strategy", "hwnas", "--budget", "20", "--seed", "3"),
        *("--n-layer", "2-6", "--d-model", "128-512:128", "--d-inner", "512"),
        *("--seq-len", "32", "--runtime", "onnxruntime", "--max-latency-ms", "250"),
        *("--max-memory-mb", "512", "--min-decoder-params", "1M", "--max-decoder-params", "2.5e7"),
    )
    request = SearchCreate.model_validate(request_body(args))
    assert (request.device_class, request.strategy) == ("pi5", "hwnas")
    assert (request.budget.max_evaluations, request.seed) == (20, 3)
    assert request.space["n_layer"] == {"min": 2, "max": 6, "step": 1}
    assert request.space["d_model"] == {"min": 128, "max": 512, "step": 128}
    assert request.space["d_inner"]["min"] == request.space["d_inner"]["max"] == 512
    assert (request.measurement.seq_len, request.measurement.runtime) == (32, "onnxruntime")
    c = request.constraints
    assert (c.max_latency_ms, c.max_memory_mb) == (250, 512)
    assert (c.min_decoder_params, c.max_decoder_params) == (1_000_000, 25_000_000)


def test_flags_go_over_the_file_and_keep_what_it_sets_beside_them(tmp_path):
    request = tmp_path / "r.json"
    request.write_text('{"space": {"kind": "gpt2", "n_layer": {"min": 2, "max": 3}}, "seed": 1}')
    args = start_args("--file", str(request), "--space", '{"div_val": [1]}', "--n-layer", "4")
    body = request_body(args)
    space = {"kind": "gpt2", "n_layer": {"min": 4, "max": 4}, "div_val": [1]}
    assert body == {"space": space, "seed": 1}
    assert request_body(start_args()) == {}  # nothing given: the server's defaults


def test_the_cli_leaves_every_default_to_the_api():
    """One source of truth: SearchCreate. Flags not given send nothing; the values --help
    shows are SearchCreate's."""
    args = start_args()
    assert all(getattr(args, dest) is None for dest in ("strategy", "budget", "seed", "seq_len"))
    fields = SearchCreate.model_fields
    assert client_args.REQUEST_DEFAULTS == {
        "strategy": fields["strategy"].default,
        "budget": Budget.model_fields["max_evaluations"].default,
        "device_class": fields["device_class"].default,
        "seq_len": MeasurementSettings.model_fields["seq_len"].default,
    }
    assert client_args.STALL_S == client_module.STALL_S


@pytest.mark.parametrize("text", ["x", "2-", "2-6:", "a-b"])
def test_a_malformed_range_is_a_usage_error(text, capsys):
    with pytest.raises(SystemExit) as exited:
        start_args("--n-layer", text)
    assert exited.value.code == 2 and "a range is MIN-MAX" in capsys.readouterr().err


def test_a_refusal_is_one_line_however_long(cli, capsys):
    code, _, err = cli(capsys, "start", "--n-layer", "6-2", "--max-latency-ms", "250")
    assert code == 1
    assert err.count("\n") == 1 and len(err) > 40, err  # longer than the terminal, unwrapped
    assert err.startswith("hwnas search start: 422: space: ") and "n_layer.min" in err
    code, _, err = cli(capsys, "start", "--max-latency-ms", "-5")
    assert err == "hwnas search start: 422: constraints.max_latency_ms: " + err.split(": ", 3)[3]
    assert "greater than 0" in err and err.count("\n") == 1
    code, _, err = cli(capsys, "status", "999")
    assert (code, err) == (1, "hwnas search status: 404: search 999 not found\n")


def test_start_and_status_say_no_agent_of_the_class_ever_registered(cli, capsys):
    code, out, err = cli(capsys, "start", "--device-class", "pi5", "--budget", "2")
    assert code == 0 and out.startswith("search 1 started")
    [warning] = err.splitlines()
    assert warning.startswith("search 1: warning: no agent of device class 'pi5' has ever")
    assert warning.endswith("--device-class pi5`")
    code, out, _ = cli(capsys, "status", "1")
    assert "  no agent of device class 'pi5' has ever registered" in out.splitlines()[-1]


def test_wait_without_a_terminal_prints_lines_and_the_stall(cli, capsys, http):
    Client(http=http).start_search(
        search_request(device_class="pi5", budget={"max_evaluations": 2})
    )
    code, out, err = cli(
        capsys,
        *("wait", "1", "--poll-interval", "0.05", "--timeout", "0.5"),
        *("--stall-after", "0.1", "--progress-every", "0.2"),
    )
    assert code == 3 and out == ""
    lines = err.splitlines()
    assert lines[0].startswith("search 1: warning: no agent of device class 'pi5'")
    assert lines[1] == (
        "search 1 running: 0/2 done (0 measured, 0 of them reused; 0 failed), 0 running, "
        "2 queued, frontier 0; time left: unknown until a result arrives"
    )
    [stall] = [line for line in lines if "has not moved" in line]  # once per stall
    assert stall.startswith("search 1 has not moved for 0 s: no agent of device class 'pi5'")
    assert stall.endswith("hwnas agent --server http://testserver --device-class pi5`")
    assert lines.count(lines[1]) >= 2  # again every --progress-every while nothing moves
    assert lines[-1] == "hwnas search wait: search 1 still running after 0.5 s"


def test_client_wait_reports_a_stall_once_and_logs_it_by_default(http, caplog):
    hw = Client(http=http)
    search = hw.start_search(search_request(device_class="pi5"))
    stalls: list[float] = []
    with pytest.raises(TimeoutError):
        hw.wait(
            search.id,
            poll_s=0.01,
            timeout_s=0.3,
            stall_s=0.05,
            on_stall=lambda i, s: stalls.append(s),
        )
    assert len(stalls) == 1 and stalls[0] >= 0.05
    with caplog.at_level(logging.WARNING, logger="hwnas.client"), pytest.raises(TimeoutError):
        hw.wait(search.id, poll_s=0.01, timeout_s=0.2, stall_s=0)
    [record] = caplog.records
    assert f"search {search.id} has not moved for" in record.getMessage()
    assert "--device-class pi5" in record.getMessage()


def info_with(base: SearchInfo, **progress: int) -> SearchInfo:
    return base.model_copy(update={"progress": base.progress.model_copy(update=progress)})


def test_progress_lines_on_change_every_so_often_and_with_the_time_left(http):
    base = Client(http=http).start_search(search_request(budget={"max_evaluations": 10}))
    now = [0.0]
    written: list[str] = []
    lines = ProgressLines(written.append, every_s=60, clock=lambda: now[0])
    lines(base)
    now[0] = 30
    lines(base)  # nothing moved, not a minute yet: quiet
    assert len(written) == 1
    now[0] = 60
    lines(info_with(base, measured=2, reused=1, queued=8))  # 2 results in 60 s: 8 in 4 min
    assert written[-1].endswith("; 2.0 results/min, about 4 min left")
    assert "2/10 done (2 measured, 1 of them reused; 0 failed)" in written[-1]
    now[0] = 119
    lines(info_with(base, measured=2, reused=1, queued=8))
    assert len(written) == 2
    now[0] = 121
    lines(info_with(base, measured=2, reused=1, queued=8))  # a minute unchanged: again
    assert len(written) == 3


def test_a_stall_needs_both_no_move_and_no_able_agent(http):
    info = Client(http=http).start_search(search_request(device_class="pi5"))
    assert info.agents is not None and info.agents.waiting_for_agent
    watch = StallWatch(stall_s=10)
    assert watch.stalled(info, 0) is None and watch.stalled(info, 9) is None
    assert watch.stalled(info, 10) == 10 and watch.stalled(info, 50) is None  # told once
    moving = info_with(info, running=1, queued=info.progress.queued - 1)
    assert watch.stalled(moving, 51) is None and watch.stalled(moving, 61) == 10  # a new stall
    able = info.model_copy(
        update={"agents": info.agents.model_copy(update={"waiting_for_agent": None})}
    )
    assert StallWatch(0).stalled(able, 100) is None


def test_durations_read_as_people_say_them():
    assert [duration(s) for s in (40, 600, 3600 * 3 + 300)] == ["40 s", "10 min", "3 h 05 min"]
