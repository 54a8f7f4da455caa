"""`gymwatch run` / `stop` / `report` against the simulated Gym (fast): crash-safety, both flows,
startup failure and timeout, refusals, process facts."""

import json
import signal
import subprocess
import sys

import pytest

from conftest_realgym import file_has, free_port, gymwatch, marked, run_dirs, run_id, sim_gym, wait_for  # noqa: F401
from gymwatch.sim.collect import DATA

pytestmark = pytest.mark.timeout(180)


def head(port):
    return ["+head_server.host=127.0.0.1", f"+head_server.port={port}"]


def env_then_eval(speed, port, *extra_env):
    return ["--", "env", "start", "--resources-server", "mcqa", "--model-type", "openai_model",
            "++policy_api_key=sk-secret-1", f"+sim_speed={speed}", *head(port), *extra_env,
            "--then", "eval", "run", "--agent", "mcqa_simple_agent", "--input", str(DATA),
            "--num-repeats", "2", "--concurrency", "2", f"+sim_speed={speed}", *head(port)]


def test_sigkill_gymwatch_leaves_the_run_going_and_report_and_stop_pick_it_up(tmp_path, run_dirs):
    run_dir = tmp_path / "run"
    run_dirs.append(run_dir)
    gym = sim_gym(tmp_path)
    fg = subprocess.Popen([sys.executable, "-m", "gymwatch", "run", "--no-tui", "--gym", str(gym), "--cwd",
                           str(tmp_path), "--run-dir", str(run_dir), *env_then_eval(0.25, free_port())],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: file_has(run_dir / "gym_env_start.stdout.log", "servers ready. Waiting"), 30,
                 "gym waiting for servers")
        fg.send_signal(signal.SIGKILL)   # gymwatch dies before the eval has even started
        fg.wait(5)
    finally:
        if fg.poll() is None:
            fg.kill()
    rid = run_id(run_dir)
    assert marked(rid), "the Gym run must survive gymwatch"
    # The detached driver still starts the collection once the servers are ready.
    wait_for(lambda: (run_dir / "rollouts_aggregate_metrics.json").exists(), 90, "the collection to finish")
    wait_for(lambda: "returncode" in json.loads((run_dir / "gym_eval_run.status.json").read_text()), 10,
             "the collector's exit code")
    rep = gymwatch("report", "--format", "json", str(run_dir))
    data = json.loads(rep.stdout)
    assert data["verdict"] == "some_never_ran" and data["counts"]["completed"] == 9
    assert data["parent"]["alive"] is True and data["collector"]["alive"] is False
    stop = gymwatch("stop", "--grace", "10", str(run_dir))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert f"0 left with GYMWATCH_RUN_ID={rid}" in stop.stdout
    assert marked(rid) == []


def test_single_eval_run_flow(tmp_path, run_dirs):
    run_dir = tmp_path / "run"
    run_dirs.append(run_dir)
    port = free_port()
    res = gymwatch("run", "--no-tui", "--format", "json", "--stop-after", "--gym", str(sim_gym(tmp_path)),
                   "--cwd", str(tmp_path), "--run-dir", str(run_dir), "--", "eval", "run", "--agent",
                   "mcqa_simple_agent", "--input", str(DATA), "--num-repeats", "2", "--concurrency", "3",
                   "+sim_speed=0.05", *head(port), timeout=120)
    data = json.loads(res.stdout)
    assert data["counts"] == {"pending": 0, "completed": 9, "failed": 1, "never_ran": 2, "missing": 0}
    manifest = json.loads((run_dir / "gymwatch-manifest.json").read_text())
    assert [p["role"] for p in manifest["processes"]] == ["both"]
    assert "--no-serve" not in manifest["processes"][0]["argv"]
    assert marked(manifest["run_id"]) == []


def test_startup_failure_points_at_the_servers_own_line(tmp_path, run_dirs):
    run_dir = tmp_path / "run"
    run_dirs.append(run_dir)
    res = gymwatch("run", "--no-tui", "--format", "json", "--gym", str(sim_gym(tmp_path)), "--cwd", str(tmp_path),
                   "--run-dir", str(run_dir), *env_then_eval(0.05, free_port(), "+sim_fail_server=policy_model"))
    data = json.loads(res.stdout)
    assert res.returncode == 2 and data["verdict"] == "startup_failed"
    assert data["evidence"]["file"] == "gym_env_start.stderr.log"   # uvicorn logs to stderr, as in Gym
    assert data["evidence"]["text"].startswith("(policy_model) ") and "Errno 98" in data["evidence"]["text"]
    assert not data["collector"]["started"]
    assert json.loads((run_dir / "gym_env_start.status.json").read_text())["returncode"] == 1
    rid = run_id(run_dir)
    assert marked(rid), "Gym 0.4.0 leaves the other servers running"
    stop = gymwatch("stop", str(run_dir))
    assert stop.returncode == 0 and marked(rid) == []


def test_startup_timeout_says_what_is_pending_and_kills(tmp_path, run_dirs):
    run_dir = tmp_path / "run"
    run_dirs.append(run_dir)
    res = gymwatch("run", "--no-tui", "--startup-timeout", "8", "--kill-on-timeout", "--gym", str(sim_gym(tmp_path)),
                   "--cwd", str(tmp_path), "--run-dir", str(run_dir), *env_then_eval(1.0, free_port()))
    assert "startup timeout: not all servers ready after" in res.stderr
    assert "pending: mcqa" in res.stderr and "installing" in res.stderr
    assert "last line" in res.stderr
    assert f"0 left with GYMWATCH_RUN_ID={run_id(run_dir)}" in res.stderr   # the driver stopped it
    assert "startup timeout" in (run_dir / "gymwatch-launch.log").read_text()
    wait_for(lambda: not marked(run_id(run_dir)), 20, "every process of the run to be stopped")


def test_process_facts_show_a_server_installing(tmp_path, run_dirs):
    from gymwatch.launch.demo import demo_plan
    from gymwatch.launch.procfacts import server_processes
    from gymwatch.launch.runner import launch

    plan = demo_plan(tmp_path / "run", speed=1.0)
    run_dirs.append(plan.run_dir)
    data = launch(plan)
    facts = wait_for(lambda: (f := server_processes(data)).get("mcqa", {}).get("installing") and f, 20,
                     "mcqa's uv pip install")
    assert facts["mcqa"]["alive"] and facts["mcqa"]["rss"] > 0
    assert facts["mcqa"]["children"] >= 1


def test_refuses_a_run_dir_with_rollouts(tmp_path):
    run_dir = tmp_path / "old"
    run_dir.mkdir()
    (run_dir / "rollouts.jsonl").write_text('{"_ng_task_index": 0}\n')
    res = gymwatch("run", "--no-tui", "--gym", str(sim_gym(tmp_path)), "--run-dir", str(run_dir),
                   "--", "eval", "run", "--agent", "a")
    assert res.returncode == 3
    assert res.stderr.strip().count("\n") == 0 and "already holds rollouts" in res.stderr
    assert not (run_dir / "gymwatch-manifest.json").exists()


def test_missing_gym_is_one_line(tmp_path):
    res = gymwatch("run", "--no-tui", "--gym", "no-such-gym-xyz", "--run-dir", str(tmp_path / "r"),
                   "--", "env", "start")
    assert res.returncode == 3 and "not found on PATH" in res.stderr and "Traceback" not in res.stderr


def test_stop_on_a_non_run_is_one_line(tmp_path):
    res = gymwatch("stop", str(tmp_path))
    assert res.returncode == 3 and "manifest" in res.stderr and "Traceback" not in res.stderr


def test_closing_the_screen_can_stop_or_leave_the_run(tmp_path, run_dirs, capsys):
    from gymwatch.launch.demo import demo_plan
    from gymwatch.launch.runner import ask_on_quit, is_live, launch

    plan = demo_plan(tmp_path / "run", speed=1.0)
    run_dirs.append(plan.run_dir)
    launch(plan)
    ask_on_quit(plan.run_dir, "leave")
    assert is_live(plan.run_dir)
    assert f"gymwatch attach {plan.run_dir}" in capsys.readouterr().out
    ask_on_quit(plan.run_dir, "stop")
    assert not is_live(plan.run_dir)


def test_env_only_returns_once_every_server_is_ready_and_leaves_them_up(tmp_path, run_dirs):
    run_dir = tmp_path / "run"
    run_dirs.append(run_dir)
    res = gymwatch("run", "--no-tui", "--format", "json", "--gym", str(sim_gym(tmp_path)), "--cwd", str(tmp_path),
                   "--run-dir", str(run_dir), "--", "env", "start", "+sim_speed=0.05", *head(free_port()))
    data = json.loads(res.stdout)
    assert res.returncode == 0
    assert data["parent"]["all_ready"] and all(s["became_ready"] for s in data["servers"])
    assert "gymwatch stop" in res.stderr and marked(run_id(run_dir))


def test_attach_on_a_launched_run_can_stop_it_on_quit(tmp_path, run_dirs):
    from gymwatch.launch.demo import demo_plan
    from gymwatch.launch.runner import is_live, launch
    from test_processes import run_screen

    plan = demo_plan(tmp_path / "run", speed=1.0)
    run_dirs.append(plan.run_dir)
    launch(plan)
    assert is_live(plan.run_dir)
    code, _, out = run_screen(["attach", str(plan.run_dir), "--on-quit", "stop"], keys=b"q")
    assert code == 0, out
    assert wait_for(lambda: not is_live(plan.run_dir), 60, "the run to stop")


def test_stop_sweeps_a_marked_process_that_appears_after_the_first_sweep(tmp_path):
    """Ray's raylet starts its agents late: one seen only after a sweep must not be left running
    while stop says "0 left"."""
    import os
    import subprocess
    import sys

    from gymwatch.launch.spawn import MARKER_VAR
    from gymwatch.launch.stop import StopResult, _sweep_until_quiet

    rid = f"late-{os.getpid()}"
    marked_env = {**os.environ, MARKER_VAR: rid}
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    first = subprocess.Popen(sleeper, env=marked_env)
    late = ("import os, subprocess, sys, time; time.sleep(1.0); "
            f"subprocess.Popen({sleeper!r}, env={{**os.environ, {MARKER_VAR!r}: {rid!r}}}); time.sleep(60)")
    launcher = subprocess.Popen([sys.executable, "-c", late])        # unmarked, like a parent outside the run
    try:
        assert wait_for(lambda: marked(rid), 10, "the first marked process")
        res = StopResult(rid)
        left = _sweep_until_quiet(rid, {os.getpid()}, res, say=lambda s: None, quiet=2.5)
        assert left == [] and marked(rid) == []
        assert len(res.stopped) == 2, res.stopped
    finally:
        launcher.kill()
        first.kill()
        for p in marked(rid):
            p.kill()


def test_a_process_that_wrote_over_the_start_of_its_environment_is_still_found(tmp_path):
    """Ray's agents retitle themselves (setproctitle) by writing over the start of their
    environment block; psutil then reads no environment at all, and stop missed them."""
    import os
    import subprocess
    import sys

    import psutil

    from gymwatch.core.procs import env_value
    from gymwatch.launch.spawn import MARKER_VAR

    rid = f"retitled-{os.getpid()}"
    clobber = ("import time\n"
               "fields = open('/proc/self/stat').read().rsplit(')', 1)[1].split()\n"
               "env_start = int(fields[47])       # field 50 of /proc/PID/stat\n"
               "with open('/proc/self/mem', 'r+b') as mem:\n"
               "    mem.seek(env_start); mem.write(b'\\0' * 64)\n"
               "print('ok', flush=True)\n"
               "time.sleep(60)\n")
    env = {"FILLER": "x" * 200, MARKER_VAR: rid, "PATH": os.environ.get("PATH", "")}
    child = subprocess.Popen([sys.executable, "-c", clobber], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ok"
        proc = psutil.Process(child.pid)
        assert proc.environ().get(MARKER_VAR) is None           # what psutil sees
        assert env_value(proc, MARKER_VAR) == rid
        assert [p.pid for p in marked(rid)] == [child.pid]
    finally:
        child.kill()
        child.wait()


GYM_LIKE = r'''
import os, signal, subprocess, sys, time
CHILD = """
import os, time
if os.environ.get("OWN_PGID"):
    os.setpgid(0, 0)
st = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
start, end = int(st[47]), int(st[48])          # env_start, env_end: what /proc/PID/environ shows
with open("/proc/self/mem", "r+b", 0) as mem:  # zero it, as setproctitle does (Ray's agents)
    mem.seek(start)
    mem.write(b"\\0" * (end - start))
open(os.environ["READY_FILE"], "w").write(str(os.getpid()))
while True:
    time.sleep(1)
"""
subprocess.Popen([sys.executable, "-c", CHILD])
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))     # gym exits on SIGTERM, its child stays
while True:
    time.sleep(1)
'''


@pytest.mark.parametrize("own_group", [False, True], ids=["same_group", "own_group"])
def test_stop_ends_a_process_that_wiped_its_marker(tmp_path, own_group, monkeypatch):
    """Ray retitles its agents with setproctitle, which zeroes /proc/PID/environ (marker
    included): stop still finds them in the run's own sessions, ends them, and says 0 left only
    once they are gone."""
    import os

    import psutil

    from gymwatch.launch import manifest as mf
    from gymwatch.launch.spawn import gym_env, spawn
    from gymwatch.launch.stop import stop_run

    script = tmp_path / "gym_like.py"
    script.write_text(GYM_LIKE)
    ready = tmp_path / "child.pid"
    monkeypatch.setenv("READY_FILE", str(ready))
    if own_group:
        monkeypatch.setenv("OWN_PGID", "1")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    rid = mf.new_run_id()
    data = mf.build(rid, "0.4.0", "127.0.0.1:1", None, None, {}, {"mode": "env"})
    entry = spawn("env", [sys.executable, str(script)], run_dir, tmp_path, gym_env(rid))
    data["processes"].append(entry)
    mf.write(run_dir, data)
    wait_for(lambda: ready.exists() and ready.read_text(), 20, "the child to wipe its environment")
    child = int(ready.read_text())
    assert f"GYMWATCH_RUN_ID={rid}".encode() not in open(f"/proc/{child}/environ", "rb").read()
    try:
        res = stop_run(run_dir, grace=5)
        assert res.ok
        assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    finally:
        if psutil.pid_exists(child):
            os.kill(child, signal.SIGKILL)


def test_the_markdown_report_after_a_watch_has_the_startup_timeline_it_timed(tmp_path, run_dirs):
    """`gymwatch run --no-tui --format md` (a CI job): the report is read after the run, but keeps
    the times its watch saw: each server's steps in a Mermaid gantt, results by when they came."""
    run_dir = tmp_path / "run"
    run_dirs.append(run_dir)
    res = gymwatch("run", "--no-tui", "--format", "md", "--stop-after", "--gym", str(sim_gym(tmp_path)),
                   "--cwd", str(tmp_path), "--run-dir", str(run_dir), *env_then_eval(0.05, free_port()), timeout=120)
    md = res.stdout
    assert "```mermaid\ngantt\n" in md and "(critical path)" in md
    assert "install 161 packages" in md or "venv create" in md
    assert "by when gymwatch saw each result arrive" in md
    plain = gymwatch("report", "--format", "md", str(run_dir)).stdout      # the same run read after the fact
    assert "```mermaid" not in plain and "No times:" in plain
