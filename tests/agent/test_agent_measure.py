"""Measuring candidates: in process, through the child protocol, and in fresh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from agent import memory
from agent.child import FAULT_ENV, run_job
from agent.failures import classify_exception
from agent.in_process import measure_spec, parameter_bytes, primer_spec
from agent.measure import MeasurementCancelled, measure_candidate
from agent.weights import build_fast
from archvocab.errors import InvalidSpec
from archvocab.registry import parse_spec
from archvocab.wire import Failure, MeasurementResult, MeasurementSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
BIG_SPEC_CHANGES: dict[str, Any] = {
    "n_layer": 4,
    "d_model": 512,
    "d_inner": [2048] * 4,
    "n_head": [8] * 4,
    "d_embed": 512,
    "vocab_size": 10000,
}


def check_sane(result: MeasurementResult, settings: MeasurementSettings) -> None:
    lat = result.latency
    assert lat.samples == len(lat.samples_ms) >= settings.min_samples
    assert result.latency_ms == lat.median_ms
    assert lat.min_ms <= lat.median_ms <= lat.p90_ms <= max(lat.samples_ms)
    assert lat.ci_low_ms <= lat.median_ms <= lat.ci_high_ms
    assert 0 <= lat.iqr_ms <= max(lat.samples_ms) - lat.min_ms
    assert all(s > 0 for s in lat.samples_ms)
    assert lat.inner_repeats >= 1 and lat.confidence == settings.confidence
    assert lat.warmup_runs >= settings.warmup
    assert result.build_s > 0 and result.load_s == 0
    assert result.total_s >= result.build_s + lat.warmup_s + lat.timed_s
    mem = result.memory
    assert mem.weights_mb > 0 and mem.process_baseline_mb > 0
    assert result.peak_memory_mb == getattr(mem, f"{mem.primary}_mb")
    prov = result.provenance
    assert prov.runtime == "torch" and prov.runtime_version == torch.__version__
    assert prov.torch_version == torch.__version__ and prov.torch_build
    assert prov.threads == settings.threads and prov.interop_threads
    assert prov.cpu_model and prov.hostname and prov.python_version
    assert isinstance(prov.busy_reasons, list) and prov.busy == bool(prov.busy_reasons)
    if sys.platform.startswith("linux"):
        assert prov.cpu_affinity and len(prov.load_avg_before) == 3
        assert prov.cpu_share is not None and prov.cpu_share > 0
    details = result.details
    assert details["seq_len"] == settings.seq_len and details["batch_size"] == settings.batch_size
    assert details["n_parameters"] > 0 and details["input_seed"] == 0


# -- pure helpers -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (InvalidSpec("d_model", "must be a positive integer"), "invalid_spec"),
        (MemoryError(), "out_of_memory"),
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "out_of_memory"),
        (
            RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate"),
            "out_of_memory",
        ),
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), "error"),
        (KeyError("settings"), "error"),
    ],
)
def test_classify_exception(exc: BaseException, kind: str) -> None:
    failure = classify_exception(exc)
    assert failure.kind == kind
    assert type(exc).__name__ in failure.message


def test_read_status_kib_parses_proc_status(tmp_path: Any) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmHWM:\t  223820 kB\nVmRSS:\t  1024 kB\n")
    assert memory.read_status_kib("VmHWM", status) == 223820
    assert memory.read_status_kib("VmRSS", status) == 1024
    assert memory.read_status_kib("VmSwap", status) is None
    assert memory.read_status_kib("VmRSS", tmp_path / "missing") is None


def test_parameter_bytes_counts_tied_weights_once(tiny_spec: dict[str, Any]) -> None:
    model = build_fast(parse_spec(tiny_spec), torch.device("cpu"))
    assert model.head.embedding is model.embed  # the output layer reuses the input table
    distinct = {id(p): p.numel() for m in model.modules() for p in m.parameters(recurse=False)}
    assert parameter_bytes(model) == 4 * sum(distinct.values())


@pytest.mark.parametrize(
    "changes",
    [{}, {"cutoffs": [200, 500], "div_val": 4, "d_embed": 64}, {"d_embed": 32}],
)
def test_primer_takes_the_candidates_code_paths(
    tiny_spec: dict[str, Any], changes: dict[str, Any]
) -> None:
    spec = parse_spec({**tiny_spec, **changes})
    primer = primer_spec(spec, seq_len=16)
    assert (primer.n_layer, primer.d_model, primer.n_positions) == (1, 64, 16)
    assert bool(primer.cutoffs) == bool(spec.cutoffs)
    assert (primer.d_embed == primer.d_model) == (spec.d_embed == spec.d_model)
    assert (primer.div_val > 1) == (spec.div_val > 1)


# -- in process -------------------------------------------------------------------------------
def test_measure_spec_in_process_gives_sane_numbers(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings
) -> None:
    result = measure_spec(parse_spec(tiny_spec), fast_settings)
    check_sane(result, fast_settings)
    assert result.details["device"] == "cpu"
    assert result.memory.primary == "process_peak" and result.memory.cuda_allocated_peak_mb is None


def test_child_protocol_in_process(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings
) -> None:
    outcome = run_job({"spec": tiny_spec, "settings": fast_settings.model_dump()})
    check_sane(MeasurementResult.model_validate(outcome["measurement"]), fast_settings)
    bad = run_job({"spec": {**tiny_spec, "n_head": [3, 2]}, "settings": fast_settings.model_dump()})
    assert bad["failure"]["kind"] == "invalid_spec"
    assert "n_head" in bad["failure"]["message"]
    odd = run_job({"step": "compile", "spec": tiny_spec, "settings": fast_settings.model_dump()})
    assert (
        odd["failure"]["kind"] == "error" and "unknown step 'compile'" in odd["failure"]["message"]
    )


# -- in fresh processes -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_and_big(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings
) -> tuple[MeasurementResult | Failure, MeasurementResult | Failure]:
    tiny = measure_candidate(tiny_spec, fast_settings)
    big = measure_candidate({**tiny_spec, **BIG_SPEC_CHANGES}, fast_settings)
    return tiny, big


def test_child_measurement_is_sane(
    tiny_and_big: tuple[Any, Any], fast_settings: MeasurementSettings
) -> None:
    tiny, _ = tiny_and_big
    assert isinstance(tiny, MeasurementResult), tiny
    check_sane(tiny, fast_settings)
    assert tiny.memory.process_method.startswith(("rss_hwm", "ru_maxrss"))
    assert tiny.details["process_start_s"] >= 0


def test_each_candidate_gets_a_fresh_process(tiny_and_big: tuple[Any, Any]) -> None:
    tiny, big = tiny_and_big
    pids = {tiny.details["pid"], big.details["pid"]}
    assert len(pids) == 2 and os.getpid() not in pids


@pytest.mark.skipif(not memory.read_status_kib("VmHWM"), reason="needs /proc/self/status (Linux)")
def test_tiny_model_peak_is_its_own_weights_and_activations(tiny_and_big: tuple[Any, Any]) -> None:
    # Before the throwaway primer forward, every model read ~13 MB more: torch's one-off
    # initialisation. The tiny model's weights are 0.5 MB; its activations are smaller still.
    tiny, _ = tiny_and_big
    assert tiny.memory.weights_mb <= tiny.memory.process_peak_mb < 5


def test_bigger_model_uses_more_memory(tiny_and_big: tuple[Any, Any]) -> None:
    tiny, big = tiny_and_big
    assert isinstance(big, MeasurementResult), big
    assert big.memory.weights_mb > 50 * tiny.memory.weights_mb
    # the high-water mark must at least hold the weights, and dwarf the tiny model's
    assert big.peak_memory_mb >= big.memory.weights_mb
    assert big.peak_memory_mb > tiny.peak_memory_mb + 40


def test_the_agent_process_never_imports_torch(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings
) -> None:
    code = (
        "import json, sys\n"
        "from agent.measure import measure_candidate\n"
        "from archvocab.wire import MeasurementSettings\n"
        "if __name__ == '__main__':\n"
        "    job = json.loads(sys.stdin.read())\n"
        "    settings = MeasurementSettings.model_validate(job['settings'])\n"
        "    result = measure_candidate(job['spec'], settings)\n"
        "    print(type(result).__name__, 'torch' in sys.modules, 'numpy' in sys.modules)\n"
    )
    job = {"spec": tiny_spec, "settings": fast_settings.model_dump()}
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split() == ["MeasurementResult", "False", "False"], done.stderr


def test_the_main_script_is_imported_once_not_per_candidate(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings, tmp_path: Any
) -> None:
    # multiprocessing runs the main script again in every child that lacks it; a script that
    # imports scipy made that 0.5 s per candidate. It must run once, in the forkserver.
    imports = tmp_path / "imports.log"
    script = tmp_path / "main_script.py"
    # A module beside the script, as a user's measuring script may import one: the forkserver
    # must find it too (CPython 3.11's does not get the parent's sys.path).
    (tmp_path / "beside_the_script.py").write_text("VALUE = 1\n")
    script.write_text(
        "import json, os, sys\n"
        "import beside_the_script\n"
        f"with open({str(imports)!r}, 'a') as log:\n"
        "    log.write(f'{__name__} {os.getpid()}\\n')\n"
        "from agent.measure import measure_candidate\n"
        "from archvocab.wire import MeasurementSettings\n"
        "if __name__ == '__main__':\n"
        "    job = json.loads(sys.stdin.read())\n"
        "    settings = MeasurementSettings.model_validate(job['settings'])\n"
        "    for _ in range(3):\n"
        "        print(type(measure_candidate(job['spec'], settings)).__name__)\n"
    )
    job = {"spec": tiny_spec, "settings": fast_settings.model_dump()}
    done = subprocess.run(
        [sys.executable, str(script)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert done.stdout.split() == ["MeasurementResult"] * 3, done.stderr
    names = [line.split()[0] for line in imports.read_text().splitlines()]
    assert names == ["__main__", "__mp_main__"], names


def test_invalid_spec_is_rejected_before_spawning(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a child would hang: a quick answer proves none was started
    monkeypatch.setenv(FAULT_ENV, "hang")
    started = time.monotonic()
    failure = measure_candidate({**tiny_spec, "n_head": [3, 2]}, fast_settings)
    assert failure == Failure(kind="invalid_spec", message=failure.message)
    assert "n_head" in failure.message and "divide d_model=64" in failure.message
    unknown = measure_candidate({**tiny_spec, "activation": "relu"}, fast_settings)
    assert unknown.kind == "invalid_spec" and "activation" in unknown.message
    too_long = measure_candidate(tiny_spec, fast_settings.model_copy(update={"seq_len": 65}))
    assert too_long.kind == "invalid_spec" and "settings.seq_len" in too_long.message
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    ("fault", "kind", "text"),
    [
        ("oom", "out_of_memory", "MemoryError"),
        ("oom_kill", "out_of_memory", "SIGKILL"),
        ("crash", "error", "status 70"),
        ("error", "error", "RuntimeError: injected"),
    ],
)
def test_child_faults_become_typed_failures(
    fault: str,
    kind: str,
    text: str,
    tiny_spec: dict[str, Any],
    fast_settings: MeasurementSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(FAULT_ENV, fault)
    failure = measure_candidate(tiny_spec, fast_settings)
    assert isinstance(failure, Failure)
    assert failure.kind == kind
    assert text in failure.message


def test_fault_set_after_the_forkserver_started_still_applies(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # forked children see the forkserver's environment, so the agent sends the fault along
    assert isinstance(measure_candidate(tiny_spec, fast_settings), MeasurementResult)
    monkeypatch.setenv(FAULT_ENV, "error")
    failure = measure_candidate(tiny_spec, fast_settings)
    assert isinstance(failure, Failure) and "injected" in failure.message
    monkeypatch.delenv(FAULT_ENV)
    assert isinstance(measure_candidate(tiny_spec, fast_settings), MeasurementResult)


def test_hanging_child_is_killed_at_the_timeout(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAULT_ENV, "hang")
    settings = fast_settings.model_copy(update={"timeout_s": 1.5})
    started = time.monotonic()
    failure = measure_candidate(tiny_spec, settings)
    elapsed = time.monotonic() - started
    assert failure == Failure(kind="timeout", message="no result within timeout_s=1.5; killed")
    assert 1.5 <= elapsed < 5


def test_cancel_kills_the_child(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAULT_ENV, "hang")
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(MeasurementCancelled):
        measure_candidate(tiny_spec, fast_settings, cancel=cancel)
    assert time.monotonic() - started < 3


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_measurement(tiny_spec: dict[str, Any], fast_settings: MeasurementSettings) -> None:
    settings = fast_settings.model_copy(update={"device": "cuda"})
    result = measure_candidate(tiny_spec, settings)
    assert isinstance(result, MeasurementResult), result
    check_sane(result, settings)
    mem = result.memory
    assert mem.primary == "cuda_allocated_peak"
    assert result.peak_memory_mb == mem.cuda_allocated_peak_mb >= mem.weights_mb
    assert mem.cuda_reserved_peak_mb is not None and mem.cuda_reserved_peak_mb >= 0
    assert result.provenance.accelerator == torch.cuda.get_device_name(0)
    assert result.provenance.cuda_version == torch.version.cuda


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_cuda_job_without_cuda_is_an_error(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings
) -> None:
    outcome = run_job(
        {"spec": tiny_spec, "settings": {**fast_settings.model_dump(), "device": "cuda"}}
    )
    assert outcome["failure"]["kind"] == "error"
    assert "no usable CUDA device" in outcome["failure"]["message"]


def test_a_lost_forkserver_socket_is_recovered(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings
) -> None:
    # a tmp cleaner deleting the server's socket file must not fail every later job
    from multiprocessing import forkserver

    assert isinstance(measure_candidate(tiny_spec, fast_settings), MeasurementResult)
    address = forkserver._forkserver._forkserver_address
    if not isinstance(address, str) or not os.path.exists(address):
        pytest.skip("the forkserver listens on an abstract socket here")
    os.unlink(address)
    assert isinstance(measure_candidate(tiny_spec, fast_settings), MeasurementResult)


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process (Linux /proc)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                table[int(entry)] = (int(fields[1]), fields[0])
            except (OSError, ValueError, IndexError):
                continue
    return table


def grandchildren(pid: int) -> set[int]:
    """The agent's forkserver forks the measuring processes: two levels down."""
    table = process_table()
    children = {p for p, (parent, _) in table.items() if parent == pid}
    return {p for p, (parent, _) in table.items() if parent in children}


def running(pids: set[int]) -> set[int]:
    table = process_table()
    return {p for p in pids if p in table and table[p][1] != "Z"}  # zombies have exited


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_measuring_processes_die_with_the_agent(
    tiny_spec: dict[str, Any], fast_settings: MeasurementSettings
) -> None:
    code = (
        "import json, sys\n"
        "from agent.measure import measure_candidate\n"
        "from archvocab.wire import MeasurementSettings\n"
        "if __name__ == '__main__':\n"
        "    job = json.loads(sys.argv[1])\n"
        "    measure_candidate(job['spec'], MeasurementSettings.model_validate(job['settings']))\n"
    )
    job = {"spec": tiny_spec, "settings": fast_settings.model_dump()}
    env = {**os.environ, FAULT_ENV: "hang"}
    agent = subprocess.Popen([sys.executable, "-c", code, json.dumps(job)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not (measuring := grandchildren(agent.pid)):
            assert time.monotonic() < deadline, "no measuring process appeared"
            time.sleep(0.1)
    finally:
        agent.kill()  # as the OOM killer or a crash would
        agent.wait()
    deadline = time.monotonic() + 10  # the watchdog looks once a second
    while running(measuring):
        assert time.monotonic() < deadline, f"left running: {running(measuring)}"
        time.sleep(0.1)
