#!/usr/bin/env bash
# bench/peers_real.py on a lent GPU machine (the `device` tool): hwnas against Optuna's
# GPSampler (issue 22's best peer), each measuring through the agent's path on CUDA, every
# frontier measured again afterwards. The caller carries the packages that machine lacks as
# wheels in .whl/ (bench/device_env.sh): optuna, colorlog, alembic, mako, sqlalchemy, pydantic,
# pydantic-core, annotated-types, typing-inspection, typing-extensions, pymoo, autograd, cma,
# deprecated, alive-progress, about-time, graphemeu, moocore, cffi, pycparser, platformdirs.
#
# Seeds run one process each, each written to $OUT/peers_real_gpu_seedN.json as it ends, and a
# seed starts only while DEADLINE_S (from the script's start) leaves room for one more, judged
# by the longest seed so far; `python3 -m bench.peers_real --merge FILES` reports them together.
#
#   DEADLINE_S=500 bash bench/peers_real_device.sh
#   SEEDS="0" BUDGET=4 CHECKPOINTS=2 SPACE='{"n_layer": {"min": 2, "max": 3, "step": 1}}' \
#       MEASUREMENT='{"device": "cpu", "min_time_s": 0.1}' bash bench/peers_real_device.sh
set -euo pipefail
OUT=${OUT:-/tmp/peers_real_device}
mkdir -p "$OUT"
source bench/device_env.sh
MEASUREMENT=${MEASUREMENT:-'{"device": "cuda", "min_time_s": 0.5, "max_time_s": 5.0}'}
SPACE=${SPACE:-}
space=()
if [ -n "$SPACE" ]; then space=(--space "$SPACE"); fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>/dev/null || true
python3 -c "import torch, optuna; print('torch', torch.__version__, 'optuna', optuna.__version__,
    torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA')"

deadline=${DEADLINE_S:-500}
longest=0
for seed in ${SEEDS:-0 1 2}; do
    left=$((deadline - SECONDS))
    if [ "$left" -le "$longest" ]; then
        echo "seed $seed not started: $left s left, the longest seed took $longest s"
        break
    fi
    started=$SECONDS
    timeout "$left" python3 -m bench.peers_real --seeds "$seed" --budget "${BUDGET:-60}" \
        --checkpoints ${CHECKPOINTS:-30 60} --contenders hwnas optuna-gp "${space[@]}" \
        --measurement "$MEASUREMENT" --json "$OUT/peers_real_gpu_seed$seed.json" ||
        echo "seed $seed: bench.peers_real exited $?"
    took=$((SECONDS - started))
    echo "seed $seed took $took s"
    if [ "$took" -gt "$longest" ]; then longest=$took; fi
done
