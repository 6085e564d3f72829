# shellcheck shell=bash disable=SC2034
# (SC2034: the variables below are used by the scripts that source this file.)
# Shared helpers for scripts/arm64/*.sh: where the arm64 root lives, qemu/binfmt checks,
# and running a command inside the root. Sourced, not executed.

ARM64_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ARM64_ROOT=${HWNAS_ARM64_ROOT:-/work/arm64-root}
# The venv inside the root that holds torch, httpx, numpy, pydantic and an installed hwnas.
ARM64_VENV=/opt/hwnas-venv
# Where run-agent.sh bind-mounts the current checkout inside the root.
ARM64_TREE=/opt/hwnas
# The CPU qemu emulates for the agent (QEMU_CPU, read by qemu-aarch64 at every exec):
# cortex-a76 is a Raspberry Pi 5's core (ARMv8.2, no SVE). qemu's default, "max", adds SVE,
# which torch's kernels then use and qemu emulates about 20x slower (a 16x512x1000 matmul:
# 2.1 s against 0.1 s). "qemu-aarch64-static -cpu help" lists the others.
ARM64_QEMU_CPU=${HWNAS_ARM64_CPU:-cortex-a76}

arm64_log() { printf '[arm64 %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
arm64_die() { arm64_log "error: $*"; exit 1; }

arm64_check_root_path() {
    case "$ARM64_ROOT" in
        /*) ;;
        *) arm64_die "HWNAS_ARM64_ROOT must be an absolute path, got '$ARM64_ROOT'" ;;
    esac
    ARM64_ROOT=${ARM64_ROOT%/}
    # Keep the root out of the checkout: it is ~1.3 GB of another architecture's files
    # that git, ruff and pytest would otherwise walk.
    case "$ARM64_ROOT/" in
        "$ARM64_REPO"/*) arm64_die "put the root outside the checkout ($ARM64_REPO), e.g. /work/arm64-root" ;;
    esac
}

arm64_need_root_user() {
    [ "$(id -u)" -eq 0 ] || arm64_die "run as root (debootstrap, chroot and mounts need it)"
}

# qemu-user-static's binfmt entry has the F (fix-binary) flag: the kernel opens the
# interpreter when the entry is registered, so aarch64 programs run inside a chroot
# without a copy of qemu in it, and programs they exec (the agent's measuring child) too.
arm64_ensure_binfmt() {
    local entry=/proc/sys/fs/binfmt_misc/qemu-aarch64
    if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null ||
            arm64_die "binfmt_misc is not mounted and cannot be mounted here; see docs/arm.md (proot)"
    fi
    if [ ! -e "$entry" ]; then
        update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
    fi
    [ -e "$entry" ] || arm64_die "qemu-aarch64 is not registered in binfmt_misc (is qemu-user-static installed?)"
    grep -q '^enabled' "$entry" || arm64_die "binfmt entry $entry is disabled: update-binfmts --enable qemu-aarch64"
    grep -q '^flags:.*F' "$entry" ||
        arm64_die "binfmt entry for qemu-aarch64 lacks the F flag (needed in a chroot); use HWNAS_ARM64_RUNNER=proot"
}

# arm64_in_root CMD...: run CMD inside the root with /proc, /sys, /dev (and /dev/shm, which
# multiprocessing needs) mounted. The mounts live in a private mount namespace, so they
# vanish when CMD exits, also when it is killed: nothing to clean up, nothing leaked.
# Extra bind mounts: ARM64_BINDS="src:dst[:ro] ..." (dst is inside the root).
# CMD starts with a clean environment; pass variables as leading VAR=value words.
# The network namespace is the host's, so 127.0.0.1 inside is the host's loopback.
arm64_in_root() {
    # shellcheck disable=SC2016 # expanded by the inner bash, in the new mount namespace
    local script='
        set -e
        root=$1; shift
        mount -t proc proc "$root/proc" 2>/dev/null || mount --rbind /proc "$root/proc"
        mount --rbind /sys "$root/sys"
        mount --rbind /dev "$root/dev"
        for spec in $ARM64_BINDS; do
            IFS=: read -r src dst mode <<<"$spec"
            mkdir -p "$root$dst"
            mount --bind "$src" "$root$dst"
            if [ "$mode" = ro ]; then mount -o remount,bind,ro "$root$dst"; fi
        done
        exec chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
            HOME=/root LANG=C.UTF-8 "$@"
    '
    local run=(unshare --mount --propagation private bash -c "$script" arm64-in-root "$ARM64_ROOT" "$@")
    export ARM64_BINDS=${ARM64_BINDS:-}
    # ARM64_EXEC=1: replace the calling shell, so that signals (SIGTERM from a supervisor)
    # reach the program itself: unshare, bash, chroot and env all exec, none stays behind.
    if [ "${ARM64_EXEC:-0}" = 1 ]; then exec "${run[@]}"; fi
    "${run[@]}"
}

# arm64_in_proot CMD...: the same without root and without binfmt_misc. PRoot (Debian's
# `proot`) fakes the chroot and the bind mounts with ptrace, and with -q it starts every
# aarch64 program, including those the agent execs, under qemu-aarch64-static itself.
# Slower system calls; measured the same way. Same ARM64_BINDS and ARM64_EXEC as above.
arm64_in_proot() {
    command -v proot >/dev/null || arm64_die "proot is not installed: apt-get install proot"
    local qemu
    qemu=$(command -v qemu-aarch64-static) || arm64_die "apt-get install qemu-user-static"
    local run=(proot -q "$qemu" -r "$ARM64_ROOT" -b /proc -b /sys -b /dev -w /)
    local spec src dst
    for spec in ${ARM64_BINDS:-}; do
        IFS=: read -r src dst _ <<<"$spec"
        run+=(-b "$src:$dst") # proot has no read-only binds
    done
    run+=(/usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root LANG=C.UTF-8 "$@")
    if [ "${ARM64_EXEC:-0}" = 1 ]; then exec "${run[@]}"; fi
    "${run[@]}"
}
