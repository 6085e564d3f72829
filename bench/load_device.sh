#!/usr/bin/env bash
# bench/load.py on a lent many-core machine (the `device` tool's 16-core GPU hosts), where the
# load generators do not take the server's cores. That machine has Python and PyTorch but not
# the server's packages or PostgreSQL, and no network: the caller carries them as wheels in
# .whl/ (fastapi, uvicorn, sqlalchemy, alembic, pydantic, psycopg, pymoo, moocore and their
# needs; `pgserver`, whose wheel holds PostgreSQL 16's binaries). Results go to $OUT.
#
#   bash bench/load_device.sh            # about 6 minutes on 16 cores
#   QUICK=1 bash bench/load_device.sh    # a few seconds per scenario: checks the set-up
set -euo pipefail
OUT=${OUT:-/tmp/load_device}
mkdir -p "$OUT"
if [ -d .whl ] && ! python3 -c "import fastapi" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD
    export PATH=/tmp/site/pgserver/pginstall/bin:$PATH
fi
# PostgreSQL refuses root; hwnas.testing.postgres runs it as the `postgres` user when root.
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin postgres
fi
export PYTHONUNBUFFERED=1
nproc
python3 -c "import server.app, search.strategies.nsga2, psycopg; print('imports ok')"

if [ -n "${QUICK:-}" ]; then short=(--duration 6 --agents 20 --budget 200); long=("${short[@]}")
else short=(--duration 30 --budget 5000); long=(--duration 40 --agents 1000 --think-s 10); fi
# A scenario that fails its checks is reported in its JSON; the next ones still run.
load() { python3 -m bench.load --generators 4 "$@" || echo "bench.load exited $?"; }

# Item 3: does throughput rise with server processes on PostgreSQL when cores allow?
load "${short[@]}" --stores postgresql --workers 1,2,4,8 --json-out "$OUT/load_pg_200.json"
# Item 5's targets: 200 agents at 1 s and 1,000 agents at 10 s.
load "${short[@]}" --stores sqlite --workers 1 --json-out "$OUT/load_sqlite_200.json"
load "${long[@]}" --stores sqlite --workers 1 --json-out "$OUT/load_sqlite_1000.json"
load "${long[@]}" --stores postgresql --workers 4 --json-out "$OUT/load_pg_1000.json"
