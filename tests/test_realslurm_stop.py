"""`gymwatch stop SUBMISSION` on the real test Slurm (tests/slurmrig.py) with real nemo-gym 0.7.0
submissions: a held job, a job whose service is still starting, and a resume chain whose running
link's driver is interrupted while its next link waits. Never skipped (`make test` installs both)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest_slurm import slurm_gym, slurm_rig  # noqa: F401

pytestmark = [pytest.mark.realslurm, pytest.mark.timeout(900)]


def gymwatch_stop(slurm_gym, target, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gymwatch", "stop", *args, str(target)], env=slurm_gym.env,
                          capture_output=True, text=True, timeout=300)


def sacct_states(slurm_gym, jid: str) -> dict[str, str]:
    out = slurm_gym.rig.run("sacct", "-j", jid, "-P", "-n", "-o", "JobID,State").stdout
    return dict(line.split("|")[:2] for line in out.splitlines() if "|" in line)


def test_a_held_job_is_cancelled(slurm_gym):
    sub = slurm_gym.submit("stop-held", {"compute": {"local": {"extra_args": {"begin": "now+1hour"}}}})
    sub.wait(lambda s: any(f["STATE"] == "PENDING" and f["REASON"] == "BeginTime" for f in s.jobs.values()),
             120, "the job to wait for its begin time")
    [jid] = sub.job_ids()
    res = gymwatch_stop(slurm_gym, sub.run_dir)
    print(res.stdout, res.stderr)
    assert res.returncode == 0, res.stderr
    assert f"  scancel {jid}: cancelled job {jid} (waiting for its begin time)" in res.stdout
    assert res.stdout.splitlines()[-1] == f"  mcqa: job {jid} CANCELLED (BeginTime; cancelled by gymwatch)"
    sub.wait_done(timeout=120, settle=2)
    assert sub.history[jid] == ["PENDING", "CANCELLED"]
    assert not list(sub.job_dir("mcqa").glob("slurm-*.out"))       # it never ran
    # Asked again: nothing left to cancel, and it says so.
    again = gymwatch_stop(slurm_gym, sub.run_dir / "gym-job.json")
    assert again.returncode == 0 and again.stdout.startswith("nothing to cancel: ")


def test_a_job_whose_service_is_still_starting_is_cancelled_outright(slurm_gym):
    sub = slurm_gym.submit("stop-starting", {"services": {"policy": {"extra_args": "--stub-startup-delay 300"}}})
    sub.wait(lambda s: "RUNNING" in s.states().values() and list(s.job_dir("mcqa").glob("slurm-*.out")),
             120, "the job to start its service")
    [jid] = sub.job_ids()
    res = gymwatch_stop(slurm_gym, sub.run_dir)
    print(res.stdout, res.stderr)
    assert res.returncode == 0, res.stderr
    assert f"  scancel {jid}: cancelled job {jid} (its services are still starting)" in res.stdout
    assert "--signal=INT" not in res.stdout
    assert res.stdout.splitlines()[-1].startswith(f"  mcqa: job {jid} CANCELLED (")
    assert sacct_states(slurm_gym, jid)[jid].startswith("CANCELLED")      # sacct: `CANCELLED by <uid>`


def test_a_chain_s_next_link_is_cancelled_and_the_running_driver_interrupted(slurm_gym):
    sub = slurm_gym.submit("stop-chain", {"services": {"policy": {"extra_args": "--stub-reply-delay 4"}},
                                          "driver": {"benchmarks": {"mcqa": {"resumable": True}}}})

    def collecting(s):
        logs = list(s.job_dir("mcqa").glob("logs/driver-*.log")) if s.run_dir else []
        return len(s.jobs) == 2 and logs and "Collecting rollouts" in logs[0].read_text(errors="replace")
    sub.wait(collecting, 600, "the first link to collect while its next link waits")
    first, successor = sub.job_ids()
    res = gymwatch_stop(slurm_gym, sub.run_dir, "--grace", "120")
    print(res.stdout, res.stderr)
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    cancel = out.index(f"  scancel {successor}: cancelled job {successor} (the resume chain's next link)")
    interrupt = out.index(f"  scancel --signal=INT {first}.1: sent SIGINT to the driver of job {first}")
    assert cancel < interrupt
    # job.sh exits as its driver did: `gym eval run` fails an interrupted collection
    assert out[-2].startswith(f"  mcqa: job {first} FAILED (NonZeroExitCode; exit code ")
    assert out[-2].endswith("; ended after gymwatch's SIGINT to its driver)")
    assert out[-1] == f"  mcqa: job {successor} CANCELLED (Dependency; cancelled by gymwatch)"
    # The driver took the signal as Ctrl-C: it stopped collecting and shut its servers down.
    driver = (sub.job_dir("mcqa") / "logs" / f"driver-{first}.log").read_text(errors="replace")
    assert "EVAL FAILED: rollout collection interrupted; partial artifacts retained." in driver
    assert "Sending interrupt signals to servers..." in driver and "NeMo Gym finished!" in driver
    sub.wait_done(timeout=120, settle=2)
    assert sub.history[successor] == ["PENDING", "CANCELLED"] and sub.history[first][-1] == "FAILED"
    states = sacct_states(slurm_gym, first)
    assert states[f"{first}.1"] == "CANCELLED" and states[first] == "FAILED"     # the driver step: ended by the signal
