"""Which files of a benchmark are read, and as what (gymwatch/core/cluster/files.py)."""

from __future__ import annotations

from pathlib import Path

from gymwatch.core.cluster import files as F, jobscript, record
from gymwatch.core.cluster.facts import ChainEntry, HealthWait, SlurmError

SLURM = Path(__file__).parent / "fixtures" / "gym-0.7.0-slurm"


def test_a_chain_s_files_per_link_named_from_the_submission_dir():
    root = next((SLURM / "resumable_chain_svc_dies_with_sacct").glob("gym-job-*"))
    sub = record.resolve(root)
    bench = sub.benchmarks[0]
    script = jobscript.read(bench.local_dir / "job.sh")
    listed = F.job_files(sub, bench, script)
    assert [(f.name, f.kind, f.job_id, f.step) for f in listed] == [
        ("mcqa/job.sh", F.JOBSCRIPT, "", ""),
        ("mcqa/.gym_job_chain", F.CHAIN, "", ""),
        *[row for n in ("12", "13", "14", "15") for row in (
            (f"mcqa/slurm-{n}.out", F.BATCH, n, ""),
            (f"mcqa/logs/policy-{n}.log", F.SERVICE, n, "policy"),
            (f"mcqa/logs/driver-{n}.log", F.DRIVER, n, "driver"))],
        ("mcqa/artifacts/rollouts.jsonl", F.ROLLOUTS, "", ""),
    ]
    assert listed[-1].path == bench.local_dir / "artifacts" / "rollouts.jsonl"   # the record's path, read here
    # A link the files name before its batch log exists is listed too.
    assert any(f.name == "mcqa/slurm-16.out" for f in F.job_files(sub, bench, script, ["16"]))


def test_each_file_s_lines_become_its_kind_of_facts():
    root = next((SLURM / "resumable_chain_svc_dies_with_sacct").glob("gym-job-*"))
    sub = record.resolve(root)
    bench = sub.benchmarks[0]
    by_name = {f.name: f for f in F.job_files(sub, bench, jobscript.read(bench.local_dir / "job.sh"))}
    [wait] = by_name["mcqa/slurm-12.out"].facts(2, "Waiting for policy at http://localhost:18601...\r\n")
    assert isinstance(wait, HealthWait) and wait.ev.text == "Waiting for policy at http://localhost:18601..."
    [entry] = by_name["mcqa/.gym_job_chain"].facts(2, "13")
    assert isinstance(entry, ChainEntry) and (entry.job_id, entry.position) == ("13", 2)
    [err] = by_name["mcqa/logs/policy-13.log"].facts(1, "slurmstepd-vm: error: execve(): vllm: No such file or directory")
    assert isinstance(err, SlurmError) and (err.job_id, err.origin) == ("13", "policy")
    assert by_name["mcqa/job.sh"].facts(1, "#SBATCH --time=1") == ()


def test_a_log_named_without_the_job_id_is_the_latest_link_s(tmp_path):
    job = tmp_path / "gym-job-20261207T100000Z-abcdef" / "aime"
    job.mkdir(parents=True)
    (job / "job.sh").write_text("#!/bin/bash\n#SBATCH --output=out/%x.%j.txt\n#SBATCH --job-name=gym-aime\n"
                                "# service: policy\nsrun --output=logs/policy.log vllm serve m &\nPOLICY_PID=$!\n"
                                "srun --output=logs/driver.log gym eval run\n")
    (job / "out").mkdir()
    (job / "out" / "gym-aime.7.txt").write_text("")
    sub = record.resolve(job)
    script = jobscript.read(job / "job.sh")
    listed = F.job_files(sub, sub.benchmarks[0], script, ["8"])
    assert [(f.name, f.job_id) for f in listed if f.kind != F.CHAIN] == [
        ("aime/job.sh", ""), ("aime/out/gym-aime.7.txt", "7"), ("aime/out/gym-aime.8.txt", "8"),
        ("aime/logs/policy.log", "8"), ("aime/logs/driver.log", "8")]


def test_a_benchmark_whose_files_are_not_here_has_none_to_read():
    bench = record.Benchmark("aime", "/lustre/x/aime", None, "4242", None)
    sub = record.Submission(gym_job_id="g", version="", submitted_at="", cluster="", executor="slurm",
                            hostname="login", submitted_by="", run_dir="/lustre/x", root=None, record=None,
                            benchmarks=(bench,))
    assert F.job_files(sub, bench, None) == []
