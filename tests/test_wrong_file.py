"""A `.jsonl` that holds no Gym row is not a run: one clear line, the unreadable-input exit code,
nothing of another run beside it borrowed. An empty rollouts file, or one whose first row is still
being written, is a run just starting."""

import json
import shutil
import subprocess
import sys

import pytest

from conftest import CASES
from gymwatch.cli import main
from gymwatch.core.layout import NotARun, discover
from gymwatch.core.verdict import EXIT_INPUT
from runbuilder import Run, rollout

JUNK = b'{"hello": "world"}\n{"hello": "again", "n": 2}\nnot json at all\n'


def cli(*args):
    return subprocess.run([sys.executable, "-m", "gymwatch", *map(str, args)], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture
def beside_a_run(tmp_path):
    """A folder holding a finished run's files (its settings, logs, captured output) and a wrong file."""
    shutil.copytree(CASES / "aborted_500", tmp_path, dirs_exist_ok=True)
    wrong = tmp_path / "results.jsonl"
    wrong.write_bytes(JUNK)
    return wrong


@pytest.mark.parametrize("fmt", ["text", "json", "md", "junit"])
def test_a_file_without_a_gym_row_is_not_a_run(beside_a_run, fmt):
    proc = cli("report", beside_a_run, "--format", fmt, "--no-process-check")
    assert proc.returncode == EXIT_INPUT
    assert proc.stdout == ""                                     # no verdict, no settings of the run beside it
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    line = lines[0]
    assert f"{beside_a_run}: not a Gym rollouts file" in line
    assert "line 1: a JSON object with no Gym key (hello)" in line and "line 2: a JSON object with no Gym key (hello, n)" in line
    assert "line 3: invalid JSON" in line


def test_the_screen_and_the_server_refuse_it_in_one_line(beside_a_run, capsys):
    assert main(["attach", str(beside_a_run)]) == EXIT_INPUT
    assert main([str(beside_a_run)]) == EXIT_INPUT
    assert main(["serve", str(beside_a_run)]) == EXIT_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all("not a Gym rollouts file" in e for e in err)
    assert main(["browse", str(beside_a_run), "--format", "text"]) == EXIT_INPUT
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("content,what", [
    (b"", "empty: the collector just opened it"),
    (b'{"responses_create_params": {"input": [{"role": "user", "content": "wh', "its first row being written"),
    (b"\n\n", "blank lines only"),
])
def test_a_run_just_starting_is_a_run(tmp_path, content, what):
    rows = tmp_path / "rollouts.jsonl"
    rows.write_bytes(content)
    proc = cli("report", rows, "--format", "json")
    assert proc.returncode == 0, (what, proc.stderr)
    assert json.loads(proc.stdout)["verdict"] in ("starting", "collecting")


def test_one_gym_row_among_junk_makes_it_a_run_with_the_junk_listed(tmp_path):
    rows = tmp_path / "rollouts.jsonl"
    rows.write_bytes(b"garbage\n" + json.dumps(rollout(0)).encode() + b"\n")
    layout = discover(rows)
    assert layout.rollouts == rows
    proc = cli("report", rows, "--format", "json", "--no-process-check")
    data = json.loads(proc.stdout)
    assert data["counts"]["completed"] == 1 and data["malformed"]["lines"][0]["line"] == 1


def test_a_first_line_that_cannot_become_a_row_is_not_a_run(tmp_path):
    rows = tmp_path / "rollouts.jsonl"
    rows.write_bytes(b"Traceback (most recent call last):")
    with pytest.raises(NotARun, match="its first line is not a JSON object"):
        discover(rows)


def test_failure_and_input_rows_are_gym_rows(tmp_path):
    for row in ({"_ng_failure_class": "agent_run_error", "_ng_task_index": 1, "_ng_rollout_index": 0},
                {"_ng_task_index": 0, "_ng_rollout_index": 0, "agent_ref": {"name": "a"}},
                {"response": {"output": [], "usage": {"input_tokens": 0}}, "reward": 0.0}):
        rows = tmp_path / "rollouts.jsonl"
        rows.write_text(json.dumps(row) + "\n")
        assert discover(rows).rollouts == rows


def test_a_folder_whose_only_file_is_a_wrong_rollouts_file_is_not_a_run(tmp_path):
    (tmp_path / "rollouts.jsonl").write_bytes(JUNK)
    with pytest.raises(NotARun, match="rollouts.jsonl, is not a Gym rollouts file"):
        discover(tmp_path)
    run = Run(tmp_path)      # with Gym's sidecar beside it, it is Gym's, however broken its rows
    run.expect(1)
    assert discover(tmp_path).rollouts == tmp_path / "rollouts.jsonl"
