"""A file or directory of a run that cannot be read is said once, naming it, in the report's notes,
on stderr and on the screen; it never becomes an unusable line or trial verdicts. Rows that cannot
be read make the run's verdict `unreadable` (exit 3): their trials are unknown, not missing.

These run as root too: a directory where a file belongs (EISDIR) and a patched os.open / os.scandir
fail for root as for anyone; the chmod test checks whichever holds for the user running it."""

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from conftest import CASES
from gymwatch.core.session import RunSession, read_run
from gymwatch.core.verdict import EXIT_INPUT, verdict
from gymwatch.junit import iter_junit
from gymwatch.report import render, to_json
from gymwatch.tui.summary import reason_text
from runbuilder import Run, rollout


def cli(*args):
    return subprocess.run([sys.executable, "-m", "gymwatch", *map(str, args)], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture
def run_copy(tmp_path):
    root = tmp_path / "run"
    shutil.copytree(CASES / "mixed_ok", root)
    return root


def rows_a_directory(root):
    """rollouts.jsonl a directory where Gym's file belongs: EISDIR for every user, root too."""
    (root / "rollouts.jsonl").unlink()
    (root / "rollouts.jsonl").mkdir()


@pytest.mark.parametrize("fmt", ["text", "json", "md", "junit"])
def test_unreadable_rows_are_an_unreadable_run_not_missing_trials(run_copy, fmt):
    rows_a_directory(run_copy)
    proc = cli("report", run_copy, "--format", fmt, "--no-process-check")
    assert proc.returncode == EXIT_INPUT
    assert proc.stderr.strip().splitlines() == ["gymwatch: cannot read rollouts.jsonl: Is a directory"]
    assert "rollouts.jsonl:0" not in proc.stdout
    if fmt == "json":
        data = json.loads(proc.stdout)
        assert data["verdict"] == "unreadable" and data["exit_code"] == EXIT_INPUT
        assert data["reason"] == "cannot read rollouts.jsonl: Is a directory: what the run's trials did is unknown (10 expected)"
        assert data["counts"]["missing"] == 0 and data["counts"]["pending"] == 10
        assert data["malformed"]["count"] == 0
        assert data["unreadable"] == [{"file": "rollouts.jsonl", "reason": "Is a directory", "rows": True}]
        assert "cannot read rollouts.jsonl: Is a directory" in data["notes"]
    if fmt == "text":
        assert proc.stdout.startswith("UNREADABLE: cannot read rollouts.jsonl: Is a directory")
        assert "  note: cannot read rollouts.jsonl: Is a directory" in proc.stdout
        assert "missing" not in proc.stdout and "unknown: rollouts.jsonl could not be read" in proc.stdout


def test_permission_denied_on_the_rows_as_a_unit(tmp_path, monkeypatch):
    run = Run(tmp_path)
    run.expect(2)
    run.rows("", rollout(0))
    run.rows("_failures", {"_ng_task_index": 1, "_ng_rollout_index": 0, "_ng_failure_class": "agent_run_error"})
    run.finish()
    real_open = os.open

    def deny(path, *a, **kw):
        if str(path).endswith("rollouts_failures.jsonl"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *a, **kw)

    monkeypatch.setattr(os, "open", deny)
    state = read_run(str(tmp_path), check_processes=False).state
    v = verdict(state)
    assert (v.name, v.exit_code) == ("unreadable", EXIT_INPUT)
    assert v.reason.startswith("cannot read rollouts_failures.jsonl: Permission denied")
    assert {t.status for t in state.trials.values()} == {"completed", "pending"}     # task 1: unknown
    junit = "".join(iter_junit(state, v))
    assert "unknown: cannot read rollouts_failures.jsonl: Permission denied" in junit
    assert "still pending" not in junit
    # the screen says it in the verdict's reason
    assert "cannot read rollouts_failures.jsonl: Permission denied" in reason_text(state, v, "").plain
    # once it can be read, it is read: nothing of the refusal stays
    monkeypatch.setattr(os, "open", real_open)
    s = RunSession.open(str(tmp_path), check_processes=False)
    s.poll(final=True)
    assert not s.state.unreadable and verdict(s.state).name == "some_failed"


def test_an_unlistable_logs_dir_is_said_not_skipped(run_copy, monkeypatch):
    real_scandir = os.scandir

    def deny(path="."):
        if os.fspath(path).endswith(os.sep + "logs"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", deny)
    state = read_run(str(run_copy), check_processes=False).state
    v = verdict(state)
    assert v.name == "ok" and v.exit_code == 0        # the rows were read: the verdict stands ...
    assert v.reason == "10 trials completed; not read: cannot read logs/: Permission denied"   # ... on what it lacked
    data = to_json(state, v)
    assert data["unreadable"] == [{"file": "logs/", "reason": "Permission denied", "rows": False}]
    assert "cannot read logs/: Permission denied" in data["notes"]
    assert "  note: cannot read logs/: Permission denied" in render(state, "text")[0]
    assert "cannot read logs/: Permission denied" in reason_text(state, v, "").plain


def test_an_unreadable_server_log_is_not_an_unusable_line(run_copy):
    log = run_copy / "logs" / "policy_model.log"
    log.unlink()
    log.mkdir()              # listed as a name ending .log, but no file: skipped, not an error
    (run_copy / "gym_eval_run.stdout.log").unlink()
    (run_copy / "gym_eval_run.stdout.log").mkdir()     # a captured stream that is a directory
    state = read_run(str(run_copy), check_processes=False).state
    assert state.malformed_count == 0
    assert state.unreadable["gym_eval_run.stdout.log"].reason == "Is a directory"
    assert "not read: cannot read gym_eval_run.stdout.log: Is a directory" in verdict(state).reason


def test_chmod_000_as_whoever_runs_it(run_copy):
    """Root reads a chmod 000 file (it ignores the mode); anyone else cannot. Either way the report
    is right for what could be read: nothing skipped."""
    rows = run_copy / "rollouts.jsonl"
    logs = run_copy / "logs"
    rows.chmod(0)
    logs.chmod(0)
    try:
        readable = os.access(rows, os.R_OK) and os.access(logs, os.R_OK | os.X_OK)
        proc = cli("report", run_copy, "--format", "json", "--no-process-check")
        data = json.loads(proc.stdout)
        if readable:
            assert (proc.returncode, data["verdict"], data["unreadable"]) == (0, "ok", [])
        else:
            assert (proc.returncode, data["verdict"]) == (EXIT_INPUT, "unreadable")
            assert {u["file"] for u in data["unreadable"]} == {"rollouts.jsonl", "logs/"}
            assert "gymwatch: cannot read rollouts.jsonl: Permission denied" in proc.stderr
    finally:
        rows.chmod(stat.S_IRUSR | stat.S_IWUSR)
        logs.chmod(stat.S_IRWXU)
