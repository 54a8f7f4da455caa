#!/usr/bin/env bash
# A real NeMo Gym for gymwatch's end-to-end tests (tests/test_realgym.py).
#   usage: bash .ci/install_gym.sh [VERSION]     VERSION: 0.4.0 (default) or 0.7.0
# Idempotent: an existing venv with that nemo-gym and uv is reused as is.
# The last line printed is always "install_gym.sh: ok: <venv>/bin/gym".
#
# 0.4.0  venv:   ${GYMWATCH_GYM_VENV:-/tmp/gymwatch-gymvenv}
#        python: ${GYMWATCH_GYM_PYTHON_HOME:-/root/.pyenv/versions/3.13.0} (0.4.0 runs on 3.13.0)
# 0.7.0  venv:   ${GYMWATCH_GYM07_VENV:-/tmp/gymwatch-gymvenv-0.7.0}
#        python: nemo-gym 0.5+ needs 3.13.14 <= python < 3.14. Taken from
#                ${GYMWATCH_PY313_HOME:-/opt/gymwatch-python3.13}, PATH or pyenv if one is there;
#                else built (5-12 min on 2 cores) into that home from the pristine CPython
#                sources of Debian's python3.13 source package (forky/sid, on the same mirror
#                as this machine's apt; their binaries need a newer glibc, their sources don't).
#        Also prints "install_gym.sh: python: <bin dir>" and writes it to <venv>/gym-python-bin:
#        Gym makes its servers' venvs with `uv venv --python 3.13.x`, so callers put that dir
#        on PATH (with UV_PYTHON_DOWNLOADS=never: uv cannot download a Python here).
set -euo pipefail

log() { echo "install_gym.sh: $*"; }
die() { echo "install_gym.sh: ERROR: $*" >&2; exit 1; }

# (pip warns about every unreachable find-links location on some machines: keep the log readable)
quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; }

# have_gym VENV VERSION: the venv has gym, uv and exactly that nemo-gym.
have_gym() {
    [ -x "$1/bin/gym" ] && [ -x "$1/bin/uv" ] &&
        "$1/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("nemo-gym") != sys.argv[1])' "$2" 2>/dev/null
}

# ---------------------------------------------------------------- nemo-gym 0.4.0
install_gym_040() {
    local PY_HOME=${GYMWATCH_GYM_PYTHON_HOME:-/root/.pyenv/versions/3.13.0}
    local VENV=${GYMWATCH_GYM_VENV:-/tmp/gymwatch-gymvenv}
    local PY="$PY_HOME/bin/python3.13"

    if [ ! -x "$PY" ]; then
        echo "install_gym.sh: ERROR: Python 3.13.0 not found at $PY_HOME (need $PY)." >&2
        echo "install_gym.sh: the real-Gym tests cannot run without it; install it (pyenv install 3.13.0)." >&2
        exit 1
    fi
    if have_gym "$VENV" 0.4.0; then
        log "reusing $VENV (nemo-gym 0.4.0)"
    else
        log "installing nemo-gym==0.4.0 and uv into $VENV (about 1.5 min)"
        [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
        quiet "$VENV/bin/python" -m pip install -q --upgrade pip
        quiet "$VENV/bin/python" -m pip install -q "nemo-gym==0.4.0" uv
        have_gym "$VENV" 0.4.0 || die "nemo-gym 0.4.0 is not importable from $VENV"
    fi
    # The tests build the Gym servers' venvs under this dir (gym env start's cwd), so they are reused.
    mkdir -p "$VENV/work"
    log "ok: $VENV/bin/gym"
}

# ---------------------------------------------------------------- Python >= 3.13.14
PY313_HOME=${GYMWATCH_PY313_HOME:-/opt/gymwatch-python3.13}
PY313_MARK=.gymwatch-built            # in a home this script built (so it may replace it)
BUILD_LOG=/tmp/gymwatch-python3.13-build.log
WORK=""                               # temp dir of a build, removed on exit
STAGE=""                              # DESTDIR of a build, removed on exit unless moved into place
cleanup() { [ -z "$WORK" ] || rm -rf "$WORK"; [ -z "$STAGE" ] || rm -rf "$STAGE"; }
trap cleanup EXIT

# good_python EXE: prints the real interpreter's path if EXE is a usable base (non-venv)
# CPython 3.13.14+ with the stdlib modules pip and Gym need; fails otherwise.
# (Resolves pyenv shims: sys.executable is the interpreter the shim ran.)
good_python() {
    [ -x "$1" ] || return 1
    "$1" - 2>/dev/null <<'EOF'
import sys
if not (3, 13, 14) <= sys.version_info[:3] < (3, 14) or sys.prefix != sys.base_prefix:
    sys.exit(1)
import ssl, sqlite3, ctypes, lzma, bz2, zlib
print(sys.executable)
EOF
}

# find_python: sets PY to an existing good python3.13, if any.
find_python() {
    local cands=() c exe
    mapfile -t cands < <({
        echo "$PY313_HOME/bin/python3.13"
        type -a -P python3.13
        printf '%s\n' /root/.pyenv/versions/3.13.*/bin/python3.13 | sort -rV
    } || true)
    for c in "${cands[@]}"; do
        if exe=$(good_python "$c"); then PY=$exe; return 0; fi
    done
    return 1
}

# venv_base_python VENV: prints the venv's base python3.13 if it is still a good one.
venv_base_python() {
    local home
    home=$(sed -n 's/^home *= *//p' "$1/pyvenv.cfg" 2>/dev/null) || return 1
    [ -n "$home" ] && good_python "$home/python3.13"
}

# ensure_build_deps: CPython's build needs these -dev packages for ssl, sqlite3, ctypes, lzma...
# Installed from the machine's own apt (sources untouched), only when missing.
ensure_build_deps() {
    local p missing=()
    for p in build-essential pkg-config xz-utils libssl-dev zlib1g-dev libffi-dev libsqlite3-dev \
        libbz2-dev liblzma-dev libreadline-dev libncurses-dev uuid-dev; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing build dependencies: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # (a machine whose apt lists were never fetched needs one apt-get update first)
    apt-get install -y -q "${missing[@]}" >>"$BUILD_LOG" 2>&1 ||
        { apt-get update -q >>"$BUILD_LOG" 2>&1 && apt-get install -y -q "${missing[@]}" >>"$BUILD_LOG" 2>&1; } ||
        die "apt-get install ${missing[*]} failed; see $BUILD_LOG"
}

# debian_mirrors: "URI KEYRING" for each apt source of this machine that serves Debian's
# main archive (suite = this release's codename, component main), one-line or deb822 format.
debian_mirrors() {
    local codename f
    # shellcheck disable=SC1091
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || return 0
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk -v cn="$codename" '
            { sub(/#.*/, "") }
            $1 == "deb" {
                line = $0; key = ""
                i = index(line, "[")
                if (i) {   # options: [arch=... signed-by=...]
                    j = index(line, "]"); n = split(substr(line, i + 1, j - i - 1), o, " ")
                    for (k = 1; k <= n; k++) if (o[k] ~ /^signed-by=/) key = substr(o[k], 11)
                    line = substr(line, 1, i - 1) " " substr(line, j + 1)
                }
                n = split(line, f, " ")
                main = 0; for (k = 4; k <= n; k++) if (f[k] == "main") main = 1
                if (f[3] == cn && main) print f[2], key
            }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v cn="$codename" '
            function emit() {
                if ((" " types " ") ~ / deb / && (" " suites " ") ~ (" " cn " ") &&
                    (" " comps " ") ~ / main / && tolower(enabled) != "no") {
                    split(uris, u, " "); print u[1], key
                }
                types = uris = suites = comps = enabled = key = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { emit(); next }
            /^[ \t]/ { next }   # a continuation line (an inline Signed-By key block)
            {
                k = tolower($0); sub(/:.*/, "", k); v = $0; sub(/^[^:]*:[ \t]*/, "", v)
                if (k == "types") types = v; else if (k == "uris") uris = v
                else if (k == "suites") suites = v; else if (k == "components") comps = v
                else if (k == "enabled") enabled = v
                else if (k == "signed-by" && v ~ /^\//) key = v
            }
            END { emit() }' "$f"
    done
}

# private_apt MIRROR KEYRING: a throwaway apt config in $WORK/apt that sees only the deb-src
# indexes of forky and sid. The machine's own apt sources, lists and cache are never touched.
APT=()
private_apt() {
    local d="$WORK/apt" signed=""
    mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
    [ -n "$2" ] && signed="[signed-by=$2] "
    printf 'deb-src %s%s %s main\n' "$signed" "$1" forky "$signed" "$1" sid >"$d/sources.list"
    APT=(-o Dir::Etc::sourcelist="$d/sources.list" -o Dir::Etc::sourceparts=/nonexistent
        -o Dir::State::Lists="$d/lists" -o Dir::Cache="$d/cache"
        -o Dir::Etc::Preferences=/nonexistent -o Dir::Etc::PreferencesParts=/nonexistent
        -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root -q)
}

# fetch_cpython_source: sets SRC_TARBALL to the .orig.tar.xz (pristine CPython) of the newest
# python3.13 >= 3.13.14 that Debian's forky/sid source indexes list and the mirror still has.
fetch_cpython_source() {
    local mirrors=() m uri key versions=() v up
    if [ -n "${GYMWATCH_DEBIAN_MIRROR:-}" ]; then
        mirrors=("$GYMWATCH_DEBIAN_MIRROR ${GYMWATCH_DEBIAN_KEYRING:-}")
    else
        mapfile -t mirrors < <(debian_mirrors)
    fi
    [ ${#mirrors[@]} -gt 0 ] || die "no Debian mirror found in /etc/apt/sources.list{,.d/*} (set GYMWATCH_DEBIAN_MIRROR)"
    for m in "${mirrors[@]}"; do
        read -r uri key <<<"$m"
        [ -n "$key" ] || [ ! -f /usr/share/keyrings/debian-archive-keyring.gpg ] ||
            key=/usr/share/keyrings/debian-archive-keyring.gpg
        log "reading Debian's forky/sid source indexes from $uri"
        private_apt "$uri" "$key"
        apt-get "${APT[@]}" update >>"$BUILD_LOG" 2>&1 || { log "(apt-get update failed for $uri)"; continue; }
        mapfile -t versions < <(apt-cache "${APT[@]}" madison python3.13 |
            awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | sort -u | sort -rV)
        for v in "${versions[@]}"; do
            up=${v#*:}; up=${up%-*}
            if ! dpkg --compare-versions "$up" ge 3.13.14 || ! dpkg --compare-versions "$up" lt 3.14~; then
                continue
            fi
            rm -rf "$WORK/src" && mkdir -p "$WORK/src"
            log "downloading the source package python3.13=$v"
            if (cd "$WORK/src" && apt-get "${APT[@]}" source --download-only "python3.13=$v") >>"$BUILD_LOG" 2>&1 &&
                [ -f "$WORK/src/python3.13_$up.orig.tar.xz" ]; then
                SRC_TARBALL="$WORK/src/python3.13_$up.orig.tar.xz"
                SRC_VERSION=$up
                return 0
            fi
            log "(python3.13=$v is listed but cannot be fetched; trying the next version)"
        done
    done
    die "no python3.13 >= 3.13.14 could be fetched from Debian's forky/sid sources; see $BUILD_LOG"
}

# step CMD...: runs a build step into the log; on failure shows the log's tail and stops.
step() { "$@" >>"$BUILD_LOG" 2>&1 || { tail -n 15 "$BUILD_LOG" >&2; die "CPython build failed at: $*; see $BUILD_LOG"; }; }

# build_python: builds CPython $SRC_VERSION into $PY313_HOME and sets PY. It is installed
# into a staging DESTDIR, checked, then renamed into place: a half-built home never exists.
build_python() {
    local t0=$SECONDS src
    : >"$BUILD_LOG"
    WORK=$(mktemp -d /tmp/gymwatch-py313-build.XXXXXX)
    ensure_build_deps
    fetch_cpython_source
    log "source download done in $((SECONDS - t0))s"

    t0=$SECONDS
    log "building CPython $SRC_VERSION into $PY313_HOME (5-12 min; log: $BUILD_LOG)"
    tar -xf "$SRC_TARBALL" -C "$WORK"
    src=$(find "$WORK" -maxdepth 1 -type d -name 'Python-*' | head -n 1)
    [ -n "$src" ] || die "no Python-* dir in $SRC_TARBALL"
    STAGE="$PY313_HOME.staging"
    rm -rf "$STAGE"
    # Pristine sources, Debian's patches not applied; no --enable-optimizations (PGO triples the time).
    (cd "$src" && step ./configure --prefix="$PY313_HOME" --with-ensurepip=install &&
        step make -j"$(nproc)" && step make install DESTDIR="$STAGE")
    good_python "$STAGE$PY313_HOME/bin/python3.13" >/dev/null ||
        die "the CPython $SRC_VERSION just built lacks ssl/sqlite3/ctypes/lzma/bz2/zlib; see $BUILD_LOG"
    echo "CPython $SRC_VERSION from Debian's python3.13 source package, built by .ci/install_gym.sh" \
        >"$STAGE$PY313_HOME/$PY313_MARK"

    if [ -e "$PY313_HOME" ]; then
        [ -f "$PY313_HOME/$PY313_MARK" ] || die "$PY313_HOME exists and was not built by this script; move it away"
        rm -rf "$PY313_HOME"
    fi
    mkdir -p "$(dirname "$PY313_HOME")"
    mv "$STAGE$PY313_HOME" "$PY313_HOME"
    PY=$(good_python "$PY313_HOME/bin/python3.13") || die "$PY313_HOME/bin/python3.13 does not run after install"
    log "CPython $SRC_VERSION built in $((SECONDS - t0))s"
}

# ---------------------------------------------------------------- nemo-gym 0.7.0
install_gym_070() {
    local VENV=${GYMWATCH_GYM07_VENV:-/tmp/gymwatch-gymvenv-0.7.0}
    local PY t0

    # One install at a time per venv (two test runs may call this together).
    mkdir -p "$(dirname "$VENV")"
    exec 9>"$VENV.lock"
    flock 9

    if have_gym "$VENV" 0.7.0 && PY=$(venv_base_python "$VENV"); then
        log "reusing $VENV (nemo-gym 0.7.0)"
    else
        if find_python; then
            log "using $PY ($("$PY" -V))"
        else
            log "no Python >= 3.13.14 here (nemo-gym 0.7.0 needs one): building one"
            build_python
        fi
        t0=$SECONDS
        log "installing nemo-gym==0.7.0 and uv into $VENV (about 2 min)"
        # A venv on some other (too old) base python cannot take nemo-gym 0.7.0: remake it.
        if [ ! -x "$VENV/bin/python" ] || ! venv_base_python "$VENV" >/dev/null; then
            "$PY" -m venv --clear "$VENV"
        fi
        quiet "$VENV/bin/python" -m pip install -q --upgrade pip
        quiet "$VENV/bin/python" -m pip install -q "nemo-gym==0.7.0" uv
        have_gym "$VENV" 0.7.0 || die "nemo-gym 0.7.0 is not importable from $VENV"
        PY=$(venv_base_python "$VENV") || die "the base python of $VENV is gone"
        log "pip install done in $((SECONDS - t0))s"
    fi
    # The tests build the Gym servers' venvs under this dir (gym env start's cwd), so they are reused.
    mkdir -p "$VENV/work"
    dirname "$PY" >"$VENV/gym-python-bin"
    log "python: $(dirname "$PY")"
    log "ok: $VENV/bin/gym"
}

case "${1:-0.4.0}" in
    0.4.0) install_gym_040 ;;
    0.7.0) install_gym_070 ;;
    *) die "unsupported nemo-gym version '$1' (usage: install_gym.sh [0.4.0|0.7.0])" ;;
esac
