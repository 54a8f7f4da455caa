"""`gymwatch run -- eval submit ...` (gymwatch/launch/submit.py) with a fake `gym` that answers as Gym
0.7.0's `gym eval submit` does (its record on stdout with --json, its warnings and errors on stderr,
exit 1 when sbatch refused a benchmark). The real Slurm's side is in tests/test_realslurm_submit.py."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gymwatch.launch import submit as submit_mod
from gymwatch.launch.plan import SubmitPlan

RECORD = {"gym_job_id": "gym-job-20261206T062549Z-b0e64d", "gym_version": "0.7.0", "gym_commit": None,
          "submitted_at": "2026-12-06T06:25:49Z", "run_dir": "/runs/gym-job-20261206T062549Z-b0e64d",
          "cluster": "local", "executor": "slurm", "submitted_by": "root",
          "benchmarks": [{"benchmark": "mcqa", "job_dir": "/runs/gym-job-20261206T062549Z-b0e64d/mcqa",
                          "job_id": "101", "error": None}],
          "hostname": None, "executor_metadata": {}, "schema_version": 1}
REFUSED = {"benchmark": "aime", "job_dir": "/runs/gym-job-20261206T062549Z-b0e64d/aime", "job_id": None,
           "error": "sbatch: error: invalid partition specified: nosuch sbatch: error: Batch job submission failed: "
                    "Invalid partition name specified"}


def fake_gym(tmp_path: Path, record: dict | None, code: int = 0, stderr: str = "", stdout: str = "") -> Path:
    """A `gym` that logs its argv and answers: the record as JSON when --json is given."""
    path = tmp_path / "gym"
    (tmp_path / "gym.answer").write_text(json.dumps({"record": record, "code": code, "stderr": stderr,
                                                     "stdout": stdout}))
    path.write_text(f"""#!{sys.executable}
import json, sys
a = json.load(open({str(tmp_path / 'gym.answer')!r}))
open({str(tmp_path / 'gym.argv')!r}, "w").write(json.dumps(sys.argv[1:]))
sys.stderr.write("Warning: submit is experimental and may change or be removed without notice.\\n" + a["stderr"])
if a["stdout"]:
    sys.stdout.write(a["stdout"])
elif a["record"] is not None:
    sys.stdout.write(json.dumps(a["record"], indent=2) if "--json" in sys.argv else "Run directory: x\\n")
sys.exit(a["code"])
""")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def run(tmp_path: Path, *words: str, tui: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gymwatch", "run", *([] if tui else ["--no-tui"]), "--gym",
                           str(tmp_path / "gym"), "--", "eval", "submit", *words], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def gym_argv(tmp_path: Path) -> list[str]:
    return json.loads((tmp_path / "gym.argv").read_text())


def test_a_submission_is_said_with_its_dir_and_jobs(tmp_path):
    fake_gym(tmp_path, RECORD)
    res = run(tmp_path, "-c", "local.yaml", "compute.local.walltime=00:05:00")
    assert res.returncode == 0, res.stderr
    assert gym_argv(tmp_path) == ["eval", "submit", "-c", "local.yaml", "compute.local.walltime=00:05:00", "--json"]
    assert res.stdout.splitlines() == ["submitted gym-job-20261206T062549Z-b0e64d: /runs/gym-job-20261206T062549Z-b0e64d",
                                       "  mcqa: Slurm job 101"]
    assert "Warning: submit is experimental" in res.stderr          # Gym's stderr passes through


def test_sbatch_refusing_a_benchmark_is_shown_whole(tmp_path):
    fake_gym(tmp_path, dict(RECORD, benchmarks=RECORD["benchmarks"] + [REFUSED]), code=1,
             stderr="Error: 1 benchmark(s) failed to submit: aime\n")
    res = run(tmp_path, "-c", "local.yaml")
    assert res.returncode == 1
    assert res.stdout.splitlines()[1:] == ["  mcqa: Slurm job 101", f"  aime: not queued: {REFUSED['error']}"]
    assert "Error: 1 benchmark(s) failed to submit: aime" in res.stderr
    fake_gym(tmp_path, dict(RECORD, benchmarks=[REFUSED]), code=1)
    assert run(tmp_path, "-c", "local.yaml").returncode == 3            # nothing queued


def test_gym_failing_before_it_submits_is_its_own_words_then_one_line(tmp_path):
    msg = "ConfigError: Submit config '/w/nope.yaml' was not found. Check the path is spelled correctly.\n"
    fake_gym(tmp_path, None, code=1, stderr=msg)
    res = run(tmp_path, "-c", "nope.yaml")
    assert res.returncode == 3 and res.stdout == ""
    assert res.stderr.endswith(msg + "gymwatch: `gym eval submit` exited 1 and printed no submission record: "
                                     "nothing was submitted\n")


def test_the_user_s_own_json_goes_to_stdout_as_gym_printed_it(tmp_path):
    fake_gym(tmp_path, RECORD)
    res = run(tmp_path, "--json", "-c", "local.yaml")
    assert gym_argv(tmp_path).count("--json") == 1
    assert json.loads(res.stdout) == RECORD
    assert "  mcqa: Slurm job 101" in res.stderr.splitlines()


@pytest.mark.parametrize("flag", ["--dry-run", "--resolve-only"])
def test_a_dry_run_passes_through(tmp_path, flag):
    fake_gym(tmp_path, None, code=0, stdout="#!/bin/bash\n#SBATCH --job-name=gym-mcqa\n")
    res = run(tmp_path, "-c", "local.yaml", flag)
    assert res.returncode == 0 and res.stdout == "#!/bin/bash\n#SBATCH --job-name=gym-mcqa\n"
    assert gym_argv(tmp_path) == ["eval", "submit", "-c", "local.yaml", flag]


def test_options_of_a_local_run_are_usage_errors_with_submit(tmp_path):
    fake_gym(tmp_path, RECORD)
    res = subprocess.run([sys.executable, "-m", "gymwatch", "run", "--stop-after", "--gym", str(tmp_path / "gym"),
                          "--", "eval", "submit", "-c", "f"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 64 and "--stop-after: not for `eval submit`" in res.stderr
    assert not (tmp_path / "gym.argv").exists()


def test_without_a_terminal_the_screen_is_not_opened(tmp_path):
    fake_gym(tmp_path, RECORD)
    res = run(tmp_path, "-c", "local.yaml", tui=True)
    assert res.returncode == 0 and "gymwatch: no terminal: not opening the screen" in res.stderr
    assert res.stdout.splitlines()[-1] == "  mcqa: Slurm job 101"


def test_on_a_terminal_the_submission_dir_is_attached(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "stdin", type("T", (), {"isatty": lambda self: True})())
    monkeypatch.setattr(sys, "stdout", type("T", (), {"isatty": lambda self: True, "write": lambda s, x: None})())
    monkeypatch.setattr("gymwatch.tui.app.run_app", lambda args: seen.append(args) or 0)
    assert submit_mod.open_submission(Path("/runs/gym-job-x")) == 0
    [args] = seen
    assert args.path == "/runs/gym-job-x" and args.head is None


def test_the_record_is_found_in_what_gym_printed():
    text = json.dumps(RECORD, indent=2)
    assert submit_mod._record(text) == RECORD
    assert submit_mod._record("Some line {not json}\n" + text) == RECORD
    assert submit_mod._record('{"other": 1}') is None and submit_mod._record("") is None
    plan = SubmitPlan(gym=["g"], args=["eval", "submit"], cwd=Path("/"))
    assert not plan.user_json
