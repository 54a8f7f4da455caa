#!/usr/bin/env bash
# Debian's chromium for the `gymwatch serve` test (tests/test_serve.py): a real headless browser
# opens the served screen and takes a screenshot. Installed with apt only when missing; the
# machine's apt sources are used as they are. Idempotent: a second call takes well under a second.
# The last line printed is always "install_chromium.sh: ok: <path to chromium>".
set -euo pipefail

log() { echo "install_chromium.sh: $*"; }

find_chromium() {
    command -v chromium 2>/dev/null || command -v chromium-browser 2>/dev/null || true
}

BIN=$(find_chromium)
if [ -z "$BIN" ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || { echo "install_chromium.sh: ERROR: not root and no sudo: install chromium by hand" >&2; exit 1; }
        SUDO="sudo"
    fi
    log "installing Debian's chromium (apt, about 1-2 min the first time)"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
    BIN=$(find_chromium)
    [ -n "$BIN" ] || { echo "install_chromium.sh: ERROR: chromium still not on PATH after apt-get install" >&2; exit 1; }
fi
log "ok: $BIN"
