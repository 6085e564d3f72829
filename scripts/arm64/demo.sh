#!/usr/bin/env bash
# End-to-end proof that the agent runs on aarch64: a real server on this machine (x86_64),
# a tiny search for device class arm64-qemu, and the real agent inside the arm64 root under
# qemu until it is idle; then the candidates and the agent's fingerprint, read over REST.
#
#   scripts/arm64/demo.sh            # after scripts/arm64/setup-root.sh
#   PORT=8765 BUDGET=4 scripts/arm64/demo.sh
#   RUNTIME=onnxruntime scripts/arm64/demo.sh    # export to ONNX, time with ONNX Runtime
#
# Exits non-zero unless every candidate was measured by an agent whose machine is aarch64.
# Emulated timings only prove that the code runs; they say nothing about an ARM CPU's speed.
set -euo pipefail
# shellcheck source=scripts/arm64/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PORT=${PORT:-8765}
BUDGET=${BUDGET:-4}
RUNTIME=${RUNTIME:-torch}
HWNAS=${HWNAS:-$ARM64_REPO/.venv/bin/hwnas}
PY=${PY:-$ARM64_REPO/.venv/bin/python}
WORK=$(mktemp -d /tmp/hwnas-arm64-demo.XXXXXX)
URL=http://127.0.0.1:$PORT

"$HWNAS" serve --port "$PORT" --db "$WORK/demo.db" >"$WORK/server.log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true' EXIT
for _ in $(seq 120); do
    curl -fs "$URL/healthz" >/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || arm64_die "server exited: $(cat "$WORK/server.log")"
    sleep 0.5
done
arm64_log "server up at $URL (pid $server_pid, files in $WORK)"

# Tiny space and a short latency protocol: each emulated candidate takes seconds, not minutes.
# timeout_s is generous because everything, the model build included, runs under emulation.
search_id=$(curl -fsS -X POST "$URL/api/v1/searches" -H 'content-type: application/json' -d '{
  "name": "arm64 under qemu",
  "device_class": "arm64-qemu",
  "space": {"n_layer": {"min": 2, "max": 3}, "d_model": {"min": 64, "max": 128, "step": 64},
            "d_inner": {"min": 128, "max": 512, "step": 64}, "d_embed": [64, 128],
            "cutoffs": [200, 500], "vocab_size": 1000, "n_positions": 64},
  "measurement": {"runtime": "'"$RUNTIME"'", "seq_len": 16, "warmup": 1, "warmup_max_s": 2, "min_samples": 5,
                  "min_time_s": 0, "max_time_s": 5, "timeout_s": 900},
  "budget": {"max_evaluations": '"$BUDGET"'},
  "population": {"initial": '"$BUDGET"', "parents": 2, "mutations": 2, "crossovers": 2},
  "seed": 7
}' | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["id"])')
arm64_log "search $search_id posted (budget $BUDGET, runtime $RUNTIME); starting the arm64 agent"

start=$SECONDS
# The full log goes to agent.log; the screen is spared the idle polls (claim -> 204).
"$(dirname "${BASH_SOURCE[0]}")/run-agent.sh" "$URL" --exit-when-idle 20 --poll-interval 0.5 \
    2>&1 | tee "$WORK/agent.log" | { grep --line-buffered -v 'claim "HTTP/1.1 204' || true; }
agent_status=${PIPESTATUS[0]}
arm64_log "agent exited with status $agent_status after $((SECONDS - start)) s"
[ "$agent_status" = 0 ] || arm64_die "the agent failed; its log: $WORK/agent.log"

curl -fsS "$URL/api/v1/searches/$search_id/candidates" >"$WORK/candidates.json"
curl -fsS "$URL/api/v1/agents" >"$WORK/agents.json"
"$PY" - "$WORK" "$BUDGET" <<'PYEOF'
import json, sys
from pathlib import Path

work, budget = Path(sys.argv[1]), int(sys.argv[2])
agents = {a["agent_id"]: a for a in json.loads((work / "agents.json").read_text())}
candidates = json.loads((work / "candidates.json").read_text())
for a in agents.values():
    fp = a["fingerprint"]
    print(f"agent {a['agent_id'][:12]} {a.get('name')!r} class={a['device_class']} machine={fp['machine']} "
          f"torch={fp['torch_version']} cpu={fp['cpu_model']!r} cores={fp['cores']}")
ok = len(candidates) == budget
for c in candidates:
    m = c.get("measurement") or {}
    agent = agents.get(m.get("agent_id"), {})
    machine = agent.get("fingerprint", {}).get("machine")
    prov = m.get("provenance", {})
    print(f"{c['arch_id'][:12]} {c['status']:<9} latency {m.get('latency_ms', 0):8.2f} ms  "
          f"memory {m.get('peak_memory_mb', 0):6.1f} MB  build {m.get('build_s', 0):5.2f} s  "
          f"samples {m.get('latency', {}).get('samples')}  agent machine {machine}  "
          f"provenance machine {prov.get('machine')}")
    ok &= c["status"] == "measured" and machine == "aarch64" and prov.get("machine") == "aarch64"
print("PASS: every candidate measured on aarch64" if ok else "FAIL", f"({work})")
sys.exit(0 if ok else 1)
PYEOF
