"""Helpers shared by the launcher, simulator and real-Gym tests (imported, not a pytest conftest)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[1]
MCQA = REPO / "tests" / "fixtures" / "gym-0.4.0-mcqa"
PY313 = Path("/root/.pyenv/versions/3.13.0")


def gymwatch(*args: str, env: dict | None = None, timeout: float = 300, cwd: Path | None = None
             ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gymwatch", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_id(run_dir: Path) -> str:
    return json.loads((run_dir / "gymwatch-manifest.json").read_text())["run_id"]


def marked(rid: str) -> list:
    from gymwatch.launch.stop import marked as _marked

    return _marked(rid)


def in_sessions(run_dir: Path) -> list:
    """Live processes in a session the launcher started for the run (each gym wrapper and the
    driver leads its own), marker shown or not: a process that retitles itself with setproctitle
    (Ray's ray::DashboardAgent) can zero its /proc/PID/environ, so `marked` alone misses it."""
    import os

    import psutil

    data = json.loads((run_dir / "gymwatch-manifest.json").read_text())
    leaders = {e.get("pgid") for e in data.get("processes") or []} | {(data.get("driver") or {}).get("pid")}
    leaders.discard(None)
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if (os.getsid(p.pid) in leaders and p.status() != psutil.STATUS_ZOMBIE
                    and p.create_time() >= data["created"] - 1):
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out


def wait_for(cond: Callable[[], object], timeout: float, what: str, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def file_has(path: Path, text: str) -> bool:
    try:
        return text in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def sim_gym(tmp: Path) -> Path:
    """A `gym` executable that is the simulator, so `gymwatch run --gym` drives it like a real one."""
    exe = tmp / "gym"
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} -m gymwatch.sim \"$@\"\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture(scope="module")
def realgym_lock():
    """Real Gym runs on a shared machine take /tmp/realgym.lock (other sessions and CI run Gym too).
    Reentrant within the process: the real-Slurm tests' `slurm_gym` holds the same lock."""
    from slurmgym import gym_lock

    with gym_lock():
        yield


def ray_tmpdir() -> str:
    """A Ray temp dir of the run's own (short: Ray's socket paths must fit in 107 bytes), removed
    when the test session ends (the runs in it are stopped by then)."""
    import atexit
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="gwray-", dir="/tmp")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@pytest.fixture
def run_dirs():
    """Run dirs a test launched: every process of each is stopped afterwards (by its marker)."""
    dirs: list[Path] = []
    yield dirs
    from gymwatch.launch.stop import stop_run

    for d in dirs:
        if (d / "gymwatch-manifest.json").exists():
            stop_run(d, grace=10, say=lambda s: None)


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    """An OpenAI-compatible stub policy on a free loopback port (the one the runs were recorded with)."""
    port = free_port()
    log = tmp_path_factory.mktemp("stub")
    p = subprocess.Popen([sys.executable, str(MCQA / "stub_openai.py"), str(port)],
                         env={**os.environ, "STUB_LOG": str(log / "stub_requests.log")},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for(lambda: listening(port), 20, "the stub policy")
    yield port
    p.kill()
    p.wait()


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
