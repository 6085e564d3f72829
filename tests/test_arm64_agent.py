"""The real agent on aarch64: run inside the arm64 Debian root of scripts/arm64/setup-root.sh
under qemu user-mode emulation, against a real server on this machine's loopback.

Opt-in: needs root (chroot, mounts), qemu-user-static's binfmt entry, and a prepared root
named by HWNAS_ARM64_ROOT. It takes a few minutes, because everything in the root, imports
and model runs included, is emulated. Emulated latencies only prove that the code runs.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from test_end_to_end import _wait_finished

from hwnas.testing.ports import free_port
from hwnas.testing.processes import Processes
from hwnas.testing.servers import start_server
from tests.factories import search_request

ROOT = os.environ.get("HWNAS_ARM64_ROOT")
RUN_AGENT = Path(__file__).resolve().parents[1] / "scripts" / "arm64" / "run-agent.sh"

pytestmark = [
    pytest.mark.arm64,
    pytest.mark.skipif(not ROOT, reason="HWNAS_ARM64_ROOT is not set"),
    pytest.mark.skipif(
        bool(ROOT) and not Path(ROOT or "/", "opt/hwnas-venv/bin/python").exists(),
        reason=f"HWNAS_ARM64_ROOT={ROOT} is not prepared: run scripts/arm64/setup-root.sh",
    ),
]

# One forward pass of a tiny model takes seconds under emulation: a short protocol, and a
# timeout that leaves room for building and importing under emulation as well.
EMULATED_MEASUREMENT = {
    "seq_len": 16,
    "warmup": 1,
    "warmup_max_s": 2.0,
    "min_samples": 5,
    "min_time_s": 0.0,
    "max_time_s": 5.0,
    "timeout_s": 900.0,
}


@pytest.fixture
def procs(tmp_path):
    processes = Processes(tmp_path)
    yield processes
    processes.stop_all()


RUNTIMES = ("torch", "onnxruntime")


def test_the_arm64_agent_measures_a_search_in_each_runtime(tmp_path, procs):
    # One emulated agent for both searches, as it serves every runtime it has: one start under
    # qemu and one idle wait before it exits, instead of two.
    port = free_port()
    start_server(procs, tmp_path / "arm64.db", port)
    url = f"http://127.0.0.1:{port}"
    with procs.client(url) as client:
        searches = {}
        for runtime in RUNTIMES:
            request = search_request(
                device_class="arm64-qemu",
                measurement={**EMULATED_MEASUREMENT, "runtime": runtime},
                # One candidate a runtime: under emulation a second one took another 7 s
                # (torch) and 64 s (onnxruntime) and showed nothing the first did not.
                budget={"max_evaluations": 1},
                population={"initial": 1, "parents": 1, "mutations": 1, "crossovers": 1},
            )
            created = client.post("/api/v1/searches", json=request)
            assert created.status_code == 201, created.text
            searches[runtime] = created.json()["id"]

        agent = subprocess.run(
            [str(RUN_AGENT), url, "--exit-when-idle", "5", "--poll-interval", "0.5"]
            + ["--token", procs.agent_token],
            env={**os.environ, "HWNAS_ARM64_ROOT": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=2400,
        )
        log = agent.stdout + agent.stderr
        (tmp_path / "arm64-agent.log").write_text(log)
        assert agent.returncode == 0, log[-4000:]

        agents = {a["agent_id"]: a for a in client.get("/api/v1/agents").json()}
        for runtime, search_id in searches.items():
            info = _wait_finished(client, search_id, procs, timeout=30)
            assert info["status"] == "finished" and info["finish_reason"] == "budget", info
            candidates = client.get(f"/api/v1/searches/{search_id}/candidates").json()
            assert len(candidates) == 1
            for c in candidates:
                assert c["status"] == "measured", (runtime, c, log[-4000:])
                m = c["measurement"]
                fingerprint = agents[m["agent_id"]]["fingerprint"]
                assert fingerprint["machine"] == "aarch64", fingerprint
                assert agents[m["agent_id"]]["device_class"] == "arm64-qemu"
                assert m["provenance"]["machine"] == "aarch64"
                assert m["provenance"]["runtime"] == runtime
                assert m["latency_ms"] > 0 and m["peak_memory_mb"] > 0
