"""End to end against a real nemo-gym 0.4.0 (installed by .ci/install_gym.sh), mcqa with a
loopback OpenAI stub. Never skipped: without the Gym venv these tests fail and say how to get it.

The server venvs are built under ${GYMWATCH_GYM_VENV}/work (the cwd of gym env start), so only
the first run on a machine pays the 1-2 min cold build."""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest_realgym import (  # noqa: F401
    MCQA,
    PY313,
    free_port,
    gymwatch,
    in_sessions,
    marked,
    ray_tmpdir,
    realgym_lock,
    run_dirs,
    run_id,
    stub,
    wait_for,
)

pytestmark = [pytest.mark.realgym, pytest.mark.timeout(900)]

VENV = Path(os.environ.get("GYMWATCH_GYM_VENV", "/tmp/gymwatch-gymvenv"))


@pytest.fixture(scope="module")
def gym_env(realgym_lock) -> dict:
    gym = VENV / "bin" / "gym"
    if not gym.exists():
        pytest.fail(f"no real NeMo Gym at {gym}: run .ci/install_gym.sh (or set GYMWATCH_GYM_VENV to a venv "
                    f"with nemo-gym==0.4.0 and uv); these tests must not be skipped", pytrace=False)
    if not (PY313 / "bin").is_dir():
        pytest.fail(f"Python 3.13.0 missing at {PY313}: Gym's server venvs need it", pytrace=False)
    env = dict(os.environ)
    env.update(PATH=f"{VENV / 'bin'}:{PY313 / 'bin'}:{env.get('PATH', '')}", UV_PYTHON_DOWNLOADS="never",
               RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_TMPDIR=ray_tmpdir())
    (VENV / "work").mkdir(exist_ok=True)
    return env


def _site_packages() -> Path:
    return Path(glob.glob(str(VENV / "lib" / "python3.13" / "site-packages"))[0])


def _command(stub_port: int, head_port: int, *env_extra: str) -> list[str]:
    head = ["++head_server.host=127.0.0.1", f"++head_server.port={head_port}"]   # never clash on 11000
    data = _site_packages() / "resources_servers" / "mcqa" / "data" / "example.jsonl"
    return ["--", "env", "start", "--resources-server", "mcqa", "--model-type", "openai_model",
            f"++policy_base_url=http://127.0.0.1:{stub_port}/v1", "++policy_api_key=dummy",
            "++policy_model_name=stub-model", *head, *env_extra,
            "--then", "eval", "run", "--agent", "mcqa_simple_agent", "--input", str(data),
            "--num-repeats", "2", "--concurrency", "2", *head]


def _run(env: dict, run_dir: Path, cmd: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    res = gymwatch("run", "--no-tui", "--format", "json", "--startup-timeout", "600", "--gym",
                   str(VENV / "bin" / "gym"), "--cwd", str(VENV / "work"), "--run-dir", str(run_dir), *cmd,
                   env=env, timeout=840)
    return res, time.monotonic() - t0


def test_mcqa_collects_ten_trials_and_stop_leaves_nothing(gym_env, stub, tmp_path, run_dirs):
    run_dir = tmp_path / "run"
    run_dirs.append(run_dir)
    res, took = _run(gym_env, run_dir, _command(stub, free_port()))
    print(f"real gym run: {took:.1f}s")
    assert res.returncode == 0, res.stderr[-3000:]
    rep = json.loads(res.stdout)
    assert rep["verdict"] == "ok", rep["reason"]
    assert rep["counts"]["completed"] == 10 and rep["total"] == 10
    assert all(s["became_ready"] for s in rep["servers"]) and len(rep["servers"]) == 3
    assert rep["info"]["gym_version"] == "0.4.0"
    assert "dummy" not in (run_dir / "gymwatch-manifest.json").read_text()
    rid = run_id(run_dir)
    assert marked(rid), "the servers stay up after the collection (no --stop-after)"
    t0 = time.monotonic()
    stop = gymwatch("stop", str(run_dir), env=gym_env, timeout=120)
    print(f"gymwatch stop: {time.monotonic() - t0:.1f}s\n{stop.stdout}")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert f"0 left with GYMWATCH_RUN_ID={rid}" in stop.stdout
    assert marked(rid) == []
    assert in_sessions(run_dir) == [], [p.name() for p in in_sessions(run_dir)]   # retitled, marker zeroed


def test_server_that_cannot_bind_is_startup_failed_with_its_own_line(gym_env, stub, tmp_path, run_dirs):
    run_dir = tmp_path / "run"
    run_dirs.append(run_dir)
    with socket.socket() as held:   # a silent listener on policy_model's port
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        res, took = _run(gym_env, run_dir, _command(
            stub, free_port(), f"++policy_model.responses_api_models.openai_model.port={port}"))
    print(f"real gym startup failure: {took:.1f}s")
    rep = json.loads(res.stdout)
    assert res.returncode == 2 and rep["verdict"] == "startup_failed", rep["reason"]
    assert "policy_model" in rep["reason"]
    # No +nemo_gym_log_dir: the server's own output is its `(policy_model) ` lines in gym's captured
    # streams; uvicorn's bind error goes to stderr.
    assert rep["evidence"]["file"] in ("gym_env_start.stderr.log", "gym_env_start.stdout.log")
    assert rep["evidence"]["text"].startswith("(policy_model) ") and "Errno 98" in rep["evidence"]["text"]
    assert not rep["collector"]["started"]
    rid = run_id(run_dir)
    stop = gymwatch("stop", str(run_dir), env=gym_env, timeout=120)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert marked(rid) == []
    assert in_sessions(run_dir) == [], [p.name() for p in in_sessions(run_dir)]   # retitled, marker zeroed
