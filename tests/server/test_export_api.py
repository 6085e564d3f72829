"""GET /api/v1/architectures/{arch_id}/export: json, a runnable PyTorch file, a cached ONNX file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from archvocab.registry import parse_spec
from server.app.factory import create_app
from server.services import export
from server.settings import Settings
from server.store.rows import ArchitectureRow
from tests.factories import TINY_SPACES, play_agent, register, search_request

EXPORT = "/api/v1/architectures/{}/export"

# Loads each exported file as a user would, in a fresh interpreter: build, count, one forward
# pass. (tests/archvocab/test_standalone.py runs the files where only torch is installed.)
DRIVER = r"""
import json, runpy, sys
import torch
from archvocab.registry import parse_spec

report = {}
for name in sys.argv[1:]:
    before = set(sys.modules)
    ns = runpy.run_path(name)
    model = ns["build_model"](seed=0)
    with torch.no_grad():
        out = model(*ns["example_inputs"](2, 8))
    report[name] = {
        "imports_ours": [m for m in set(sys.modules) - before
                         if m.split(".")[0] in ("archvocab", "hwnas", "agent", "server")],
        "arch_id": ns["ARCH_ID"],
        "reparsed_id": parse_spec(ns["SPEC"]).arch_id,
        "params": sum(p.numel() for p in model.parameters()),
        "declared_params": ns["TOTAL_PARAMS"],
        "shapes": [list(t.shape) for t in (out if isinstance(out, tuple) else (out,))],
    }
print(json.dumps(report))
"""

# An interpreter without torch, as far as agent.export can tell: it runs the real module.
NO_TORCH = """#!{python}
import runpy, sys
sys.modules["torch"] = None  # `import torch` now fails as it does where torch is missing
module, sys.argv = sys.argv[2], [sys.argv[2], *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def frontier_arch(client: TestClient) -> tuple[int, dict[str, Any]]:
    """A measured search's id and one point of its Pareto frontier."""
    search_id = client.post("/api/v1/searches", json=search_request()).json()["id"]
    play_agent(client, register(client))
    pareto = client.get(f"/api/v1/searches/{search_id}/pareto").json()
    assert pareto
    return search_id, pareto[0]


def proposed_arch(client: TestClient, kind: str) -> str:
    """The id of an architecture a fresh (unmeasured) search of `kind` proposed."""
    body = search_request(space=TINY_SPACES[kind], device_class=f"{kind}-cpu")
    search_id = client.post("/api/v1/searches", json=body).json()["id"]
    return client.get(f"/api/v1/searches/{search_id}/candidates").json()[0]["arch_id"]


def proposers(client: TestClient, search_ids: list[int], arch_id: str) -> list[int]:
    return [
        s
        for s in search_ids
        if any(
            c["arch_id"] == arch_id for c in client.get(f"/api/v1/searches/{s}/candidates").json()
        )
    ]


def test_json_has_the_spec_counts_and_every_search_that_proposed_it(client):
    first, point = frontier_arch(client)
    second = client.post("/api/v1/searches", json=search_request(name="again")).json()["id"]
    arch_id = point["arch_id"]

    response = client.get(EXPORT.format(arch_id))

    assert response.status_code == 200, response.text
    body = response.json()
    spec = parse_spec(point["spec"])
    assert body == {
        "arch_id": arch_id,
        "kind": "gpt2",
        "spec": point["spec"],
        "decoder_params": spec.decoder_params(),
        "total_params": spec.total_params(),
        "searches": proposers(client, [first, second], arch_id),
    }
    assert body["searches"][0] == first
    # The same seed and space propose the same first generation: some id has both searches.
    shared = client.get(f"/api/v1/searches/{second}/candidates").json()[0]["arch_id"]
    assert client.get(EXPORT.format(shared)).json()["searches"] == [first, second]


def test_an_unknown_architecture_is_404_naming_the_resource(client):
    response = client.get(EXPORT.format("0123456789abcdef"), params={"format": "torch"})
    assert response.status_code == 404
    assert response.json()["resource"] == "architecture"
    assert "0123456789abcdef" in response.json()["detail"]


@pytest.mark.parametrize("arch_id", ["a" * 33, "not-hex", "ABCDEF"])
def test_a_malformed_id_is_422_naming_the_field(client, arch_id):
    response = client.get(EXPORT.format(arch_id))
    assert response.status_code == 422
    assert response.json()["message"].startswith("path.arch_id:")


@pytest.mark.parametrize(
    ("params", "field", "says"),
    [
        ({"format": "pdf"}, "format", "'json', 'torch' or 'onnx'"),
        ({"format": "onnx", "seq_len": 4097}, "seq_len", "less than or equal to 4096"),
        ({"format": "onnx", "batch_size": 0}, "batch_size", "greater than or equal to 1"),
    ],
)
def test_bad_query_parameters_are_422_naming_the_allowed_values(client, params, field, says):
    _, point = frontier_arch(client)
    response = client.get(EXPORT.format(point["arch_id"]), params=params)
    assert response.status_code == 422
    assert response.json()["message"].startswith(f"query.{field}:")
    assert says in response.json()["message"]


def test_an_onnx_input_longer_than_the_model_takes_is_refused(client):
    _, point = frontier_arch(client)  # TINY_SPACE: n_positions 64
    response = client.get(EXPORT.format(point["arch_id"]), params={"format": "onnx", "seq_len": 65})
    assert response.status_code == 422
    assert response.json()["field"] == "seq_len"
    assert "longest input, 64" in response.json()["detail"]


def test_onnx_weights_over_one_file_are_refused_pointing_at_the_torch_file(client):
    big = {"kind": "gpt2", "n_layer": 24, "d_model": 2048, "d_inner": [8192] * 24}
    big.update(n_head=[16] * 24, d_embed=2048, div_val=1, cutoffs=[], vocab_size=50257)
    spec = parse_spec(big)
    with client.app.state.store.write() as session:
        session.add(
            ArchitectureRow(
                arch_id=spec.arch_id,
                spec=spec.to_dict(),
                decoder_params=spec.decoder_params(),
                total_params=spec.total_params(),
            )
        )
    response = client.get(EXPORT.format(spec.arch_id), params={"format": "onnx"})
    assert response.status_code == 422
    assert response.json()["field"] == "format"
    assert "take format=torch" in response.json()["detail"]


def test_the_server_mirrors_the_exporters_limits_and_exit_statuses():
    pytest.importorskip("numpy")
    from agent import export as agent_export
    from agent.onnx_backend import EMBEDDED_WEIGHTS_LIMIT

    assert export.SINGLE_FILE_WEIGHTS_LIMIT == EMBEDDED_WEIGHTS_LIMIT
    assert export.EXIT_MISSING_MODULE == agent_export.EXIT_MISSING_MODULE
    assert export.EXIT_TOO_LARGE == agent_export.EXIT_TOO_LARGE


@pytest.mark.slow
def test_the_torch_file_builds_counts_and_runs(client, tmp_path):
    pytest.importorskip("torch", reason="running the exported file needs torch")
    _, point = frontier_arch(client)
    arch_ids = [
        point["arch_id"],
        *(proposed_arch(client, k) for k in ("flexibert", "nasbench_nlp")),
    ]
    files, expected = [], {}
    for arch_id in arch_ids:
        response = client.get(EXPORT.format(arch_id), params={"format": "torch"})
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/x-python")
        disposition = f'attachment; filename="hwnas-{arch_id}.py"'
        assert response.headers["content-disposition"] == disposition
        assert "needs PyTorch only (`pip install torch`)" in response.text
        assert "hwnas[" not in response.text
        (tmp_path / f"hwnas-{arch_id}.py").write_text(response.text)
        files.append(f"hwnas-{arch_id}.py")
        expected[files[-1]] = client.get(EXPORT.format(arch_id)).json()

    ran = subprocess.run(
        [sys.executable, "-c", DRIVER, *files], capture_output=True, text=True, cwd=tmp_path
    )

    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout.strip().splitlines()[-1])
    for name, info in expected.items():
        got = report[name]
        assert got["arch_id"] == got["reparsed_id"] == info["arch_id"]
        assert got["params"] == got["declared_params"] == info["total_params"]
        assert got["imports_ours"] == []
        vocab = info["spec"]["vocab_size"]
        width = info["spec"].get("hidden_size", vocab)  # flexibert returns hidden states
        assert got["shapes"][0] == [2, 8, width], info["kind"]


@pytest.mark.slow
# The cache sits beside a SQLite file (Settings.export_dir); elsewhere it is in the temp dir.
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_onnx_export_runs_in_onnxruntime_and_is_served_from_the_cache(
    client, tmp_path, monkeypatch
):
    np = pytest.importorskip("numpy")
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("torch", reason="the exporter needs torch")
    _, point = frontier_arch(client)
    arch_id, params = point["arch_id"], {"format": "onnx", "seq_len": 16, "batch_size": 2}

    first = client.get(EXPORT.format(arch_id), params=params)

    assert first.status_code == 200, first.text
    assert first.headers["content-type"] == "application/octet-stream"
    assert f'filename="hwnas-{arch_id}.onnx"' in first.headers["content-disposition"]
    session = ort.InferenceSession(first.content, providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["input_ids"]
    assert [o.name for o in session.get_outputs()] == ["log_probs"]
    vocab = point["spec"]["vocab_size"]
    for shape in [(2, 16), (3, 32)]:  # traced at (2, 16); batch and length are dynamic
        tokens = np.random.default_rng(0).integers(0, vocab, shape, dtype=np.int64)
        (log_probs,) = session.run(None, {"input_ids": tokens})
        assert log_probs.shape == (*shape, vocab)
        np.testing.assert_allclose(np.exp(log_probs).sum(-1), 1.0, rtol=1e-4)  # a distribution
    cache = tmp_path / "hwnas.db.exports"
    assert [p.name for p in cache.iterdir()] == [f"{arch_id}-b2-s16-dynamic.onnx"]  # no scratch

    def no_child(command):
        raise AssertionError(f"the cached export ran the exporter again: {command}")

    monkeypatch.setattr(export, "_run_child", no_child)
    again = client.get(EXPORT.format(arch_id), params=params)
    assert again.status_code == 200
    assert again.content == first.content


def test_onnx_export_without_torch_where_the_server_runs_is_501(tmp_path):
    fake = tmp_path / "python-without-torch"
    fake.write_text(NO_TORCH.format(python=sys.executable))
    fake.chmod(0o755)
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'hwnas.db'}", export_python=str(fake))
    with TestClient(create_app(settings)) as client:
        arch_id = proposed_arch(client, "gpt2")
        response = client.get(EXPORT.format(arch_id), params={"format": "onnx"})
    assert response.status_code == 501
    assert response.json()["detail"] == (
        "ONNX export needs torch, onnx and onnxscript where the server runs: "
        "pip install torch onnx onnxscript"
    )
    assert list(Path(f"{tmp_path / 'hwnas.db'}.exports").iterdir()) == []
