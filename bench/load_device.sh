#!/usr/bin/env bash
# bench/load.py on a lent many-core machine (the `device` tool's 16-core GPU hosts), where the
# load generators do not take the server's cores. That machine has Python and PyTorch but not
# the server's packages or PostgreSQL, and no network: the caller carries them as wheels in
# .whl/ (fastapi, uvicorn, httptools, sqlalchemy, alembic, pydantic, psycopg, pymoo, moocore
# and their needs; `pgserver`, whose wheel holds PostgreSQL 16's binaries). Results go to $OUT.
# A scenario is not started once DEADLINE_S seconds (default 540) have passed.
#
#   bash bench/load_device.sh            # about 10 minutes on 16 cores (DEADLINE_S cuts it)
#   QUICK=1 bash bench/load_device.sh    # a few seconds per scenario: checks the set-up
#   COMPARE=.before bash bench/load_device.sh   # PostgreSQL, 8 and 4 processes, before/after
set -euo pipefail
OUT=${OUT:-/tmp/load_device}
mkdir -p "$OUT"
source bench/device_env.sh
nproc
python3 -c "import server.app, search.strategies.nsga2, psycopg; print('imports ok')"

if [ -n "${QUICK:-}" ]; then short=(--duration 6 --agents 20 --budget 200); long=("${short[@]}")
    fleet=("${short[@]}")
else short=(--duration 30 --budget 5000); long=(--duration 40 --agents 1000 --think-s 10)
    fleet=(--duration 30 --agents 1000 --think-s 10); fi

# One bench.load run, results in $OUT/NAME.json. With COMPARE=DIR (a copy of an earlier
# commit's packages), the same run from DIR first, in $OUT/NAME_before.json: interleaved.
# A run that fails its checks says so in its JSON; the next ones still run.
load() {
    local name=$1
    shift
    if [ "$SECONDS" -ge "${DEADLINE_S:-540}" ]; then echo "$name not started: deadline"; return; fi
    if [ -n "${COMPARE:-}" ]; then
        (cd "$COMPARE" && PYTHONPATH=/tmp/site:$PWD python3 -m bench.load --generators 4 "$@" \
            --json-out "$OUT/${name}_before.json") || echo "bench.load (before) exited $?"
    fi
    python3 -m bench.load --generators 4 "$@" --json-out "$OUT/$name.json" ||
        echo "bench.load exited $?"
}

if [ -n "${COMPARE:-}" ]; then
    # Item 3, before and after: eight and four processes on PostgreSQL.
    load pg_200 "${short[@]}" --stores postgresql --workers 8,4
    load pg_1000 "${fleet[@]}" --stores postgresql --workers 8
    exit
fi
# Agents send each result with claim_next, as `hwnas agent` does (NEXT=0: a claim apiece).
next=(--claim-next)
if [ "${NEXT:-1}" = 0 ]; then next=(); fi
# Item 5's targets first: SQLite, one process, 200 agents at 1 s and 1,000 at 10 s.
load load_sqlite_200 "${short[@]}" "${next[@]}" --stores sqlite --workers 1
load load_sqlite_1000 "${long[@]}" "${next[@]}" --stores sqlite --workers 1
# Item 3: does throughput rise with server processes on PostgreSQL when cores allow?
load load_pg_200 "${short[@]}" "${next[@]}" --stores postgresql --workers 1,2,4,8
load load_pg_1000 "${long[@]}" "${next[@]}" --stores postgresql --workers 8
# Claims that wait for work (claim?wait=, hwnas agent --claim-wait) at 1,000 agents.
load load_sqlite_1000_wait "${long[@]}" "${next[@]}" --claim-wait-s 10 --stores sqlite --workers 1
load load_pg_1000_wait "${long[@]}" "${next[@]}" --claim-wait-s 10 --stores postgresql --workers 8
# What claim_next gives on these cores: the first scenario with a claim apiece.
if [ "${NEXT:-1}" != 0 ]; then load load_sqlite_200_claims "${short[@]}" --stores sqlite --workers 1; fi
