"""End to end against a real nemo-gym 0.7.0 (installed by `.ci/install_gym.sh 0.7.0`: its own venv
on a CPython >= 3.13.14), mcqa with a loopback OpenAI stub. Never skipped: without the Gym venv
these tests fail and say how to get it. Four servers (0.7 adds an environment server), the
model-endpoint wait, and a stop that leaves no process of the run behind (Ray's agents included)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest_realgym import (  # noqa: F401
    MCQA,
    file_has,
    free_port,
    gymwatch,
    in_sessions,
    listening,
    marked,
    ray_tmpdir,
    realgym_lock,
    run_dirs,
    run_id,
    stub,
    wait_for,
)

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


# Prompts of the mcqa example data (tasks 1, 3 and 4), which the stub answers badly while FLAG exists.
RETRY_RULES = [{"match": "which of the following scenarios best", "answer": "fail"},              # task 1: both fail
               {"match": "statements about genetic screening and testing is true", "answer": "empty"},  # task 3: never ran
               {"match": "In metagenomics", "answer": "fail", "from": 2}]                         # task 4: rollout 1 fails


def test_07_retry_input_collects_exactly_the_trials_that_did_not_complete(gym_env, tmp_path, run_dirs):
    """A run where 3 trials fail and 2 never run; `report --retry-input`; the printed command run
    as printed, against the run's servers (the stub answering well now): its rollouts are exactly
    those 5 trials, from their materialized rows, Gym numbering each task's rollouts from 0."""
    flag, port, head = tmp_path / "answer-badly", free_port(), free_port()
    flag.touch()
    stub = subprocess.Popen(
        [sys.executable, str(Path(__file__).parents[1] / "scripts" / "slow_stub.py"), str(port)],
        env={**os.environ, "STUB_DELAY": "0.2", "STUB_RULES": json.dumps(RETRY_RULES), "STUB_RULES_WHILE": str(flag),
             "STUB_LOG": str(tmp_path / "stub_requests.log")},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: listening(port), 20, "the stub policy")
        run_dir = tmp_path / "run"
        run_dirs.append(run_dir)
        hs = ["++head_server.host=127.0.0.1", f"++head_server.port={head}"]
        res = _run(gym_env, run_dir, [
            "--", "env", "start", "--resources-server", "mcqa", "--model-type", "openai_model",
            f"++policy_base_url=http://127.0.0.1:{port}/v1", "++policy_api_key=dummy", "++policy_model_name=stub-model",
            *hs, "--then", "eval", "run", "--agent", "mcqa_simple_agent", "--input", str(DATA), "--num-repeats", "2",
            "--concurrency", "1", "+route_failures_to_sidecar=true", *hs])      # one at a time: rollout 0 asks first
        rep = json.loads(res.stdout)
        status = {(t["task_index"], t["rollout_index"]): t["status"] for t in rep["trials"]}
        assert {k for k, s in status.items() if s != "completed"} == {(1, 0), (1, 1), (3, 0), (3, 1), (4, 1)}, status
        assert status[1, 0] == status[4, 1] == "failed" and status[3, 0] == "never_ran"
        gym_files = {p: p.read_bytes() for p in run_dir.glob("rollouts*")}

        retry = tmp_path / "retry.jsonl"
        out = gymwatch("report", str(run_dir), "--format", "json", "--retry-input", str(retry), env=gym_env)
        assert out.returncode == 1, out.stderr
        ri = json.loads(out.stdout)["rerun"]["retry_input"]
        assert ri["command_from"] == "manifest" and ri["rows"] == 5 and ri["command"] in out.stderr
        mapping = {(x["task_index"], x["rollout_index"]): x["new_rollout_index"] for x in ri["gym_indices"]}
        assert mapping == {(1, 0): 0, (1, 1): 1, (3, 0): 0, (3, 1): 1, (4, 1): 0}
        materialized = {(r["_ng_task_index"], r["_ng_rollout_index"]): line for line in
                        (run_dir / "rollouts_materialized_inputs.jsonl").read_bytes().splitlines(keepends=True)
                        for r in [json.loads(line)]}
        assert retry.read_bytes() == b"".join(materialized[k] for k in sorted(mapping))

        flag.unlink()                                              # the endpoint answers well from now on
        argv = shlex.split(ri["command"])                          # run as printed: same head port, new output
        done = subprocess.run(argv, cwd=VENV / "work", env=gym_env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

        output = Path(ri["output"])
        assert output.parent.parent == tmp_path and not output.is_relative_to(run_dir)
        rows = [json.loads(line) for line in output.read_bytes().splitlines()]
        got = sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows)
        assert got == sorted((t, n) for (t, _), n in mapping.items())      # exactly the retried trials
        # Gym's own materialized inputs of the rerun: the retry rows, only the rollout index renumbered
        again = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for line in
                 output.with_name("rollouts_materialized_inputs.jsonl").read_bytes().splitlines()
                 for r in [json.loads(line)]}
        for (task, rollout), new in mapping.items():
            assert again[task, new] == {**json.loads(materialized[task, rollout]), "_ng_rollout_index": new}
        rerun_rep = json.loads(gymwatch("report", str(output.parent), "--format", "json", env=gym_env).stdout)
        assert rerun_rep["verdict"] == "ok" and rerun_rep["counts"]["completed"] == 5, rerun_rep["reason"]
        assert {p: p.read_bytes() for p in run_dir.glob("rollouts*")} == gym_files     # the run itself untouched
        _stop_leaves_nothing(gym_env, run_dir)
    finally:
        stub.kill()
        stub.wait()
