"""End to end against a real nemo-gym 0.7.0 (installed by `.ci/install_gym.sh 0.7.0`: its own venv
on a CPython >= 3.13.14), mcqa with a loopback OpenAI stub. Never skipped: without the Gym venv
these tests fail and say how to get it. Four servers (0.7 adds an environment server), the
model-endpoint wait, and a stop that leaves no process of the run behind (Ray's agents included)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest_realgym import MCQA, file_has, free_port, gymwatch, in_sessions, marked, ray_tmpdir, realgym_lock, run_dirs, run_id, stub, wait_for  # noqa: F401

pytestmark = [pytest.mark.realgym, pytest.mark.timeout(900)]

VENV = Path(os.environ.get("GYMWATCH_GYM07_VENV", "/tmp/gymwatch-gymvenv-0.7.0"))
DATA = VENV / "lib" / "python3.13" / "site-packages" / "resources_servers" / "mcqa" / "data" / "example.jsonl"


@pytest.fixture(scope="module")
def gym_env(realgym_lock) -> dict:
    gym, pybin = VENV / "bin" / "gym", VENV / "gym-python-bin"
    if not gym.exists() or not pybin.exists():
        pytest.fail(f"no real NeMo Gym 0.7.0 at {VENV}: run `bash .ci/install_gym.sh 0.7.0` (make test does); "
                    "these tests must not be skipped", pytrace=False)
    env = dict(os.environ)
    env.update(PATH=f"{VENV / 'bin'}:{pybin.read_text().strip()}:{env.get('PATH', '')}",
               UV_PYTHON_DOWNLOADS="never", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_TMPDIR=ray_tmpdir())
    (VENV / "work").mkdir(exist_ok=True)
    return env


def _command(policy_port: int, head_port: int, *env_extra: str) -> list[str]:
    head = ["++head_server.host=127.0.0.1", f"++head_server.port={head_port}"]
    return ["--", "env", "start", "--resources-server", "mcqa", "--model-type", "openai_model",
            f"++policy_base_url=http://127.0.0.1:{policy_port}/v1", "++policy_api_key=dummy",
            "++policy_model_name=stub-model", *head, *env_extra,
            "--then", "eval", "run", "--agent", "mcqa_simple_agent", "--input", str(DATA),
            "--num-repeats", "2", "--concurrency", "2", *head]


def _run(env: dict, run_dir: Path, cmd: list[str]) -> subprocess.CompletedProcess:
    return gymwatch("run", "--no-tui", "--format", "json", "--startup-timeout", "600", "--gym",
                    str(VENV / "bin" / "gym"), "--cwd", str(VENV / "work"), "--run-dir", str(run_dir), *cmd,
                    env=env, timeout=840)


def _stop_leaves_nothing(env: dict, run_dir: Path) -> str:
    rid = run_id(run_dir)
    stop = gymwatch("stop", str(run_dir), env=env, timeout=180)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert f"0 left with GYMWATCH_RUN_ID={rid}" in stop.stdout
    time.sleep(3)                       # Ray's agents start late: nothing may come back either
    assert marked(rid) == [], [p.name() for p in marked(rid)]
    assert in_sessions(run_dir) == [], [p.name() for p in in_sessions(run_dir)]   # retitled, marker zeroed
    return stop.stdout


def test_07_collects_ten_trials_on_four_servers_and_stop_leaves_nothing(gym_env, stub, tmp_path, run_dirs):
    run_dir = tmp_path / "run"
    run_dirs.append(run_dir)
    t0 = time.monotonic()
    res = _run(gym_env, run_dir, _command(stub, free_port()))
    print(f"real gym 0.7.0 run: {time.monotonic() - t0:.1f}s")
    assert res.returncode == 0, res.stderr[-3000:]
    rep = json.loads(res.stdout)
    assert rep["verdict"] == "ok", rep["reason"]
    assert rep["counts"]["completed"] == 10 and rep["info"]["gym_version"] == "0.7.0"
    kinds = {s["name"]: s["kind"] for s in rep["servers"]}
    assert kinds == {"mcqa": "resources", "mcqa_simple_agent": "agent", "mcqa_environment_server": "environment",
                     "policy_model": "model"}
    assert all(s["became_ready"] for s in rep["servers"])
    assert rep["parent"]["spinup_limit"] == 600                  # --startup-timeout passed to Gym as its limit
    launch_log = (run_dir / "gymwatch-launch.log").read_text()
    assert "ready to collect after" in launch_log
    assert marked(run_id(run_dir)), "the servers stay up after the collection"
    # gymwatch itself can die at any time: the run is Gym's, stop still finds all of it
    print(_stop_leaves_nothing(gym_env, run_dir))


def test_07_model_endpoint_that_never_answers_is_startup_failed(gym_env, tmp_path, run_dirs):
    run_dir = tmp_path / "run"
    run_dirs.append(run_dir)
    dead = free_port()                                           # nothing listens there
    res = _run(gym_env, run_dir, _command(dead, free_port(), "++model_endpoint_readiness_timeout_seconds=15"))
    rep = json.loads(res.stdout)
    assert res.returncode == 2 and rep["verdict"] == "startup_failed", rep["reason"]
    assert "never answered" in rep["evidence"]["text"] and rep["evidence"]["file"] == "gym_env_start.stdout.log"
    assert rep["parent"]["model_endpoints"]["gave_up"] is not None
    assert not rep["collector"]["started"]
    wait_for(lambda: file_has(run_dir / "gymwatch-launch.log", "gym eval run not started"), 30,
             "the launch driver to say it did not start the collection")
    _stop_leaves_nothing(gym_env, run_dir)


def test_07_sigkilled_gymwatch_leaves_the_run_to_stop(gym_env, stub, tmp_path, run_dirs):
    """gymwatch killed while Gym is starting: Gym and the driver go on and start the collection;
    `stop` ends every process of the run."""
    run_dir = tmp_path / "run"
    run_dirs.append(run_dir)
    args = [sys.executable, "-m", "gymwatch", "run", "--no-tui", "--gym", str(VENV / "bin" / "gym"),
            "--cwd", str(VENV / "work"), "--run-dir", str(run_dir), *_command(stub, free_port())]
    watcher = subprocess.Popen(args, env=gym_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: (run_dir / "gymwatch-manifest.json").exists(), 60, "the manifest")
    watcher.send_signal(signal.SIGKILL)
    watcher.wait()
    wait_for(lambda: (run_dir / "rollouts_aggregate_metrics.json").exists(), 600, "the collection to finish")
    rep = json.loads(gymwatch("report", str(run_dir), "--format", "json", env=gym_env).stdout)
    assert rep["verdict"] == "ok" and rep["counts"]["completed"] == 10, rep["reason"]
    _stop_leaves_nothing(gym_env, run_dir)
