"""`gymwatch report RUN --retry-input FILE`: which trials a rerun collects, the file's rows (the
materialized ones, byte for byte), the printed command, and what is refused. The real collection
of such a file is in tests/test_realgym07.py."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from conftest import CASES07, RECORDED070
from gymwatch.cli import main
from gymwatch.core import rerun
from gymwatch.core.session import read_run
from gymwatch.retry import _rerun_argv
from runbuilder import Run, rollout

SIDECAR = CASES07 / "g07_run_failures_sidecar"        # tasks 1 and 3 failed (4 failure rows), 6 completed


def materialized(run: Path) -> dict[tuple, bytes]:
    out = {}
    for line in (run / "rollouts_materialized_inputs.jsonl").read_bytes().splitlines(keepends=True):
        row = json.loads(line)
        out[(row["_ng_task_index"], row["_ng_rollout_index"])] = line
    return out


def report(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["report", *args])
    out, err = capsys.readouterr()
    return code, out, err


def command_of(out: str) -> list[str]:
    line = next(x for x in out.splitlines() if x.startswith("  gym ") or x.startswith("  /") and " eval run " in x)
    return shlex.split(line)


def test_failed_trials_rows_are_the_materialized_rows_byte_for_byte(tmp_path, capsys):
    target = tmp_path / "retry.jsonl"
    code, out, _ = report(capsys, str(SIDECAR), "--retry-input", str(target))
    assert code == 1                                       # the report's own exit code (some failed)
    rows = materialized(SIDECAR)
    assert target.read_bytes() == b"".join(rows[k] for k in [(1, 0), (1, 1), (3, 0), (3, 1)])
    argv = command_of(out)
    assert argv[:4] == ["gym", "eval", "run", "--no-serve"]
    assert "+agent_name=mcqa_simple_agent" in argv and "+num_samples_in_parallel=2" in argv
    assert "+route_failures_to_sidecar=true" in argv
    assert argv[argv.index("--input") + 1] == str(target)
    assert argv[argv.index("--num-repeats") + 1] == "1"      # the rows are already repeated
    assert argv[argv.index("--output") + 1] == str(tmp_path / "retry-rollouts" / "rollouts.jsonl")
    assert not any(a.startswith(("+input_jsonl_fpath", "+output_jsonl_fpath", "+num_repeats")) for a in argv)
    assert "rerun: 4 of 4 trial(s) that did not complete can be collected again" in out


def test_json_says_what_the_file_holds_and_how_gym_numbers_it(tmp_path, capsys):
    target = tmp_path / "r.jsonl"
    code, out, err = report(capsys, str(SIDECAR), "--format", "json", "--retry-input", str(target))
    rep = json.loads(out)
    assert code == rep["exit_code"] == 1
    r = rep["rerun"]
    assert (r["rerunnable"], r["not_rerunnable"], r["tried_before"], r["max_attempts"]) == (4, [], [], 3)
    ri = r["retry_input"]
    assert ri["file"] == str(target) and ri["rows"] == 4 and ri["command_from"] == "Hydra config"
    assert [(x["task_index"], x["rollout_index"], x["new_rollout_index"]) for x in ri["gym_indices"]] == [
        (1, 0, 0), (1, 1, 1), (3, 0, 0), (3, 1, 1)]
    assert ri["command"] in err                             # printed for a person too, off stdout


def test_never_ran_and_missing_trials_are_rerun_with_gyms_numbering(tmp_path, capsys):
    never = CASES07 / "g07_some_never_ran"                 # tasks 1 and 4 never ran
    target = tmp_path / "never.jsonl"
    report(capsys, str(never), "--retry-input", str(target))
    rows = materialized(never)
    assert target.read_bytes() == b"".join(rows[k] for k in [(1, 0), (1, 1), (4, 0), (4, 1)])
    # interrupted after 4 rows: the other 6 are missing
    run = RECORDED070 / "g070_collector_interrupted"
    state = read_run(str(run), check_processes=False).state
    done = {k for k, t in state.trials.items() if t.status == "completed"}
    target = tmp_path / "missing.jsonl"
    _, out, _ = report(capsys, str(run), "--no-process-check", "--retry-input", str(target))
    rows = materialized(run)
    missing = sorted(set(rows) - done)
    assert len(missing) == 6 and target.read_bytes() == b"".join(rows[k] for k in missing)
    moved = [k for k in missing if k[1] == 1 and (k[0], 0) in done]   # rollout 1 of a task whose 0 completed
    for task, _ in moved:
        assert f"task {task} rollout 1 is collected as rollout 0" in out


def synthetic(tmp_path: Path) -> Path:
    """Task 0 completed; task 1: rollout 0 failed twice, terminal the second time; task 2 rollout 1
    failed three times; task 3 rollout 0 never ran."""
    run = Run(tmp_path / "run")
    run.expect(4, repeats=2)
    run.rows("", rollout(0, 0), rollout(0, 1), rollout(1, 1), rollout(2, 0), rollout(3, 0, ran=False),
             rollout(3, 1))
    fail = {"_ng_failure_class": "agent_run_error", "_ng_failure_message": "boom"}
    run.rows("_failures", {"_ng_task_index": 1, "_ng_rollout_index": 0, **fail},
             {"_ng_task_index": 1, "_ng_rollout_index": 0, "_ng_attempt_index": 1, "_ng_failure_terminal": True, **fail},
             *[{"_ng_task_index": 2, "_ng_rollout_index": 1, "_ng_attempt_index": i, **fail} for i in range(3)])
    run.finish()
    return run.root


def test_terminal_failures_are_left_out_and_attempts_are_counted(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(rerun.MAX_ATTEMPTS_VAR, raising=False)
    root = synthetic(tmp_path)
    plan = {(p.task_index, p.rollout_index): p for p in rerun.plan(read_run(str(root), check_processes=False).state)}
    assert set(plan) == {(1, 0), (2, 1), (3, 0)}
    assert not plan[1, 0].rerunnable and plan[1, 0].terminal.where() == "rollouts_failures.jsonl:2"
    assert (plan[1, 0].attempts_used, plan[2, 1].attempts_used, plan[3, 0].attempts_used) == (2, 3, 0)
    assert plan[2, 1].rerunnable and plan[3, 0].rerunnable
    target = tmp_path / "retry.jsonl"
    code, out, _ = report(capsys, str(root), "--retry-input", str(target))
    rows = materialized(root)
    assert target.read_bytes() == rows[2, 1] + rows[3, 0]
    assert "rerun: 2 of 3 trial(s) that did not complete can be collected again" in out
    assert ("task 1 rollout 0: cannot be rerun: Gym marked its failure terminal (_ng_failure_terminal)" in out
            and "at rollouts_failures.jsonl:2" in out)
    assert "task 2 rollout 1: 3 attempts used; Gym's own resume stops at 3" in out
    assert "task 2 rollout 1 is collected as rollout 0" in out
    rep = json.loads(main(["report", str(root), "--format", "json"]) and capsys.readouterr().out)
    r = rep["rerun"]
    assert r["rerunnable"] == 2 and r["retry_input"] is None
    [no] = r["not_rerunnable"]
    assert (no["task_index"], no["rollout_index"], no["status"], no["attempts_used"]) == (1, 0, "failed", 2)
    assert no["why"].startswith("Gym marked its failure terminal") and no["terminal"]["line"] == 2
    assert '"_ng_failure_terminal": true' in no["terminal"]["text"]
    assert r["tried_before"] == [{"task_index": 2, "rollout_index": 1, "status": "failed", "attempts_used": 3,
                                  "resume_would_stop": True}]
    monkeypatch.setenv(rerun.MAX_ATTEMPTS_VAR, "5")        # read as Gym reads it
    assert rerun.max_attempts() == 5


def test_refuses_to_overwrite_and_to_write_into_the_run(tmp_path, capsys):
    root = synthetic(tmp_path)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    kept = tmp_path / "kept.jsonl"
    kept.write_text("mine\n")
    code, out, err = report(capsys, str(root), "--retry-input", str(kept))
    assert code == 64 and out == "" and "already exists" in err and kept.read_text() == "mine\n"
    for inside in (root / "retry.jsonl", root / "logs" / "retry.jsonl", root / ".." / "run" / "x.jsonl"):
        code, out, err = report(capsys, str(root), "--retry-input", str(inside))
        assert code == 64 and "inside the run" in err and len(err.splitlines()) == 1
    code, _, err = report(capsys, str(root), "--retry-input", str(tmp_path / "no" / "dir.jsonl"))
    assert code == 64 and "no such directory" in err
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert not (tmp_path / "no").exists()


def test_nothing_to_rerun_writes_no_file(tmp_path, capsys):
    target = tmp_path / "retry.jsonl"
    code, out, err = report(capsys, str(CASES07 / "g07_mixed_ok"), "--retry-input", str(target))
    assert code == 0 and not target.exists()
    assert "nothing to rerun (every trial completed)" in err and "rerun:" not in out


def test_a_trial_without_a_materialized_row_cannot_be_rerun(tmp_path, capsys):
    run = Run(tmp_path / "run")
    run.rows("", rollout(0, 0))
    run.rows("_failures", {"_ng_task_index": 1, "_ng_rollout_index": 0, "_ng_failure_class": "x"})
    run.finish()
    target = tmp_path / "retry.jsonl"
    code, _, err = report(capsys, str(run.root), "--retry-input", str(target))
    # with no materialized inputs the failed trial has no input row: not rerunnable
    assert code == 1 and not target.exists() and "no row in the materialized inputs" in err


def launched(tmp_path: Path) -> Path:
    """A run gymwatch launched (its manifest names the commands, secrets redacted as spawn writes
    them), ended, with one failed trial."""
    src = tmp_path / "src"
    shutil.copytree(SIDECAR, src, ignore=shutil.ignore_patterns("hydra"))
    root = tmp_path / "launched"
    src.rename(root)
    manifest = {
        "version": 1, "run_id": "20261206-000000-abcdef", "created": 0, "gym_version": "0.7.0",
        "head": "127.0.0.1:15555", "files": {"output": str(root / "rollouts.jsonl"), "logs_dir": str(root / "logs")},
        "processes": [
            {"role": "env", "pid": None, "argv": [
                "/venv/bin/gym", "env", "start", "--resources-server", "mcqa", "++policy_api_key=sk-live-123",
                f"+nemo_gym_log_dir={root / 'logs'}", "++head_server.port=15555",
                f"hydra.run.dir={root / 'hydra' / 'env_start'}"]},
            {"role": "eval", "pid": None, "argv": [
                "/venv/bin/gym", "eval", "run", "--no-serve", "--agent", "mcqa_simple_agent", "--input", "/data/x.jsonl",
                "--num-repeats", "2", "--concurrency", "2", "--limit=5", "--prompt-config", "p.yaml",
                "--api-key", "sk-live-456", "++head_server.port=15555",
                f"hydra.run.dir={root / 'hydra' / 'eval_run'}", "--output", str(root / "rollouts.jsonl")]}],
        "log_offsets": {}, "marker": "GYMWATCH_RUN_ID=20261206-000000-abcdef"}
    (root / "gymwatch-manifest.json").write_text(json.dumps(manifest))
    return root


def test_command_from_the_manifest_is_redacted_and_writes_nothing_into_the_run(tmp_path, capsys):
    root = launched(tmp_path)
    target = tmp_path / "retry.jsonl"
    code, out, err = report(capsys, str(root), "--no-process-check", "--retry-input", str(target))
    assert "sk-live" not in out + err
    argv = command_of(out)
    new = tmp_path / "retry-rollouts"
    assert argv == ["/venv/bin/gym", "eval", "run", "--no-serve", "--agent", "mcqa_simple_agent",
                    "--concurrency", "2", "--api-key", "<redacted>", "++head_server.port=15555",
                    "--input", str(target), "--output", str(new / "rollouts.jsonl"), "--num-repeats", "1",
                    f"hydra.run.dir={new / 'hydra' / 'eval_run'}"]
    servers = next(x for x in out.splitlines() if "with the run's servers up" in x)
    assert "++policy_api_key=<redacted>" in servers and f"+nemo_gym_log_dir={new / 'logs'}" in servers
    assert str(root) not in out.split("wrote", 1)[1]        # nothing printed to run points into the run


def test_a_second_retry_file_gets_its_own_output_dir(tmp_path, capsys):
    (tmp_path / "retry-rollouts").mkdir()
    _, out, _ = report(capsys, str(SIDECAR), "--retry-input", str(tmp_path / "retry.jsonl"))
    argv = command_of(out)
    assert argv[argv.index("--output") + 1] == str(tmp_path / "retry-rollouts-2" / "rollouts.jsonl")


@pytest.mark.parametrize("argv, dropped, kept", [
    (["gym", "eval", "run", "+agent_name=a", "+fan_out={a:[b,c]}"], ["+agent_name=a", "+fan_out={a:[b,c]}"], []),
    (["gym", "eval", "run", "-a", "a", "++agent_map={x:a}", "-ifoo.jsonl", "-o", "out.jsonl", "--resume"],
     ["-a", "a", "++agent_map={x:a}", "-ifoo.jsonl", "-o", "out.jsonl", "--resume"], []),
    (["gym", "eval", "run", "--agent=a", "+num_repeats_add_seed=true", "--interleave-repeats", "--temperature", "0.5"],
     ["+num_repeats_add_seed=true"], ["--agent=a", "--interleave-repeats", "--temperature", "0.5"]),
])
def test_routing_seeding_and_prompts_are_not_applied_twice(argv, dropped, kept):
    out = _rerun_argv(argv, Path("/r/f.jsonl"), Path("/r/f-rollouts/rollouts.jsonl"))
    assert not set(dropped) & set(out)
    assert out[:4] == ["gym", "eval", "run", "--no-serve"] and out[4:4 + len(kept)] == kept
    assert out[-6:] == ["--input", "/r/f.jsonl", "--output", "/r/f-rollouts/rollouts.jsonl", "--num-repeats", "1"]
