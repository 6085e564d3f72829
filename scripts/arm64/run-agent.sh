#!/usr/bin/env bash
# Run `hwnas agent` inside the arm64 root (scripts/arm64/setup-root.sh) under qemu user-mode
# emulation, against a server on this machine or elsewhere.
#
#   scripts/arm64/run-agent.sh [SERVER_URL] [hwnas agent options...]
#   scripts/arm64/run-agent.sh http://127.0.0.1:8000 --exit-when-idle 30
#
# SERVER_URL defaults to http://127.0.0.1:8000 (the root shares this machine's network, so
# loopback is the host's); --device-class defaults to arm64-qemu; every other option goes to
# `hwnas agent` unchanged (--once, --max-jobs N, --exit-when-idle S, --name ...).
#
# The code is this checkout, bind-mounted read-only at /opt/hwnas and put first on
# PYTHONPATH, so the agent always runs the current tree; HWNAS_ARM64_CODE=installed runs the
# copy installed into the root's venv by setup-root.sh instead.
#
# HWNAS_ARM64_RUNNER=chroot (default; needs root and qemu's binfmt_misc entry) or proot
# (neither: PRoot runs each aarch64 program under qemu-aarch64-static itself).
# HWNAS_ARM64_CPU: the emulated CPU, default cortex-a76 (a Raspberry Pi 5's); see lib.sh.
set -euo pipefail
# shellcheck source=scripts/arm64/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

server=http://127.0.0.1:8000
if [ $# -gt 0 ] && [[ "$1" == http://* || "$1" == https://* ]]; then
    server=$1
    shift
fi
args=("$@")
[[ " ${args[*]} " == *" --server "* ]] || args=(--server "$server" "${args[@]}")
[[ " ${args[*]} " == *" --device-class "* ]] || args=(--device-class arm64-qemu "${args[@]}")

runner=${HWNAS_ARM64_RUNNER:-chroot}
arm64_check_root_path
[ -x "$ARM64_ROOT$ARM64_VENV/bin/python" ] ||
    arm64_die "no agent venv in $ARM64_ROOT; run scripts/arm64/setup-root.sh first"
case "$runner" in
    chroot) arm64_need_root_user && arm64_ensure_binfmt ;;
    proot) ;;
    *) arm64_die "HWNAS_ARM64_RUNNER must be 'chroot' or 'proot'" ;;
esac

# No PYTHONPYCACHEPREFIX: with it, CPython 3.11 raises IndexError in cache_from_source for
# a module torch generates at import time (head "/" has no second character).
env_args=(PYTHONUNBUFFERED=1 QEMU_CPU="$ARM64_QEMU_CPU")
case "${HWNAS_ARM64_CODE:-tree}" in
    tree)
        export ARM64_BINDS="$ARM64_REPO:$ARM64_TREE:ro"
        # No bytecode written into the checkout (proot's binds are writable).
        env_args+=(PYTHONPATH="$ARM64_TREE" PYTHONDONTWRITEBYTECODE=1)
        ;;
    installed) ;;
    *) arm64_die "HWNAS_ARM64_CODE must be 'tree' or 'installed'" ;;
esac

arm64_log "agent in $ARM64_ROOT ($runner, cpu $ARM64_QEMU_CPU, code: ${HWNAS_ARM64_CODE:-tree}):" \
    "hwnas agent ${args[*]}"
in_root=arm64_in_root
[ "$runner" = proot ] && in_root=arm64_in_proot
ARM64_EXEC=1 "$in_root" "${env_args[@]}" "$ARM64_VENV/bin/python" -m hwnas agent "${args[@]}"
