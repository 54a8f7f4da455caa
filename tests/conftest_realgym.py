"""Helpers shared by the launcher, simulator and real-Gym tests (imported, not a pytest conftest)."""

from __future__ import annotations

import json
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


@pytest.fixture
def run_dirs():
    """Run dirs a test launched: every process of each is stopped afterwards (by its marker)."""
    dirs: list[Path] = []
    yield dirs
    from gymwatch.launch.stop import stop_run

    for d in dirs:
        if (d / "gymwatch-manifest.json").exists():
            stop_run(d, grace=10, say=lambda s: None)
