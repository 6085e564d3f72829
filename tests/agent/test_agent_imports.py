"""The agent's dependency rule: archvocab, torch, httpx, numpy and the standard library only."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

FORBIDDEN = (
    "server",
    "search",
    "proxies",
    "fastapi",
    "starlette",
    "sqlalchemy",
    "pymoo",
    "uvicorn",
)
AGENT_MODULES = (
    "agent",
    "agent.cli",
    "agent.worker",
    "agent.client",
    "agent.measure",
    "agent.fingerprint",
    "agent.failures",
    "agent.memory",
    "agent.child",
    "agent.in_process",
    "agent.lease",
    "agent.launch",
    "agent.latency_protocol",
    "agent.provenance",
    "agent.hostinfo",
    "agent.weights",
    "agent.preload",
)
# What the ONNX Runtime measuring process and the agent's own process load: no torch.
TORCH_FREE = (
    "agent.child",
    "agent.launch",
    "agent.measure",
    "agent.memory",
    "agent.latency_protocol",
    "agent.provenance",
    "agent.hostinfo",
)


def loaded_after_import(module: str) -> set[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {name.split(".")[0] for name in json.loads(done.stdout)}


@pytest.mark.parametrize("module", AGENT_MODULES)
def test_agent_modules_import_only_what_the_agent_may(module: str) -> None:
    loaded = loaded_after_import(module)
    assert not loaded & set(FORBIDDEN)


def test_the_agent_process_stays_torch_free() -> None:
    # only the measuring child (agent.child -> agent.in_process) imports torch
    loaded = loaded_after_import("agent.cli")
    assert "torch" not in loaded and "numpy" not in loaded
    assert {"httpx", "archvocab", "pydantic"} <= loaded


@pytest.mark.parametrize("module", TORCH_FREE)
def test_measuring_plumbing_is_torch_free(module: str) -> None:
    assert "torch" not in loaded_after_import(module)
