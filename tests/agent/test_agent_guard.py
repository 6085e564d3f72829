"""The job guard: estimates from the spec alone, refusals before anything is built."""

from __future__ import annotations

import ast
import resource
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from agent.available import cgroup_headroom, cuda_free, meminfo_available, ram_available
from agent.cli import run
from agent.client import AgentClient
from agent.guard import MIB, SAFETY_FACTOR, Guard, Limits, estimate_job
from agent.hostinfo import Roots
from agent.lease import Backoff
from agent.measure import measure_candidate
from agent.worker import Worker
from archvocab import footprint
from archvocab.registry import kind_of_spec, parse_spec
from archvocab.wire import (
    AgentRegistration,
    DeviceFingerprint,
    Failure,
    MeasurementResult,
    MeasurementSettings,
    ProxyRequest,
)
from hwnas.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
LSTM_CELL = {
    "node_0": {"op": "linear", "input": ["x", "h_prev_0"]},
    "node_1": {"op": "activation_sigm", "input": ["node_0"]},
    "node_2": {"op": "linear", "input": ["x", "h_prev_0"]},
    "node_3": {"op": "activation_tanh", "input": ["node_2"]},
    "node_4": {"op": "elementwise_prod", "input": ["node_1", "node_3"]},
    "h_new_0": {"op": "activation_tanh", "input": ["node_4"]},
}


def gpt2(n: int, d: int, f: int, heads: int, **more: Any) -> dict[str, Any]:
    base = {"n_layer": n, "d_model": d, "d_inner": [f] * n, "n_head": [heads] * n, "d_embed": d}
    return {**base, **more}


def transxl(n: int, d: int, f: int, heads: int, **more: Any) -> dict[str, Any]:
    return {"kind": "transxl", **gpt2(n, d, f, heads), **more}


def flexibert(hidden: int, layers: list[tuple[str, Any, int, int, int]]) -> dict[str, Any]:
    fields = ("operation_type", "operation_parameter", "num_operation_heads")
    fields += ("feed_forward_dimension", "num_feed_forward")
    return {
        "kind": "flexibert",
        "hidden_size": hidden,
        "n_layer": len(layers),
        "layers": [dict(zip(fields, layer)) for layer in layers],
    }


def rnn(d_embed: int, d_hidden: int, n: int, **more: Any) -> dict[str, Any]:
    cell = {"kind": "nasbench_nlp", "cell": LSTM_CELL}
    return {**cell, "d_embed": d_embed, "d_hidden": d_hidden, "n_layer": n, **more}


# Small models of every kind and their layouts (clusters, projections, memory, operations).
SMALL_SPECS = {
    "gpt2": gpt2(2, 64, 128, 2, cutoffs=[200, 500], vocab_size=1000, n_positions=64),
    "gpt2-adaptive": gpt2(
        2, 64, 96, 4, d_embed=128, div_val=2, cutoffs=[200, 500], vocab_size=1000
    ),
    "transxl": transxl(2, 64, 128, 2, cutoffs=[200], vocab_size=1000, tgt_len=64, mem_len=16),
    "transxl-div": transxl(
        2, 64, 96, 4, d_embed=32, div_val=2, cutoffs=[500, 1500], vocab_size=3000, tgt_len=32
    ),
    "flexibert": flexibert(64, [("SA", "WMA", 4, 128, 2), ("LT", "DFT", 2, 64, 1)]),
    "flexibert-dsc": flexibert(96, [("DSC", 5, 3, 96, 1), ("LT", "DCT", 4, 64, 3)]),
    "nasbench_nlp": rnn(32, 48, 3, vocab_size=1000),
    "nasbench_nlp-untied": rnn(32, 48, 2, vocab_size=1000, tied=False),
}
# Models of every kind big enough (40-130 MB of weights) that their measured peaks are theirs,
# not the allocator's noise; measured with a second of protocol each.
MEASURED_SPECS = {
    "gpt2": (gpt2(4, 256, 1024, 4), {"batch_size": 2, "seq_len": 128}),
    "transxl": (
        transxl(2, 256, 1024, 4, vocab_size=60000, cutoffs=[20000, 40000]),
        {"batch_size": 2, "seq_len": 128},
    ),
    "flexibert": (flexibert(384, [("SA", "SDP", 6, 1536, 1), ("DSC", 9, 6, 1536, 2)] * 2), {}),
    "nasbench_nlp": (rnn(400, 600, 3), {"batch_size": 4}),
}
REGISTRATION = AgentRegistration(
    device_class="cpu-test",
    fingerprint=DeviceFingerprint(
        hostname="test",
        os="Linux",
        cpu_model="test cpu",
        machine="x86_64",
        cores=1,
        ram_bytes=2**30,
        torch_version="2",
    ),
)
# A GPT-2 that needs over a terabyte: 8 layers of d_model 65536 (4.1e11 parameters).
HUGE_SPEC = gpt2(8, 65536, 262144, 64)


def settings(**changes: Any) -> MeasurementSettings:
    fast = {"warmup_max_s": 0.5, "max_time_s": 0.5, "min_samples": 5, "min_time_s": 0.0}
    return MeasurementSettings(**{**fast, "seq_len": 16, "timeout_s": 120.0, **changes})


# -- the estimate ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", SMALL_SPECS)
def test_weights_are_the_built_models_and_the_estimate_covers_them(name: str) -> None:
    spec = parse_spec(SMALL_SPECS[name])
    model = kind_of_spec(spec).load_builder().build_model(spec)
    built = sum(p.numel() * p.element_size() for p in model.parameters())
    assert footprint.weight_bytes(spec) == built
    need = estimate_job(spec, settings()).peak
    assert need.weight_bytes == built and need.activation_bytes > 0
    assert need.bytes >= SAFETY_FACTOR * built + need.reserve_bytes


@pytest.mark.parametrize("output", ["all", "last"])
@pytest.mark.parametrize("name", MEASURED_SPECS)
def test_the_estimate_covers_the_measured_peak_within_a_sane_factor(name: str, output: str) -> None:
    spec, changes = MEASURED_SPECS[name]
    job = settings(**changes, output=output)
    result = measure_candidate(spec, job)
    assert isinstance(result, MeasurementResult), result
    need = estimate_job(parse_spec(spec), job).peak
    peak = result.memory.process_peak_mb * MIB
    tensors = need.bytes - need.reserve_bytes
    assert need.weight_bytes == result.memory.weights_mb * MIB
    assert peak <= tensors, f"measured {peak / MIB:.0f} MiB over {need.describe()}"
    assert tensors <= 2.5 * peak, f"measured {peak / MIB:.0f} MiB; {need.describe()}"


def test_activations_are_linear_in_the_tokens_but_for_a_weight_copy() -> None:
    plain = parse_spec({**SMALL_SPECS["gpt2"], "cutoffs": []})
    assert footprint.activation_bytes(plain, 8, 64) == 32 * footprint.activation_bytes(plain, 1, 16)
    adaptive = parse_spec(SMALL_SPECS["gpt2"])
    copy = (200 + 2) * 64 * 4  # the head cluster's weight and 2 cluster rows, per forward
    small, big = (footprint.activation_bytes(adaptive, *shape) for shape in ((1, 16), (8, 64)))
    assert big - copy == 32 * (small - copy)


def test_onnxruntime_and_proxies_are_separate_processes_on_the_cpu() -> None:
    spec = parse_spec(SMALL_SPECS["gpt2"])
    weights = footprint.weight_bytes(spec)
    torch_only = estimate_job(spec, settings())
    assert [(s.step, s.device, s.weight_copies) for s in torch_only.steps] == [("torch", "cpu", 1)]
    cuda = estimate_job(spec, settings(device="cuda")).steps[0]
    assert cuda.device == "cuda" and cuda.reserve_bytes > torch_only.steps[0].reserve_bytes
    both = estimate_job(spec, settings(runtime="onnxruntime"), ProxyRequest(names=["snip"]))
    assert [(s.step, s.device) for s in both.steps] == [("onnxruntime", "cpu"), ("proxies", "cpu")]
    assert all(s.weight_bytes == weights and s.weight_copies > 1 for s in both.steps)
    assert both.params == spec.total_params()


# -- refusals ----------------------------------------------------------------------------------
def test_max_params_refuses_with_the_count_the_limit_and_the_flag(tiny_spec: dict) -> None:
    params = parse_spec(tiny_spec).total_params()
    assert Guard(Limits(max_params=params), check_device=False).check(tiny_spec, settings()) is None
    failure = Guard(Limits(max_params=params - 1)).check(tiny_spec, settings())
    assert failure == Failure(kind="refused", message=failure.message)
    assert f"{params:,} parameters" in failure.message
    assert f"limit of {params - 1:,}" in failure.message and "--max-params" in failure.message


def test_max_memory_refuses_with_the_estimate_the_limit_and_the_flag(tiny_spec: dict) -> None:
    need = estimate_job(parse_spec(tiny_spec), settings()).peak
    roomy = Guard(Limits(max_memory_bytes=need.bytes), check_device=False)
    assert roomy.check(tiny_spec, settings()) is None
    failure = Guard(Limits(max_memory_bytes=need.bytes - 1)).check(tiny_spec, settings())
    assert failure is not None and failure.kind == "refused"
    assert failure.message.startswith("refused before building: torch on cpu needs an estimated")
    assert (
        f"{need.bytes / MIB:,.0f} MiB" in failure.message and "--max-memory-mb" in failure.message
    )
    assert "float32 weights" in failure.message and "batch 1 x seq 16" in failure.message


def test_device_memory_refuses_what_would_not_fit(tiny_spec: dict) -> None:
    asked: list[str] = []

    def free(device: str) -> int | None:
        asked.append(device)
        return 10 * MIB

    failure = Guard(available=free).check(tiny_spec, settings(device="cuda"))
    assert asked == ["cuda"] and failure is not None and failure.kind == "refused"
    assert "torch on cuda needs an estimated" in failure.message
    assert "more than the 10 MiB free on cuda" in failure.message
    assert "--no-device-memory-check" in failure.message
    assert Guard(check_device=False, available=free).check(tiny_spec, settings()) is None
    assert Guard(available=lambda device: None).check(tiny_spec, settings()) is None
    assert Guard(available=lambda device: 2**40).check(tiny_spec, settings()) is None


def test_a_proxies_process_is_checked_against_the_cpu(tiny_spec: dict) -> None:
    job = settings(device="cuda")
    proxies = ProxyRequest(names=["snip"])
    need = estimate_job(parse_spec(tiny_spec), job, proxies).steps[1].bytes
    room = {"cuda": 2**40, "cpu": need - 1}
    failure = Guard(available=room.get).check(tiny_spec, job, proxies)
    assert failure is not None and "proxies on cpu needs" in failure.message
    assert Guard(available=room.get).check(tiny_spec, job) is None


def test_an_invalid_spec_is_an_invalid_spec_not_a_refusal(tiny_spec: dict) -> None:
    failure = Guard(Limits(max_params=1)).check({**tiny_spec, "n_head": [3, 2]}, settings())
    assert failure is not None and failure.kind == "invalid_spec" and "n_head" in failure.message


@pytest.mark.skipif(not Path("/proc/meminfo").exists(), reason="reads Linux's /proc/meminfo")
def test_the_real_free_memory_is_read() -> None:
    meminfo, available = meminfo_available(), ram_available()
    assert meminfo is not None and available is not None and 0 < available <= meminfo


def test_a_cgroup_limit_caps_the_free_memory(tmp_path: Path) -> None:
    proc, sys_root = tmp_path / "proc", tmp_path / "sys"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text("MemTotal: 67108864 kB\nMemAvailable: 33554432 kB\n")
    (proc / "self/cgroup").write_text("0::/agents/a1\n")
    group = sys_root / "fs/cgroup/agents/a1"
    group.mkdir(parents=True)
    (group / "memory.max").write_text(f"{4 * 2**30}\n")
    (group / "memory.current").write_text(f"{3 * 2**30}\n")
    (group / "memory.stat").write_text(f"anon 1\ninactive_file {2**30}\n")
    (sys_root / "fs/cgroup/agents/memory.max").write_text("max\n")
    roots = Roots(proc=proc, sys=sys_root)
    assert meminfo_available(roots) == 32 * 2**30
    assert cgroup_headroom(roots) == 2 * 2**30  # 4 GiB limit - (3 GiB used - 1 GiB cache)
    assert ram_available(roots) == 2 * 2**30
    (proc / "self/cgroup").write_text("4:memory:/agents/a1\n")  # cgroup v1
    v1 = sys_root / "fs/cgroup/memory/agents/a1"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # no limit
    (v1 / "memory.usage_in_bytes").write_text("5\n")
    assert cgroup_headroom(roots) is None and ram_available(roots) == 32 * 2**30


def test_no_nvml_means_unknown_cuda_memory() -> None:
    assert cuda_free("libnvidia-ml-not-here.so") is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_nvml_reads_what_cuda_reports_free() -> None:
    free_nvml = cuda_free()
    free_cuda, _ = torch.cuda.mem_get_info()
    assert free_nvml is not None and abs(free_nvml - free_cuda) < 1024 * MIB


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_cuda_estimate_covers_the_measured_allocations() -> None:
    spec, changes = MEASURED_SPECS["gpt2"]
    job = settings(device="cuda", **changes)
    result = measure_candidate(spec, job)
    assert isinstance(result, MeasurementResult), result
    need = estimate_job(parse_spec(spec), job).peak
    assert (result.memory.cuda_reserved_peak_mb or 0) * MIB <= need.bytes - need.reserve_bytes


# -- the worker and the CLI --------------------------------------------------------------------
@pytest.mark.skipif(ram_available() is None, reason="needs to know this machine's free memory")
def test_a_huge_spec_is_refused_quickly_without_building(live_server: Any) -> None:
    state = live_server.state
    huge = state.add_job(HUGE_SPEC, settings().model_dump())
    small = state.add_job(SMALL_SPECS["gpt2"], settings().model_dump())
    measured: list[dict[str, Any]] = []

    def measure(spec: dict[str, Any], job: MeasurementSettings, **kw: Any) -> Any:
        measured.append(spec)
        return measure_candidate(spec, job, **kw)

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    with httpx.Client(base_url=live_server.url, timeout=10) as http:
        worker = Worker(
            AgentClient(http),
            REGISTRATION,
            poll_interval=0.05,
            backoff=Backoff(initial=0.01, factor=2, cap=0.05),
            max_jobs=1,
            measure=measure,
        )
        assert worker.run() == 0  # the real guard, the real free memory of this machine
    assert time.monotonic() - started < 5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 100 * 1024  # KiB
    failure = state.results[huge].failure
    assert failure is not None and failure.kind == "refused", state.results[huge]
    assert "torch on cpu needs an estimated" in failure.message and "free on cpu" in failure.message
    assert measured == [] and (worker.jobs_refused, worker.failures_reported) == (1, 1)
    assert [job["job_id"] for job in state.queue] == [small]


def test_hwnas_agent_max_params_refuses_before_building(
    live_server: Any, tiny_spec: dict[str, Any]
) -> None:
    state = live_server.state
    job = state.add_job(tiny_spec)
    argv = ["agent", "--server", live_server.url, "--device-class", "cpu-test", "--once"]
    args = build_parser().parse_args([*argv, "--max-params", "1e4", "--max-memory-mb", "4096"])
    assert run(args) == 0
    failure = state.results[job].failure
    assert failure is not None and failure.kind == "refused"
    assert "limit of 10,000" in failure.message and "--max-params" in failure.message


@pytest.mark.parametrize("flag", ["--max-params", "--max-memory-mb"])
@pytest.mark.parametrize("value", ["0", "nan", "inf"])
def test_bad_limits_are_usage_errors(live_server: Any, capsys: Any, flag: str, value: str) -> None:
    args = build_parser().parse_args(
        ["agent", "--server", live_server.url, "--device-class", "x", flag, value]
    )
    assert run(args) == 2
    assert f"{flag} must be a finite number >= 1" in capsys.readouterr().err
    assert live_server.state.registrations == []


# -- nothing the server sends is run -----------------------------------------------------------
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_MODULES = {"pickle", "marshal", "shelve", "dill", "cloudpickle", "yaml", "joblib"}
FORBIDDEN_ATTRIBUTES = {"torch.load", "torch.jit", "torch.package", "torch.hub"}
# import_module calls, each with a name from a fixed table of ours.
ALLOWED_IMPORT_MODULE = {
    "archvocab/registry.py": 2,  # _KIND_MODULES[name], a SpaceKind's builder constant
    "agent/export.py": 1,  # _EXPORT_MODULES, ("torch", "onnx", "onnxscript")
}


def test_agent_and_vocabulary_never_run_code_they_receive() -> None:
    found: list[str] = []
    import_module_calls: dict[str, int] = {}
    for package in ("agent", "archvocab"):
        for path in sorted((REPO / package).rglob("*.py")):
            where = str(path.relative_to(REPO))
            for node in ast.walk(ast.parse(path.read_text(), where)):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                    names.append(getattr(node, "module", None) or "")
                    found += [f"{where}: imports {n}" for n in names if n in FORBIDDEN_MODULES]
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    if node.func.id in FORBIDDEN_CALLS:
                        found.append(f"{where}:{node.lineno}: {node.func.id}()")
                if isinstance(node, ast.Attribute):
                    if ast.unparse(node) in FORBIDDEN_ATTRIBUTES:
                        found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
                    if node.attr == "import_module":
                        import_module_calls[where] = import_module_calls.get(where, 0) + 1
                if isinstance(node, ast.keyword) and node.arg == "allow_pickle":
                    found.append(f"{where}: allow_pickle")
    assert found == []
    assert import_module_calls == ALLOWED_IMPORT_MODULE
