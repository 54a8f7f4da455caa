"""Start one gym process: own session, output to files, the run marker in its environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import psutil

from ..core.layout import BOTH, ENV, EVAL
from ..core.procs import RUN_ID_VAR
from ..core.redact import redact_argv

MARKER_VAR = RUN_ID_VAR
# Captured-stream file stems the core recognises (layout._STREAM_RE).
STEMS = {ENV: "gym_env_start", EVAL: "gym_eval_run", BOTH: "gym_eval_run"}


class SpawnError(Exception):
    pass


def gym_env(run_id: str, base: Optional[dict] = None) -> dict:
    env = dict(os.environ if base is None else base)
    env[MARKER_VAR] = run_id
    env.setdefault("PYTHONUNBUFFERED", "1")   # gym's prints reach the files line by line
    # Ray retitles its processes (ray::DashboardAgent, ray-dashboard-JobHead-0) with setproctitle,
    # which zeroes /proc/PID/environ, marker included, unless SPT_NOENV is set (the title is then
    # limited to the length of the process's argv): without it `stop` cannot see them.
    env.setdefault("SPT_NOENV", "1")
    return env


def read_status(path: str | os.PathLike) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def spawn(role: str, argv: list[str], run_dir: Path, cwd: Path, env: dict, timeout: float = 20.0) -> dict:
    """Launch `argv` under the status wrapper; return its manifest process entry."""
    stem = STEMS[role]
    out, err = run_dir / f"{stem}.stdout.log", run_dir / f"{stem}.stderr.log"
    status = run_dir / f"{stem}.status.json"
    wrapper = [sys.executable, "-m", "gymwatch.launch.wrap", str(status), "--", *argv]
    with open(out, "ab") as fo, open(err, "ab") as fe:
        proc = subprocess.Popen(wrapper, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe,
                                start_new_session=True)
    deadline = time.monotonic() + timeout
    info: dict = {}
    while time.monotonic() < deadline:
        info = read_status(status)
        if "pid" in info or proc.poll() is not None:
            break
        time.sleep(0.02)
    if not info.get("pid"):
        why = info.get("error") or f"the launcher wrapper exited ({proc.poll()})"
        raise SpawnError(f"cannot start {argv[0]}: {why}")
    try:
        create_time = psutil.Process(info["pid"]).create_time()
    except psutil.Error:
        create_time = None   # already gone: the status file will hold its exit code
    return {
        "role": role, "argv": redact_argv(argv), "pid": info["pid"], "create_time": create_time,
        "stdout": str(out), "stderr": str(err), "cwd": str(cwd),
        "pgid": proc.pid, "wrapper_pid": proc.pid, "status_file": str(status),
    }


def planned(role: str, argv: list[str], run_dir: Path, cwd: Path) -> dict:
    """An entry for a process that starts later (eval after readiness): streams named, no pid yet."""
    stem = STEMS[role]
    return {"role": role, "argv": redact_argv(argv), "pid": None, "create_time": None,
            "stdout": str(run_dir / f"{stem}.stdout.log"), "stderr": str(run_dir / f"{stem}.stderr.log"),
            "cwd": str(cwd), "status_file": str(run_dir / f"{stem}.status.json"), "state": "planned"}
