"""`gymwatch run --no-tui -- eval submit -c FILE` on the real test Slurm (tests/slurmrig.py) with real
nemo-gym 0.7.0: the submission's dir and job as Gym recorded them, and sbatch's refusal shown whole.
Never skipped (`make test` installs Slurm and Gym 0.7.0)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest_slurm import slurm_gym, slurm_rig  # noqa: F401

pytestmark = [pytest.mark.realslurm, pytest.mark.timeout(900)]


def gymwatch_submit(slurm_gym, config: Path, *words: str) -> subprocess.CompletedProcess:
    gym = slurm_gym.ws.venv / "bin" / "gym"
    return subprocess.run([sys.executable, "-m", "gymwatch", "run", "--no-tui", "--gym", str(gym), "--cwd",
                           str(slurm_gym.ws.root), "--", "eval", "submit", "-c", str(config), *words],
                          env=slurm_gym.env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def test_a_submission_through_gymwatch_is_queued_and_said(slurm_gym):
    config = slurm_gym.config("via-gymwatch", {"compute": {"local": {"extra_args": {"begin": "now+1hour"}}}})
    res = gymwatch_submit(slurm_gym, config)
    print(res.stdout, res.stderr)
    assert res.returncode == 0, res.stderr
    first, bench = res.stdout.splitlines()
    gym_job_id, run_dir = first.removeprefix("submitted ").split(": ")
    record = json.loads((Path(run_dir) / "gym-job.json").read_text())        # Gym's own record agrees
    assert record["gym_job_id"] == gym_job_id and record["run_dir"] == run_dir
    jid = record["benchmarks"][0]["job_id"]
    assert bench == f"  mcqa: Slurm job {jid}"
    index = Path(slurm_gym.env["XDG_CACHE_HOME"]) / "nemo-gym" / "jobs" / f"{gym_job_id}.json"
    assert index.is_file()
    squeue = slurm_gym.rig.run("squeue", "-h", "-j", jid, "-o", "%T|%r|%Z").stdout.strip()
    assert squeue == f"PENDING|BeginTime|{run_dir}/mcqa"
    # the user's flags were kept: the begin time is the config's; gymwatch stop cancels it
    stop = subprocess.run([sys.executable, "-m", "gymwatch", "stop", gym_job_id], env=slurm_gym.env,
                          capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0 and stop.stdout.splitlines()[-1].startswith(f"  mcqa: job {jid} CANCELLED")


def test_sbatch_refusing_the_job_is_shown_whole(slurm_gym):
    config = slurm_gym.config("via-gymwatch-refused",
                              {"compute": {"local": {"node_pools": {"main": {"partition": "nosuch"}}}}})
    t0 = time.monotonic()
    res = gymwatch_submit(slurm_gym, config)
    print(res.stdout, res.stderr, f"{time.monotonic() - t0:.1f}s")
    assert res.returncode == 3                      # nothing was queued
    lines = res.stdout.splitlines()
    assert lines[0].startswith("submitted gym-job-")
    assert lines[1].startswith("  mcqa: not queued: sbatch: error: invalid partition specified: nosuch")
    assert lines[1].endswith("Batch job submission failed: Invalid partition name specified")
    assert "Error: 1 benchmark(s) failed to submit: mcqa" in res.stderr
