#!/usr/bin/env bash
# A real single-host Slurm for gymwatch's cluster tests (tests/test_realslurm.py, tests/slurmrig.py).
#   usage: bash .ci/install_slurm.sh
# Idempotent: packages already there are not reinstalled, the plugin is rebuilt only when its
# source changed. Starts nothing: the test rig starts (and stops) its own daemons with a private
# configuration. The last line printed is always "install_slurm.sh: ok: <plugin>".
#
# Installs from the machine's own apt (sources untouched):
#   slurm-wlm (slurmctld, slurmd, the client commands), munge, slurmdbd and mariadb-server
#   (accounting: sacct), libslurm-dev (spank.h) and a C compiler.
# Builds .ci/slurm/fakepyxis.c, a SPANK plugin that accepts pyxis's container flags and ignores
# them (Gym's job scripts pass them to srun), into ${GYMWATCH_SLURMRIG_LIB:-/opt/gymwatch-slurmrig}.
set -euo pipefail

log() { echo "install_slurm.sh: $*"; }
die() { echo "install_slurm.sh: ERROR: $*" >&2; exit 1; }

HERE=$(cd "$(dirname "$0")" && pwd)
LIB=${GYMWATCH_SLURMRIG_LIB:-/opt/gymwatch-slurmrig}
APT_LOG=/tmp/gymwatch-install-slurm.log
PACKAGES=(slurm-wlm slurmctld slurmd slurm-client slurmdbd munge mariadb-server mariadb-client
    libslurm-dev gcc libc6-dev)

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

# No init system here: a package's postinst must not start its daemon (the rig starts its own,
# on private ports and paths). Debian asks /usr/sbin/policy-rc.d; add a "deny" one only for the
# time of the install when the machine has none.
POLICY=/usr/sbin/policy-rc.d
OUR_POLICY=""
cleanup() { [ -z "$OUR_POLICY" ] || rm -f "$OUR_POLICY"; }
trap cleanup EXIT

install_packages() {
    local p missing=() t0=$SECONDS
    for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
    if [ ${#missing[@]} -eq 0 ]; then
        log "packages already installed ($(dpkg-query -W -f='${Version}' slurmctld))"
        return 0
    fi
    if [ ! -e "$POLICY" ]; then
        printf '#!/bin/sh\n# added by gymwatch .ci/install_slurm.sh for the time of an install\nexit 101\n' >"$POLICY"
        chmod 755 "$POLICY"
        OUR_POLICY=$POLICY
    fi
    log "installing ${missing[*]} (log: $APT_LOG)"
    export DEBIAN_FRONTEND=noninteractive
    # (a machine whose apt lists were never fetched needs one apt-get update first)
    apt-get install -y -q --no-install-recommends "${missing[@]}" >"$APT_LOG" 2>&1 ||
        { apt-get update -q >>"$APT_LOG" 2>&1 &&
            apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$APT_LOG" 2>&1; } ||
        { tail -n 15 "$APT_LOG" >&2; die "apt-get install ${missing[*]} failed; see $APT_LOG"; }
    for p in "${PACKAGES[@]}"; do installed "$p" || die "$p is not installed after apt-get install"; done
    log "packages installed in $((SECONDS - t0))s ($(dpkg-query -W -f='${Version}' slurmctld))"
}

build_plugin() {
    local src="$HERE/slurm/fakepyxis.c" so="$LIB/fakepyxis.so" sum
    [ -f "$src" ] || die "missing $src"
    sum=$(sha256sum "$src" | cut -d' ' -f1)
    if [ -f "$so" ] && [ "$(cat "$so.sha256" 2>/dev/null)" = "$sum" ]; then
        log "reusing $so"
        return 0
    fi
    mkdir -p "$LIB"
    gcc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$so.tmp" "$src" || die "building $src failed"
    mv "$so.tmp" "$so"
    echo "$sum" >"$so.sha256"
    log "built $so"
}

install_packages
for exe in slurmctld slurmd slurmdbd munged sbatch srun squeue scontrol sacct sacctmgr mariadbd mariadb-install-db; do
    command -v "$exe" >/dev/null || die "$exe is not on PATH after the install"
done
build_plugin
log "ok: $LIB/fakepyxis.so"
