"""On a real single-host Slurm (tests/slurmrig.py) with real nemo-gym 0.7.0 submissions: the rig
starts with its private configuration and takes Gym's pyxis flags, a submission runs to the end,
a held job is cancelled, and the recorder writes what it saw. Never skipped: `make test` installs
Slurm (.ci/install_slurm.sh) and Gym 0.7.0 (.ci/install_gym.sh 0.7.0) first."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest_slurm import slurm_gym, slurm_rig  # noqa: F401
from slurmrig import REPO

pytestmark = [pytest.mark.realslurm, pytest.mark.timeout(900)]


def test_rig_runs_srun_with_pyxis_flags_on_its_private_config(slurm_rig):
    rig = slurm_rig
    assert rig.run("sinfo", "-h", "-o", "%P %a %T").stdout.split() == ["debug*", "up", "idle"]
    conf = dict(re.findall(r"^(\S+)\s*=\s*(.*)$", rig.run("scontrol", "show", "config").stdout, re.M))
    assert conf["SLURM_CONF"] == str(rig.conf) and conf["SlurmctldPort"] == str(rig.ports["slurmctld"])
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert conf["PlugStackConfig"] == str(rig.base / "etc" / "plugstack.conf")
    # the flags Gym's job scripts give srun: accepted (the plugin), the step runs on the node
    out = rig.run("srun", "--overlap", "--no-container-mount-home", "--container-image=vllm/vllm-openai:latest",
                  "--container-mounts=/tmp:/tmp", "--container-workdir=/tmp", "hostname", timeout=60)
    assert out.stdout.strip() == socket.gethostname()
    assert "image=vllm/vllm-openai:latest mounts=/tmp:/tmp workdir=/tmp no_container_mount_home=1" in \
        rig.pyxis_log.read_text()
    # srun is the real one: an option nobody registered is still refused
    bad = rig.run("srun", "--container-imagery=x", "true", check=False)
    assert bad.returncode != 0 and "unrecognized option" in bad.stderr


def test_a_submission_completes_and_accounting_knows_it(slurm_gym):
    sub = slurm_gym.submit("completes")
    sub.wait_done(timeout=600)
    assert sub.returncode == 0, sub.stderr
    record = sub.record
    assert record["executor"] == "slurm" and record["gym_version"] == "0.7.0"
    [bench] = record["benchmarks"]
    jid = bench["job_id"]
    assert bench["benchmark"] == "mcqa" and jid and bench["error"] is None
    assert sub.history[jid][-1] == "COMPLETED" and "RUNNING" in sub.history[jid]
    run_dir = Path(record["run_dir"])
    assert json.loads((run_dir / "gym-job.json").read_text()) == record
    job_dir = run_dir / "mcqa"
    out = (job_dir / f"slurm-{jid}.out").read_text()
    assert "  policy ready." in out and "died during startup" not in out
    assert "stand-in vllm" in (job_dir / "logs" / f"policy-{jid}.log").read_text()
    assert "Finished rollout collection" in (job_dir / "logs" / f"driver-{jid}.log").read_text()
    rows = (job_dir / "artifacts" / "rollouts.jsonl").read_text().splitlines()
    rewards = [json.loads(r)["reward"] for r in rows]     # the stand-in always answers B: right for some tasks
    assert len(rows) == 10 and set(rewards) == {0.0, 1.0}
    sacct = slurm_gym.rig.run("sacct", "-j", jid, "-P", "-n", "-o", "JobID,State").stdout.splitlines()
    assert f"{jid}|COMPLETED" in sacct and f"{jid}.0|CANCELLED" in sacct     # the service step, ended by the job


def test_a_held_job_stays_pending_until_cancelled(slurm_gym):
    sub = slurm_gym.submit("held", {"compute": {"local": {"extra_args": {"begin": "now+1hour"}}}})
    sub.wait(lambda s: any(f["STATE"] == "PENDING" and f["REASON"] == "BeginTime" for f in s.jobs.values()),
             120, "the job to wait for its begin time")
    [jid] = sub.job_ids()
    slurm_gym.rig.run("scancel", jid)
    sub.wait_done(timeout=120, settle=2)
    assert sub.history[jid] == ["PENDING", "CANCELLED"]
    assert not list(sub.job_dir("mcqa").glob("slurm-*.out"))       # it never ran


def test_recorder_writes_what_it_saw(slurm_gym, tmp_path):
    """The recorder, run as a child inside this session's rig and locks (--in-rig), on a service
    that dies during startup."""
    out = tmp_path / "rec"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "record_submission.py"), "--in-rig",
                           "--out", str(out), "--work", str(tmp_path / "work"), "svc_dies_at_startup"],
                          env=slurm_gym.env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    case = out / "svc_dies_at_startup"
    meta = case / "_meta"
    info = json.loads((meta / "case.json").read_text())
    [(jid, states)] = info["jobs"].items()
    assert states[-1] == "FAILED"
    for name in ("squeue_snapshots.log", "states.log", "files.log", "squeue_final.txt", "sacct.txt", "env.txt",
                 "submit.argv", "submit.stdout", "submit.stderr", "config.yaml", "slurm.conf", "index.json",
                 "run_dir.txt", "fakepyxis.log", f"scontrol/{jid}-final.txt"):
        assert (meta / name).is_file(), name
    assert list((meta / "scontrol").glob(f"{jid}-*-FAILED.txt"))
    assert f"{jid}|gym-mcqa|FAILED|1:0|" in (meta / "sacct.txt").read_text()
    run_dir = Path((meta / "run_dir.txt").read_text().strip())
    copy = case / run_dir.name
    assert json.loads((copy / "gym-job.json").read_text())["run_dir"] == str(run_dir)   # paths as Gym wrote them
    for name in ("resolved-config.yaml", "mcqa/job.sh", f"mcqa/slurm-{jid}.out", f"mcqa/logs/policy-{jid}.log"):
        assert (copy / name).is_file(), name
    assert "  policy died during startup." in (copy / "mcqa" / f"slurm-{jid}.out").read_text()
    assert "Traceback (most recent call last)" in (copy / "mcqa" / "logs" / f"policy-{jid}.log").read_text()
    assert os.environ.get("GYMWATCH_SLURMRIG_DIR") is None     # the child's environment stayed the child's
