"""`gymwatch demo --fast --no-tui`: the simulated Gym through the real launcher, and its formats."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest_realgym import file_has, free_port, gymwatch, marked, run_id, wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("demo") / "run"
    t0 = time.monotonic()
    res = gymwatch("demo", "--fast", "--no-tui", "--format", "json", "--run-dir", str(run_dir), timeout=90)
    elapsed = time.monotonic() - t0
    yield run_dir, res, elapsed
    from gymwatch.launch.stop import stop_run

    stop_run(run_dir, grace=5, say=lambda s: None)


def test_demo_report_has_the_failed_and_never_ran_trials(demo):
    run_dir, res, elapsed = demo
    assert res.returncode == 1, res.stderr   # some trials never ran
    rep = json.loads(res.stdout)
    assert rep["verdict"] == "some_never_ran"
    assert rep["counts"]["completed"] == 9 and rep["counts"]["failed"] == 1 and rep["counts"]["never_ran"] == 2
    never = [t for t in rep["trials"] if t["status"] == "never_ran"]
    assert [(t["task_index"], t["rollout_index"]) for t in never] == [(4, 0), (4, 1)]
    assert all(t["withheld_reward"] == 0.0 and t["reward"] is None for t in never)
    # the failed trial's traceback in the agent's output says nothing of them: their rows alone
    assert [[e["file"] for e in t["cause_chain"]] for t in never] == [["rollouts.jsonl"]] * 2
    assert all(t["cause"] is None for t in never) and rep["related"] == []
    failed = [t for t in rep["trials"] if t["status"] == "failed"]
    assert failed[0]["failure_class"] == "agent_run_error"
    assert failed[0]["evidence"]["file"] == "rollouts_failures.jsonl"
    assert {s["name"]: s["became_ready"] for s in rep["servers"]} == {
        "mcqa": True, "mcqa_simple_agent": True, "policy_model": True}
    assert next(s for s in rep["servers"] if s["name"] == "mcqa")["packages"] == 161
    assert rep["info"]["run_id"] and rep["aggregate_metrics_written"]
    assert elapsed < 30, f"demo --fast took {elapsed:.1f}s"


def test_demo_stops_everything_it_started(demo):
    run_dir, _, _ = demo
    assert marked(run_id(run_dir)) == []


def test_demo_writes_gym_formats(demo):
    run_dir, _, _ = demo
    out = (run_dir / "gym_env_start.stdout.log").read_text() + (run_dir / "gym_env_start.stderr.log").read_text()
    assert "0 / 3 servers ready. Waiting for servers to spin up: ['mcqa', 'mcqa_simple_agent', 'policy_model']" in out
    assert "All 3 / 3 servers ready! Polling every 60s" in out
    assert "# Server Instances" in out and "'port': " in out
    assert "(mcqa) Resolved 161 packages" in out and "(mcqa) Installed 161 packages" in out
    assert "(policy_model) INFO:     Uvicorn running on http://127.0.0.1:" in out
    assert "NeMo Gym finished!" in out
    ev = (run_dir / "gym_eval_run.stdout.log").read_text()
    assert "Finished rollout collection!" in ev
    mat = (run_dir / "rollouts_materialized_inputs.jsonl").read_text().splitlines()
    assert len(mat) == 12 and json.loads(mat[0])["_ng_task_index"] == 0
    agg = json.loads((run_dir / "rollouts_aggregate_metrics.json").read_text())
    assert agg[0]["agent_ref"] == {"name": "mcqa_simple_agent"}
    fail = json.loads((run_dir / "rollouts_failures.jsonl").read_text())
    assert fail["_ng_failure_class"] == "agent_run_error"
    manifest = json.loads((run_dir / "gymwatch-manifest.json").read_text())
    assert "demo-key" not in json.dumps(manifest)
    assert {p["role"] for p in manifest["processes"]} == {"env", "eval"}
    status = json.loads((run_dir / "gym_eval_run.status.json").read_text())
    assert status["returncode"] == 0


def test_sim_env_start_runs_until_sigterm(tmp_path):
    port = free_port()
    out = tmp_path / "out.log"
    env = {**os.environ, "GYMWATCH_RUN_ID": f"simtest-{port}", "PYTHONUNBUFFERED": "1"}
    with open(out, "wb") as fh:
        p = subprocess.Popen([sys.executable, "-m", "gymwatch.sim", "env", "start", "+sim_speed=0.05",
                              f"+head_server.port={port}", f"hydra.run.dir={tmp_path / 'h'}"],
                             stdout=fh, stderr=subprocess.DEVNULL, cwd=tmp_path, env=env, start_new_session=True)
    try:
        wait_for(lambda: file_has(out, "# Server Instances"), 30, "all servers ready")
        time.sleep(0.5)
        assert p.poll() is None, "env start must keep running after readiness"
        p.send_signal(signal.SIGTERM)
        assert p.wait(15) == 0
        assert file_has(out, "NeMo Gym finished!")
        wait_for(lambda: not marked(f"simtest-{port}"), 10, "no sim process left")
    finally:
        if p.poll() is None:
            p.kill()
        for q in marked(f"simtest-{port}"):
            q.kill()


async def test_the_demos_merged_log_is_in_the_order_gym_received_the_lines(demo):
    """`m` on the demo read file by file (all of stderr, then all of stdout): the simulated Gym
    wrote nothing to order its lines by. Like a real Gym run with `+nemo_gym_log_dir`, each server
    now has its own log and prints the same lines to Gym's stdout, so `m` interleaves the servers
    as Gym received their lines: the agent and the model are up while mcqa still builds its venv."""
    from tuihelpers import fixture_app, view_settled, wait_for as settle

    run_dir, _, _ = demo
    logs = run_dir / "logs"
    assert sorted(p.name for p in logs.glob("*.log")) == ["mcqa.log", "mcqa_simple_agent.log", "policy_model.log"]
    stdout = (run_dir / "gym_env_start.stdout.log").read_text()
    for line in (logs / "mcqa.log").read_text().splitlines():
        assert line in stdout                       # tee: the log's lines are Gym's stdout's too
    app = fixture_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await settle(pilot, lambda: app.run_shown)
        app.board.focus()
        await pilot.press("m")
        view = app.pane.view
        assert await settle(pilot, lambda: view_settled(app))
        assert view.order_basis == "Gym's output"
        rows = [(view.logs.labels[src], text) for src, _, text in (view.logs.text(r) for r in range(view.row_count))]
        built = next(i for i, (label, text) in enumerate(rows) if label == "mcqa" and "Installed 161 packages" in text)
        up = [i for i, (label, text) in enumerate(rows) if label != "mcqa" and "Uvicorn running on" in text]
        assert len(up) == 2 and max(up) < built, (up, built)


def test_sim_with_a_log_dir_and_no_skip_dies_as_gym_040_does(tmp_path):
    """With `+nemo_gym_log_dir` and uv run for the agent and the model (whose requirements are only
    Gym itself), Gym 0.4.0 loses them to its pipefail bug: their output ends with uv's, Gym names
    the first one dead. The sim does the same, and gymwatch says what it is."""
    from gymwatch.core.session import read_run

    port = free_port()
    env = {**os.environ, "GYMWATCH_RUN_ID": f"simtest-{port}", "PYTHONUNBUFFERED": "1"}
    with open(tmp_path / "gym_env_start.stdout.log", "wb") as out, \
            open(tmp_path / "gym_env_start.stderr.log", "wb") as err:
        p = subprocess.Popen([sys.executable, "-m", "gymwatch.sim", "env", "start", "+sim_speed=0.05",
                              f"+head_server.port={port}", f"+nemo_gym_log_dir={tmp_path / 'logs'}",
                              f"hydra.run.dir={tmp_path / 'hydra' / 'env_start'}"],
                             stdout=out, stderr=err, cwd=tmp_path, env=env, start_new_session=True)
    try:
        assert p.wait(30) == 1
        # Gym exits at the first death it sees: the other server may still be finishing its uv step
        log = tmp_path / "logs" / "mcqa_simple_agent.log"
        wait_for(lambda: log.read_text().splitlines()[-1:] == ["(mcqa_simple_agent) Checked 3 packages in 37ms"],
                 10, "the agent's output ends with uv's")
        assert "finished unexpectedly!" in (tmp_path / "gym_env_start.stderr.log").read_text()
        state = read_run(str(tmp_path), check_processes=False).state
        dead = {n for n, s in state.servers.items() if s.silent_death}
        assert dead == {"mcqa_simple_agent", "policy_model"}, {n: s.state for n, s in state.servers.items()}
    finally:
        if p.poll() is None:
            p.kill()
        wait_for(lambda: [q.kill() for q in marked(f"simtest-{port}")] == [], 10, "no sim process left")
