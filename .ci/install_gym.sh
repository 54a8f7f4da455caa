#!/usr/bin/env bash
# A real NeMo Gym 0.4.0 for gymwatch's end-to-end tests (tests/test_realgym.py).
# Idempotent: an existing venv with nemo-gym 0.4.0 and uv is reused as is.
#   venv:   ${GYMWATCH_GYM_VENV:-/tmp/gymwatch-gymvenv}
#   python: /root/.pyenv/versions/3.13.0 (nemo-gym 0.5+ needs >= 3.13.14; 0.4.0 runs on 3.13.0)
set -euo pipefail
PY_HOME=${GYMWATCH_GYM_PYTHON_HOME:-/root/.pyenv/versions/3.13.0}
VENV=${GYMWATCH_GYM_VENV:-/tmp/gymwatch-gymvenv}
PY="$PY_HOME/bin/python3.13"

if [ ! -x "$PY" ]; then
    echo "install_gym.sh: ERROR: Python 3.13.0 not found at $PY_HOME (need $PY)." >&2
    echo "install_gym.sh: the real-Gym tests cannot run without it; install it (pyenv install 3.13.0)." >&2
    exit 1
fi

have_gym() {
    [ -x "$VENV/bin/gym" ] && [ -x "$VENV/bin/uv" ] &&
        "$VENV/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("nemo-gym") != "0.4.0")' 2>/dev/null
}

if have_gym; then
    echo "install_gym.sh: reusing $VENV (nemo-gym 0.4.0)"
else
    echo "install_gym.sh: installing nemo-gym==0.4.0 and uv into $VENV (about 1.5 min)"
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
    # (pip warns about every unreachable find-links location on some machines: keep the log readable)
    quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; }
    quiet "$VENV/bin/python" -m pip install -q --upgrade pip
    quiet "$VENV/bin/python" -m pip install -q "nemo-gym==0.4.0" uv
    have_gym || { echo "install_gym.sh: ERROR: nemo-gym 0.4.0 is not importable from $VENV" >&2; exit 1; }
fi
# The tests build the Gym servers' venvs under this dir (gym env start's cwd), so they are reused.
mkdir -p "$VENV/work"
echo "install_gym.sh: ok: $VENV/bin/gym"
