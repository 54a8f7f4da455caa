"""Bad-input corpus: every case ends in a usable model or one clear line, never a traceback."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CASES
from gymwatch.core import tail
from gymwatch.core.session import RunSession, read_run
from gymwatch.core.verdict import counts, verdict
from gymwatch.report import render, to_json
from runbuilder import Run, rollout


def cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "gymwatch", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def open_session(root):
    s = RunSession.open(str(root), check_processes=False)
    s.poll()
    return s


def test_partial_last_line_is_held_back_while_live_and_reported_when_final(tmp_path):
    run = Run(tmp_path)
    run.expect(2)
    run.rows("", rollout(0))
    run.write("rollouts.jsonl", json.dumps(rollout(1))[:50])
    s = open_session(tmp_path)
    assert counts(s.state)["completed"] == 1 and s.state.malformed_count == 0
    run.write("rollouts.jsonl", json.dumps(rollout(1))[50:] + "\n")
    s.poll()
    assert counts(s.state)["completed"] == 2 and s.state.malformed_count == 0
    run.write("rollouts.jsonl", '{"cut": ')
    s.poll(final=True)
    assert s.state.malformed_count == 1 and s.state.malformed[0].line == 3


def test_line_cut_inside_a_utf8_sequence(tmp_path):
    run = Run(tmp_path)
    data = json.dumps(rollout(0, note="héllo — ✓"), ensure_ascii=False).encode() + b"\n"
    cut = data.index("✓".encode()) + 1
    run.write("rollouts.jsonl", data[:cut])
    run.write("rollouts_materialized_inputs.jsonl", b"")
    s = open_session(tmp_path)
    run.write("rollouts.jsonl", data[cut:])
    s.poll()
    assert counts(s.state)["completed"] == 1 and s.state.malformed_count == 0


def test_invalid_utf8_in_rows_and_logs(tmp_path):
    run = Run(tmp_path)
    run.write("rollouts.jsonl", b'{"_ng_task_index": 0, "x": "\xff\xfe"}\n')
    run.write("rollouts_materialized_inputs.jsonl", b"")
    run.write("logs/env.log", b"(env) ERROR:    bad \xff bytes \xc3\n")
    data = to_json(read_run(str(tmp_path), check_processes=False).state)
    assert data["malformed"]["count"] == 1 and data["malformed"]["lines"][0]["line"] == 1
    assert data["servers"][0]["error_count"] == 1 and "\ufffd" in data["servers"][0]["last_line"]


def test_ten_megabyte_single_line(tmp_path):
    run = Run(tmp_path)
    big = rollout(0, blob="x" * (10 << 20))
    run.rows("", big, rollout(1))
    run.write("rollouts_materialized_inputs.jsonl", b"")
    run.server_log("env", "y" * (10 << 20), "INFO:     Uvicorn running on http://127.0.0.1:5 (Press CTRL+C to quit)")
    state = read_run(str(tmp_path), check_processes=False).state
    assert counts(state)["completed"] == 2
    assert state.servers["env"].state == "ready" and state.servers["env"].ready_evidence.line == 2


def test_line_longer_than_the_cap_is_cut_not_fatal(tmp_path, monkeypatch):
    monkeypatch.setattr(tail, "MAX_LINE", 1000)
    run = Run(tmp_path)
    run.rows("", rollout(0, blob="x" * 5000), rollout(1))
    run.write("rollouts_materialized_inputs.jsonl", b"")
    state = read_run(str(tmp_path), check_processes=False).state
    assert counts(state)["completed"] == 1
    assert state.malformed[0].line == 1 and "invalid JSON" in state.malformed[0].reason


@pytest.mark.parametrize("row", [
    {"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": "1.0", "response": {"output": [], "usage": []}},
    {"_ng_task_index": "0", "_ng_rollout_index": 0, "reward": 1},
    {"_ng_task_index": True, "_ng_rollout_index": False},
    {"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {"output": None}},
    {"_ng_task_index": 0, "_ng_rollout_index": 0, "response": None, "agent_ref": []},
    {"_ng_task_index": 1e300, "_ng_rollout_index": [], "reward": {"a": 1}},
    {"_ng_task_index": 0, "_ng_rollout_index": 0, "response": {"output": [], "usage": {"input_tokens": "0"}}},
    {},
])
def test_wrong_types_everywhere(tmp_path, row):
    run = Run(tmp_path)
    run.expect(1)
    run.rows("", row)
    run.rows("_failures", row)
    run.finish()
    state = read_run(str(tmp_path), check_processes=False).state
    render(state, "json")
    render(state, "text")
    assert verdict(state).name in ("ok", "incomplete", "some_never_ran")


def test_unknown_keys_are_ignored(tmp_path):
    run = Run(tmp_path)
    run.expect(1)
    run.rows("", rollout(0, brand_new_field={"deep": [1, 2]}, _ng_future_key=3))
    run.finish()
    data = to_json(read_run(str(tmp_path), check_processes=False).state)
    assert data["verdict"] == "ok" and data["malformed"]["count"] == 0


@pytest.mark.parametrize("value", ["/", "/tmp/ru", "'/tmp/run/rollouts.js", ""])
def test_hydra_config_read_mid_write(tmp_path, value):
    """The collector's Hydra config names where the rollouts will go; read while it is written, the
    value is cut short: no rollouts file is guessed from it (a bare `/` raised ValueError)."""
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "hydra" / "eval_run" / ".hydra").mkdir(parents=True)
    (run / "hydra" / "eval_run" / ".hydra" / "config.yaml").write_text(f"output_jsonl_fpath: {value}")
    session = RunSession.open(str(run), check_processes=False)
    session.poll(final=True)
    assert session.layout.rollouts is None and verdict(session.state).name == "starting"


def test_a_copied_runs_config_naming_another_runs_dir_mixes_in_none_of_its_output(tmp_path):
    """A run copied from elsewhere keeps its Hydra config's absolute `output_jsonl_fpath`; on this
    machine that path may be another run's: its captured output is not this run's."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "gym_eval_run.stdout.log").write_text("Finished rollout collection!\n")
    run = tmp_path / "run"
    (run / "hydra" / "eval_run" / ".hydra").mkdir(parents=True)
    (run / "hydra" / "eval_run" / ".hydra" / "config.yaml").write_text(f"output_jsonl_fpath: {other}/rollouts.jsonl\n")
    (run / "gym_eval_run.stdout.log").write_text("Error: Input file not found: 'x.jsonl' (--input).\n")
    session = RunSession.open(str(run), check_processes=False)
    session.poll(final=True)
    assert [s.path for s in session.layout.streams] == [run / "gym_eval_run.stdout.log"]
    assert not session.state.collector.finished and session.state.collector.error.line == 1


def test_rollouts_truncated_and_rewritten_while_watched(tmp_path):
    run = Run(tmp_path)
    run.expect(3)
    run.rows("", rollout(0), rollout(1), rollout(2))
    s = open_session(tmp_path)
    assert counts(s.state)["completed"] == 3
    (tmp_path / "rollouts.jsonl").write_text(json.dumps(rollout(2, reward=0.0)) + "\n")
    ch = s.poll()
    assert ch.reset
    c = counts(s.state)
    assert c["completed"] == 1 and c["pending"] == 2
    assert s.state.trials[(2, 0)].reward == 0.0


def test_log_rotated_while_watched(tmp_path):
    run = Run(tmp_path)
    run.server_log("env", "Traceback (most recent call last):", "ValueError: boom")
    s = open_session(tmp_path)
    assert s.state.servers["env"].error_count == 2   # the Traceback line and the exception line
    os.rename(tmp_path / "logs" / "env.log", tmp_path / "logs" / "env.log.1")
    run.server_log("env", "INFO:     Uvicorn running on http://127.0.0.1:9 (Press CTRL+C to quit)")
    s.poll()
    env = s.state.servers["env"]
    assert env.state == "ready" and env.ready_evidence.line == 1


def test_run_dir_deleted_while_watched(tmp_path):
    import shutil

    root = tmp_path / "run"
    run = Run(root)
    run.expect(1)
    run.rows("", rollout(0))
    s = open_session(root)
    shutil.rmtree(root)
    s.poll()
    s.poll(final=True)
    assert counts(s.state)["completed"] == 1   # what was read stays; nothing crashes


def test_file_without_read_permission(tmp_path, monkeypatch):
    run = Run(tmp_path)
    run.expect(1)
    run.rows("", rollout(0))
    real_open = os.open

    def deny(path, *a, **kw):
        if str(path).endswith("rollouts.jsonl"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *a, **kw)

    monkeypatch.setattr(os, "open", deny)
    state = read_run(str(tmp_path), check_processes=False).state
    assert state.malformed_count == 0             # not an unusable line (it was `rollouts.jsonl:0`)
    assert state.unreadable["rollouts.jsonl"].reason == "Permission denied"
    text, code = render(state, "text")
    assert code == 3 and text.startswith("UNREADABLE: cannot read rollouts.jsonl: Permission denied")
    assert "rollouts.jsonl:0" not in text


def test_symlink_loop(tmp_path):
    run = Run(tmp_path)
    run.expect(1)
    (tmp_path / "logs").mkdir()
    os.symlink(tmp_path / "logs" / "loop.log", tmp_path / "logs" / "loop.log")
    os.symlink(tmp_path, tmp_path / "self")
    state = read_run(str(tmp_path), check_processes=False).state
    assert state.trials
    proc = cli("report", tmp_path / "logs" / "loop.log")
    assert proc.returncode == 3 and len(proc.stderr.strip().splitlines()) == 1


def test_empty_dir_and_empty_files(tmp_path):
    proc = cli("report", tmp_path)
    assert proc.returncode == 3 and "not a Gym run" in proc.stderr and "Traceback" not in proc.stderr
    run = Run(tmp_path)
    run.write("rollouts.jsonl", b"")
    run.write("rollouts_materialized_inputs.jsonl", b"")
    proc = cli("report", tmp_path, "--format", "json", "--no-process-check")
    assert proc.returncode == 0 and json.loads(proc.stdout)["verdict"] == "collecting"


def test_dir_with_many_unrelated_files(tmp_path):
    junk = tmp_path / "junk"
    junk.mkdir()
    for i in range(100_000):
        (junk / f"f{i}.txt").touch()
    proc = cli("report", junk)
    assert proc.returncode == 3 and "not a Gym run" in proc.stderr


def test_garbage_in_every_file_of_a_real_run(tmp_path):
    import shutil

    root = tmp_path / "run"
    shutil.copytree(CASES / "aborted_500", root)
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".log", ".jsonl"):
            with open(p, "ab") as fh:
                fh.write(b"\x1b]52;c;ZXZpbA==\x07\x00\xff{[b]oops[/b]\r\n\x1b[2J")
    proc = cli("report", root, "--no-process-check")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    assert proc.stderr.count("\n") == 1 and "unusable line" in proc.stderr


def tree_hash(root: Path) -> dict:
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir",
                                         st.st_mtime_ns)
    return out


def test_report_never_writes_into_the_run(tmp_path):
    import shutil

    root = tmp_path / "run"
    shutil.copytree(CASES / "evaluator_bundle", root)
    before = tree_hash(root)
    for fmt in ("text", "json", "md"):
        cli("report", root, "--format", fmt)
    s = RunSession.open(str(root))
    for _ in range(3):
        s.poll()
    assert tree_hash(root) == before


def test_markup_and_escapes_in_text_reports(tmp_path):
    run = Run(tmp_path)
    run.lines("gym_env_start.stderr.log", "Traceback (most recent call last):",
              "RuntimeError: Process `env` finished unexpectedly!")
    run.server_log("env", "ERROR:    [Errno 98] \x1b[31m[b]red[/b]\x1b[0m [@click=app.quit]x[/] \x1b]0;pwned\x07")
    for fmt in ("text", "md"):
        proc = cli("report", tmp_path, "--format", fmt, "--no-process-check")
        assert proc.returncode == 2
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
        assert "[b]red[/b]" in proc.stdout and "[@click=app.quit]" in proc.stdout


def test_secrets_in_overrides_and_configs_are_redacted(tmp_path):
    run = Run(tmp_path)
    run.lines("hydra/env_start/.hydra/overrides.yaml", "- ++policy_api_key=sk-live-123",
              "- ++judge_token=tok-456", "- ++policy_model_name=m")
    run.lines("hydra/env_start/.hydra/config.yaml", "policy_api_key: sk-live-123", "hf_token: tok-456",
              "db_password: pw-789", "policy_model_name: m", "config_paths:",
              "- /x/resources_servers/envx/configs/envx.yaml")
    run.lines("gym_env_start.stdout.log", "0 / 1 servers ready. Waiting for servers to spin up: ['envx']")
    for fmt in ("json", "text", "md"):
        out = cli("report", tmp_path, "--format", fmt, "--no-process-check").stdout
        for secret in ("sk-live-123", "tok-456", "pw-789"):
            assert secret not in out
    data = json.loads(cli("report", tmp_path, "--format", "json", "--no-process-check").stdout)
    assert data["info"]["environment"] == "envx" and data["info"]["model"] == "m"
    assert "<redacted>" in json.dumps(data["info"]["settings"])


def test_debug_flag_shows_traceback_otherwise_one_line(tmp_path, monkeypatch):
    run = Run(tmp_path)
    run.expect(1)
    env = dict(os.environ, GYMWATCH_TEST_CRASH="1")
    code = ("import sys, gymwatch.report as r\n"
            "def boom(*a, **k): raise RuntimeError('synthetic')\n"
            "r.render = boom\n"
            "from gymwatch.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    plain = subprocess.run([sys.executable, "-c", code, "report", str(tmp_path)], capture_output=True, text=True,
                           env=env, timeout=60)
    assert plain.returncode == 70 and "Traceback" not in plain.stderr   # internal: not a verdict, not input
    assert plain.stderr.strip().count("\n") == 0 and "--debug" in plain.stderr
    debug = subprocess.run([sys.executable, "-c", code, "--debug", "report", str(tmp_path)], capture_output=True,
                           text=True, env=env, timeout=60)
    assert "Traceback" in debug.stderr


def test_non_finite_numbers_are_not_counts_or_rewards(tmp_path):
    run = Run(tmp_path)
    run.expect(2)
    run.write("rollouts.jsonl", b'{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": NaN, "response": '
                                b'{"output": [1], "usage": {"input_tokens": 1e400, "output_tokens": NaN}}}\n')
    run.rows("", rollout(1, reward=0.5))
    run.finish()
    proc = cli("report", tmp_path, "--format", "json", "--no-process-check")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    t0 = data["trials"][0]
    assert t0["status"] == "completed" and t0["reward"] is None and t0["input_tokens"] is None
    assert data["mean_reward"] == 0.5


def test_a_reader_that_stops_early_ends_the_report_quietly():
    """`gymwatch report RUN --format json | head -c 100`: no traceback, no 'internal error'."""
    run = Path(__file__).parent / "fixtures" / "gym-0.7.0-cases-extra" / "g07_200_trials"
    p = subprocess.Popen([sys.executable, "-m", "gymwatch", "report", str(run), "--format", "json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.read(100)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(60) == 141 and err == ""
