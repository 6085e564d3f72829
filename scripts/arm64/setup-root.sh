#!/usr/bin/env bash
# Build an arm64 Debian bookworm root that runs the hwnas agent under qemu user-mode
# emulation: debootstrap --foreign + second stage, python3 + venv, then a venv with
# PyTorch's aarch64 CPU wheel, httpx, numpy, pydantic and hwnas[agent] from this checkout.
#
#   sudo scripts/arm64/setup-root.sh            # root in /work/arm64-root
#   HWNAS_ARM64_ROOT=/srv/arm64 scripts/arm64/setup-root.sh
#
# Idempotent: each step checks whether it is done; re-running refreshes the hwnas copy.
# Environment: HWNAS_ARM64_ROOT (the folder), DEBIAN_MIRROR (default: the first Debian
# mirror in this machine's apt sources), ARM64_CONSTRAINTS (pip constraints file).
set -euo pipefail
# shellcheck source=scripts/arm64/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SUITE=bookworm
CONSTRAINTS=${ARM64_CONSTRAINTS:-$ARM64_REPO/scripts/arm64/constraints-arm64.txt}

host_mirror() {
    local uri
    uri=$(grep -rhv '^[[:space:]]*#' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
        grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ') || true
    echo "${uri:-http://deb.debian.org/debian}"
}

install_host_packages() {
    local missing=()
    for pkg in qemu-user-static binfmt-support debootstrap; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        arm64_log "installing host packages: ${missing[*]}"
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    fi
}

bootstrap() {
    local mirror=$1
    if [ -x "$ARM64_ROOT/usr/bin/python3" ] && [ ! -e "$ARM64_ROOT/debootstrap" ]; then
        arm64_log "debootstrap: done earlier"
        return
    fi
    if [ ! -x "$ARM64_ROOT/debootstrap/debootstrap" ]; then
        arm64_log "debootstrap first stage ($SUITE arm64 from $mirror)"
        mkdir -p "$ARM64_ROOT"
        debootstrap --arch=arm64 --foreign --variant=minbase \
            --include=python3,python3-venv,ca-certificates \
            "$SUITE" "$ARM64_ROOT" "$mirror"
    fi
    arm64_log "debootstrap second stage (emulated)"
    chroot "$ARM64_ROOT" /debootstrap/debootstrap --second-stage
    rm -f "$ARM64_ROOT"/var/cache/apt/archives/*.deb
}

configure_apt() {
    local mirror=$1
    cat >"$ARM64_ROOT/etc/apt/sources.list" <<SOURCES
deb $mirror $SUITE main
deb $mirror $SUITE-updates main
deb ${mirror%/debian*}/debian-security $SUITE-security main
SOURCES
    # pip inside the root resolves PyPI with the host's resolver configuration.
    cp -L /etc/resolv.conf "$ARM64_ROOT/etc/resolv.conf"
}

trust_host_cas() {
    # Local CAs of the host (e.g. a TLS-inspecting proxy in front of PyPI) are trusted inside
    # the root too; pip is pointed at the system bundle (PIP_CERT) instead of certifi's.
    local src=/usr/local/share/ca-certificates dst="$ARM64_ROOT/usr/local/share/ca-certificates"
    compgen -G "$src/*.crt" >/dev/null || return 0
    if ! diff -rq "$src" "$dst" >/dev/null 2>&1; then
        arm64_log "trusting the host's local CAs inside the root"
        mkdir -p "$dst" && cp "$src"/*.crt "$dst"/
        # (its rehash warns about the bundle file itself; only the exit status matters)
        arm64_in_root update-ca-certificates >/dev/null 2>&1 || arm64_die "update-ca-certificates failed in the root"
    fi
}

copy_checkout() {
    # A snapshot of the checkout (tracked and untracked-but-not-ignored files, as git
    # sees them) for the installed hwnas; run-agent.sh runs the live tree by default.
    local dst="$ARM64_ROOT/opt/hwnas-src"
    rm -rf "$dst" && mkdir -p "$dst"
    git -C "$ARM64_REPO" ls-files -z --cached --others --exclude-standard |
        tar -C "$ARM64_REPO" --null -T - --ignore-failed-read -cf - 2>/dev/null |
        tar -C "$dst" -xf -
}

make_venv() {
    if [ ! -x "$ARM64_ROOT$ARM64_VENV/bin/python" ]; then
        arm64_log "creating $ARM64_VENV inside the root"
        arm64_in_root python3 -m venv "$ARM64_VENV"
    fi
    cp "$CONSTRAINTS" "$ARM64_ROOT/opt/constraints-arm64.txt"
    arm64_log "pip install hwnas[agent] (aarch64 wheels from PyPI, emulated)"
    arm64_in_root PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180 \
        PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
        "$ARM64_VENV/bin/pip" install -q -c /opt/constraints-arm64.txt "/opt/hwnas-src[agent]"
}

smoke_check() {
    # On the CPU run-agent.sh emulates: a torch wheel built for a newer ISA dies here with
    # SIGILL (e.g. torch 2.10.0 on cortex-a72, a Raspberry Pi 4's core).
    arm64_in_root QEMU_CPU="$ARM64_QEMU_CPU" "$ARM64_VENV/bin/python" -c '
import os, platform, httpx, numpy, pydantic, torch, agent.cli
y = torch.nn.Linear(8, 4)(torch.ones(2, 8))
print("smoke check:", platform.machine(), os.environ["QEMU_CPU"],
      "python", platform.python_version(), "torch", torch.__version__,
      "numpy", numpy.__version__, "pydantic", pydantic.VERSION, "forward", tuple(y.shape))
'
}

main() {
    arm64_need_root_user
    arm64_check_root_path
    local start=$SECONDS mirror=${DEBIAN_MIRROR:-$(host_mirror)}
    install_host_packages
    arm64_ensure_binfmt
    bootstrap "$mirror"
    configure_apt "$mirror"
    trust_host_cas
    copy_checkout
    make_venv
    smoke_check
    arm64_log "root ready in $ARM64_ROOT ($((SECONDS - start)) s, $(du -sh "$ARM64_ROOT" | cut -f1))"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
