"""A run whose processes cannot be seen (Gym on a compute node, gymwatch on a login node reading
the shared filesystem) is judged by its files; shutdown tracebacks are not errors."""

import os
import time

from gymwatch.core.session import RunSession
from gymwatch.core.verdict import verdict
from gymwatch.report import to_json
from runbuilder import Run, rollout


def open_checked(root) -> RunSession:
    """A session that looks for processes (and finds none: the run is elsewhere)."""
    s = RunSession.open(str(root))
    s.refresh_processes()
    s.poll()
    return s


def age(root, seconds: float) -> None:
    for dirpath, _, names in os.walk(root):
        for n in names:
            t = time.time() - seconds
            os.utime(os.path.join(dirpath, n), (t, t))


def test_collection_going_on_elsewhere_is_collecting_not_incomplete(tmp_path):
    run = Run(tmp_path)
    run.expect(200)
    run.rows("", *[rollout(t) for t in range(76)])
    s = open_checked(tmp_path)
    v = verdict(s.state)
    assert v.name == "collecting" and "no gym process visible on this machine" in v.reason
    assert to_json(s.state)["counts"]["missing"] == 0
    age(tmp_path, 11 * 60)               # ten minutes without a write: it has ended
    s = open_checked(tmp_path)
    v = verdict(s.state)
    assert v.name == "incomplete" and "no output for 11 min and no gym process visible" in v.reason
    assert to_json(s.state)["counts"]["missing"] == 124


def test_servers_starting_elsewhere_are_starting_not_startup_failed(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "Waiting for servers to spin up",
              "0 / 2 servers ready. Waiting for servers to spin up: ['env', 'env_agent']")
    run.server_log("env", "Resolved 161 packages in 3s")
    s = open_checked(tmp_path)
    assert verdict(s.state).name == "starting"
    age(tmp_path, 3600)
    s = open_checked(tmp_path)
    v = verdict(s.state)
    assert v.name == "startup_failed" and "no output for 60 min" in v.reason


def test_shutdown_tracebacks_are_not_errors(tmp_path):
    run = Run(tmp_path)
    run.ready_server("env", 15000)
    run.server_log("env", "INFO:     Shutting down", "Traceback (most recent call last):",
                   '  File "app.py", line 3, in run', "RuntimeError: event loop closed")
    run.ready_server("agent", 15001)
    run.server_log("agent", "Traceback (most recent call last):", '  File "asyncio/runners.py", line 1',
                   "asyncio.exceptions.CancelledError")
    run.ready_server("model", 15002)
    run.server_log("model", "Traceback (most recent call last):", '  File "x.py", line 1',
                   "ValueError: a real one", "Traceback (most recent call last):", "KeyboardInterrupt")
    s = RunSession.open(str(tmp_path), check_processes=False)
    s.poll(final=True)
    errs = {n: srv.error_count for n, srv in s.state.servers.items()}
    assert errs == {"env": 0, "agent": 0, "model": 2}
    assert [e.text for e in s.state.servers["model"].errors] == ["(model) Traceback (most recent call last):",
                                                                  "(model) ValueError: a real one"]


def test_a_server_left_running_after_gym_ended_is_an_orphan(tmp_path):
    """Gym stops its servers' shell wrappers; a server that survives keeps its port. The pid comes
    from the server's own log, and is believed only while it still runs Python from that venv."""
    import subprocess
    import sys

    from gymwatch.core import procs
    from gymwatch.core.model import RunState
    from gymwatch.core.reducer import Reducer

    child = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "up\n"   # exec'd: before that, /proc shows no command line
        assert procs.server_process_alive(child.pid, None)
        venv = os.path.dirname(os.path.dirname(sys.executable))      # this interpreter's prefix
        assert procs.server_process_alive(child.pid, venv) == (venv in sys.executable)
        assert not procs.server_process_alive(child.pid, "/elsewhere/a_agent/.venv")
        state = RunState(root=str(tmp_path))
        r = Reducer(state)
        r.server_log_line("a_agent", "logs/a_agent.log", 1, f"INFO:     Started server process [{child.pid}]")
        r.orphans({"a_agent": child.pid})
        s = state.servers["a_agent"]
        assert s.orphaned and f"pid {child.pid}" in s.phase and to_json(state)["servers"][0]["orphaned"]
        r.orphans({})
        assert not s.orphaned
    finally:
        child.kill()
        child.wait()
    assert not procs.server_process_alive(child.pid, None)


def test_orphans_are_looked_for_only_once_gym_ended(tmp_path, monkeypatch):
    from gymwatch.core import procs

    run = Run(tmp_path)
    run.server_log("a_agent", "INFO:     Started server process [123]",
                   "INFO:     Uvicorn running on http://127.0.0.1:8001 (Press CTRL+C to quit)")
    monkeypatch.setattr(procs, "server_process_alive", lambda pid, venv: pid == 123)
    s = open_checked(tmp_path)
    assert s._orphans() == {}                       # gym env start may still be running
    s.state.parent.started, s.state.parent.finished = True, True
    assert s._orphans() == {"a_agent": 123}


def test_a_collection_seen_finishing_before_its_rows_file_was_found_is_not_ok_with_nothing(tmp_path):
    """Gym writes its rows, then prints that it finished: a screen that read the line before it
    looked for the rows file again must still find the rows in the same poll."""
    run = Run(tmp_path)
    run.lines("gym_eval_run.stdout.log", "Collecting rollouts:   0%|          | 0/3 [00:00<?, ?it/s]")
    s = RunSession.open(str(tmp_path), check_processes=False)
    s.poll()
    assert s.layout.rollouts is None
    run.expect(3)
    run.rows("", *[rollout(t) for t in range(3)])
    run.finish()
    s.poll()                                  # within the second between two looks at the layout
    v = verdict(s.state)
    assert v.name == "ok" and v.reason == "3 trials completed"


def test_a_finished_collection_with_no_rows_at_all_measured_nothing(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_eval_run.stdout.log", "Collecting rollouts:   0%|          | 0/3 [00:00<?, ?it/s]")
    run.finish()
    s = RunSession.open(str(tmp_path), check_processes=False)
    s.poll(final=True)
    v = verdict(s.state)
    assert v.name == "incomplete" and "no rollouts were found" in v.reason and v.exit_code == 1
