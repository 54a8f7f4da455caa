"""`gymwatch stop SUBMISSION` (gymwatch/launch/cancel.py) against a fake Slurm on PATH (tests/fakeslurm.py):
which jobs get which scancel, in which order, a resume chain's queued next link, over SSH, and the
one-line errors. The real Slurm's side is in tests/test_realslurm_stop.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fakeslurm import FakeSlurm
from gymwatch.core.cluster import record
from gymwatch.launch.cancel import CANCELLED, INTERRUPTED, Clock, StopError, describe, stop_submission

RECORDED = Path(__file__).parent / "fixtures" / "gym-0.7.0-slurm-recorded" / "timeout_resumed"
FAST = dict(pace=0.01, settle=2.0)


def submission(tmp_path: Path, hostname: str | None = None, job_sh: bool = True) -> record.Submission:
    """A submission dir with the recorded record and job.sh (driver: step 1, after the policy)."""
    src = next(RECORDED.glob("gym-job-*"))
    root = tmp_path / src.name
    (root / "mcqa").mkdir(parents=True)
    rec = json.loads((src / "gym-job.json").read_text())
    rec["hostname"] = hostname
    (root / "gym-job.json").write_text(json.dumps(rec))
    if job_sh:
        shutil.copyfile(src / "mcqa" / "job.sh", root / "mcqa" / "job.sh")
    return record.resolve(root)


def work_dir(sub: record.Submission) -> str:
    return sub.benchmarks[0].job_dir


def scancels(fake: FakeSlurm) -> list[str]:
    return [c for c in fake.calls() if c.startswith("scancel")]


def test_the_queued_successor_is_cancelled_before_the_driver_gets_sigint(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    sub = submission(tmp_path)
    fake.job("701", "RUNNING", work_dir=work_dir(sub), steps={"0": "vllm", "1": "gym"}, on_int="ends")
    fake.job("702", "PENDING", work_dir=work_dir(sub), reason="Dependency", dependency="afternotok:701(unfulfilled)")
    said: list[str] = []
    res = stop_submission(sub, grace=5, say=said.append, **FAST)
    assert scancels(fake) == ["scancel 702", "scancel --signal=INT 701.1"]
    calls = fake.calls()
    assert calls[0].startswith("squeue --noheader --states=all") and "--name=gym-mcqa" in calls[0]
    assert calls[1] == "squeue --steps --noheader --jobs=701 --format=%i|%j"
    assert fake.states() == {"701": "FAILED", "702": "CANCELLED"}
    assert res.done == {"702": [CANCELLED], "701": [INTERRUPTED]} and res.ok
    assert "the resume chain's next link" in "\n".join(said)
    lines = describe(res)
    assert lines == ["  mcqa: job 701 FAILED (NonZeroExitCode; ended after gymwatch's SIGINT to its driver)",
                     "  mcqa: job 702 CANCELLED (cancelled by gymwatch)"]


def test_a_driver_still_running_after_the_grace_period_is_cancelled(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    fake.set(no_accounting=False)
    sub = submission(tmp_path)
    fake.job("701", "RUNNING", work_dir=work_dir(sub), steps={"0": "vllm", "1": "gym"}, on_int="ignores",
             completing=2)
    res = stop_submission(sub, grace=0.2, say=lambda s: None, **FAST)
    assert scancels(fake) == ["scancel --signal=INT 701.1", "scancel 701"]
    assert res.done == {"701": [INTERRUPTED, CANCELLED]} and res.ok
    # the last poll waited out COMPLETING, and asked sacct for the exit code
    assert fake.calls()[-1].startswith("sacct -X -P -j 701")
    assert describe(res) == ["  mcqa: job 701 CANCELLED (exit code 0, signal 15; SIGINT to its driver, then "
                             "cancelled by gymwatch)"]


def test_a_job_whose_services_are_still_starting_is_cancelled_outright(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    sub = submission(tmp_path)
    fake.job("701", "RUNNING", work_dir=work_dir(sub), steps={"0": "vllm"})      # no step 1: no driver yet
    said: list[str] = []
    res = stop_submission(sub, grace=5, say=said.append, **FAST)
    assert scancels(fake) == ["scancel 701"] and res.done == {"701": [CANCELLED]}
    assert "its services are still starting" in "\n".join(said)
    assert fake.states() == {"701": "CANCELLED"}


def test_without_its_job_script_here_every_step_of_a_running_job_gets_the_signal(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    sub = submission(tmp_path, job_sh=False)
    fake.job("701", "RUNNING", work_dir=work_dir(sub), steps={"0": "vllm", "1": "gym"})
    stop_submission(sub, grace=5, say=lambda s: None, **FAST)
    assert scancels(fake) == ["scancel --signal=INT 701"]


def test_a_chain_link_queued_while_waiting_is_cancelled_too(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    sub = submission(tmp_path)
    fake.job("701", "RUNNING", work_dir=work_dir(sub), steps={"0": "vllm", "1": "gym"}, on_int="ends",
             spawn_on_int="702")
    res = stop_submission(sub, grace=5, say=lambda s: None, **FAST)
    assert scancels(fake) == ["scancel --signal=INT 701.1", "scancel 702"]
    assert fake.states() == {"701": "FAILED", "702": "CANCELLED"} and res.ok


def test_a_job_of_another_submission_is_left_alone(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    sub = submission(tmp_path)
    fake.job("701", "PENDING", work_dir=work_dir(sub), reason="BeginTime")
    fake.job("900", "PENDING", work_dir="/elsewhere/gym-job-x/mcqa")              # same name, other work dir
    stop_submission(sub, grace=5, say=lambda s: None, **FAST)
    assert scancels(fake) == ["scancel 701"] and fake.states()["900"] == "PENDING"


def test_over_ssh_every_command_goes_to_the_record_s_host(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    sub = submission(tmp_path, hostname="login.example.org")
    fake.job("701", "RUNNING", work_dir=work_dir(sub), steps={"0": "vllm", "1": "gym"})
    res = stop_submission(sub, grace=5, say=lambda s: None, **FAST)
    sent = [c for c in fake.calls() if c.startswith("ssh ")]
    run_here = [c for c in fake.calls() if not c.startswith("ssh ")]
    assert len(sent) == len(run_here) and all(
        c.startswith("ssh -o BatchMode=yes -o ConnectTimeout=10 login.example.org ") for c in sent)
    assert "ssh -o BatchMode=yes -o ConnectTimeout=10 login.example.org scancel --signal=INT 701.1" in sent
    assert res.after.host == "login.example.org" and res.ok


def test_an_unreachable_host_or_no_slurm_client_is_one_line(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    fake.set(ssh_down=True)
    with pytest.raises(StopError, match=r"^cannot reach login\.example\.org over SSH: ssh: connect to host"):
        stop_submission(submission(tmp_path / "a", hostname="login.example.org"), grace=5, say=lambda s: None, **FAST)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(StopError, match=r"^no `squeue` here \(no Slurm client on this machine\)$"):
        stop_submission(submission(tmp_path / "b"), grace=5, say=lambda s: None, **FAST)


def test_scancel_missing_after_squeue_answered_is_one_line(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch, tools=("squeue",))
    sub = submission(tmp_path)
    fake.job("701", "PENDING", work_dir=work_dir(sub))
    monkeypatch.setenv("PATH", str(fake.dir))
    with pytest.raises(StopError, match=r"^no `scancel` here"):
        stop_submission(sub, 5, say=lambda s: None, **FAST)


def test_waiting_uses_the_clock_it_is_given(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    sub = submission(tmp_path)
    fake.job("701", "RUNNING", work_dir=work_dir(sub), steps={"0": "vllm", "1": "gym"}, on_int="ignores")
    t = [0.0]
    clock = Clock(sleep=lambda s: t.__setitem__(0, t[0] + s), now=lambda: t[0])
    res = stop_submission(sub, grace=60, say=lambda s: None, pace=2, settle=30, clock=clock)
    # 60 s of grace at one squeue every 2 s, then the scancel
    assert res.waited == 60 and scancels(fake) == ["scancel --signal=INT 701.1", "scancel 701"]
    waits = [c for c in fake.calls() if c.startswith("squeue --noheader")]
    assert 31 <= len(waits) <= 40


# --- the command line

def gymwatch(fake: FakeSlurm, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gymwatch", "stop", *args], env=fake.env, capture_output=True,
                          text=True, timeout=60)


def test_the_command_says_what_slurm_says_after(tmp_path):
    fake = FakeSlurm(tmp_path)
    sub = submission(tmp_path)
    fake.job("701", "RUNNING", work_dir=work_dir(sub), steps={"0": "vllm", "1": "gym"}, on_int="ends")
    fake.job("702", "PENDING", work_dir=work_dir(sub), reason="Dependency", dependency="afternotok:701(unfulfilled)")
    res = gymwatch(fake, "--grace", "5", str(sub.root / "mcqa"))       # a benchmark's job dir names it too
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert out[0] == f"stopping {sub.gym_job_id}: job 701 RUNNING, job 702 PENDING"
    assert "  scancel 702: cancelled job 702 (the resume chain's next link)" in out
    assert "  scancel --signal=INT 701.1: sent SIGINT to the driver of job 701" in out
    assert out[-3:] == ["Slurm says now:",
                        "  mcqa: job 701 FAILED (NonZeroExitCode; ended after gymwatch's SIGINT to its driver)",
                        "  mcqa: job 702 CANCELLED (cancelled by gymwatch)"]


def test_the_command_with_nothing_to_cancel_named_by_its_gym_job_id(tmp_path):
    fake = FakeSlurm(tmp_path)
    sub = submission(tmp_path)
    fake.job("701", "COMPLETED", work_dir=work_dir(sub))
    index = tmp_path / "cache" / "nemo-gym" / "jobs"
    index.mkdir(parents=True)
    rec = json.loads((sub.root / "gym-job.json").read_text())
    (index / f"{sub.gym_job_id}.json").write_text(json.dumps(dict(rec, run_dir=str(sub.root))))
    fake.env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    res = gymwatch(fake, sub.gym_job_id)
    assert res.returncode == 0 and scancels(fake) == [], res.stderr
    assert res.stdout.splitlines() == [f"nothing to cancel: no job of {sub.gym_job_id} is queued or running",
                                       "Slurm says now:", "  mcqa: job 701 COMPLETED"]


def test_the_command_s_errors_are_one_line(tmp_path):
    fake = FakeSlurm(tmp_path)
    fake.set(ssh_down=True)
    sub = submission(tmp_path, hostname="login.example.org")
    res = gymwatch(fake, str(sub.root))
    assert res.returncode == 3 and res.stdout == ""
    assert res.stderr.splitlines() == [f"gymwatch: cannot stop {sub.gym_job_id}: cannot reach login.example.org "
                                       "over SSH: ssh: connect to host login.example.org port 22: Connection refused"]
    res = gymwatch(fake, str(tmp_path / "nothing-here"))
    assert res.returncode == 3 and res.stderr.count("\n") == 1 and "no such file or directory" in res.stderr


def test_a_job_slurm_has_not_ended_yet_is_said_and_exits_1(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    sub = submission(tmp_path)
    fake.job("701", "RUNNING", work_dir=work_dir(sub), steps={"0": "vllm", "1": "gym"}, on_int="ignores",
             completing=10_000)
    res = stop_submission(sub, grace=0, say=lambda s: None, pace=0.01, settle=0.1)
    assert not res.ok and [j.job_id for j in res.left] == ["701"]
    assert describe(res) == ["  mcqa: job 701 COMPLETING (SIGINT to its driver, then cancelled by gymwatch, "
                             "not ended yet)"]
    from gymwatch.launch import cli
    monkeypatch.setattr("gymwatch.launch.cancel.SETTLE", 0.1)
    assert cli._stop_submission(type("A", (), {"path": str(sub.root), "grace": 0.0})()) == 1


def test_a_job_already_ending_is_not_cancelled_again(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    sub = submission(tmp_path)
    fake.job("701", "COMPLETING", work_dir=work_dir(sub), completing=10_000)
    res = stop_submission(sub, grace=5, say=lambda s: None, pace=0.01, settle=0.1)
    assert scancels(fake) == [] and res.nothing_to_cancel and not res.ok
    assert describe(res) == ["  mcqa: job 701 COMPLETING (already ending)"]
