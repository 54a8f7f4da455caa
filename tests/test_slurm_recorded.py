"""The recorded cluster submissions (tests/fixtures/gym-0.7.0-slurm-recorded, written by
scripts/record_submission.py on the test Slurm) say what each case is about: the record, the job
states seen from outside, the batch output and logs, and where Gym's absolute paths point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RECORDED = Path(__file__).parent / "fixtures" / "gym-0.7.0-slurm-recorded"
CASES = sorted(p.name for p in RECORDED.iterdir() if (p / "_meta").is_dir())


class Case:
    def __init__(self, name: str):
        self.dir = RECORDED / name
        self.meta = self.dir / "_meta"
        self.info = json.loads((self.meta / "case.json").read_text())
        self.record = json.loads((self.meta / "submit.stdout").read_text())
        self.run_dir = Path(self.record["run_dir"])            # where Gym wrote it
        self.copy = self.dir / self.run_dir.name                # where it is now

    def here(self, gym_path: str) -> Path:
        """A path Gym wrote (absolute, in the run dir where it ran), in the copy."""
        return self.copy / Path(gym_path).relative_to(self.run_dir)

    def jobs(self) -> dict[str, list[str]]:
        return self.info["jobs"]

    def sacct(self) -> dict[str, list[str]]:
        lines = (self.meta / "sacct.txt").read_text().splitlines()
        head = lines[0].split("|")
        return {row[0]: dict(zip(head, row, strict=True)) for row in (ln.split("|") for ln in lines[1:])}

    def out(self, bench: str, jid: str) -> str:
        return (self.copy / bench / f"slurm-{jid}.out").read_text()


def test_the_cases_are_all_there():
    assert set(CASES) >= {"completed", "svc_dies_at_startup", "pending_cancelled", "timeout_resumed",
                          "driver_aborts", "two_benchmarks_one_waits", "sbatch_refused"}


@pytest.mark.parametrize("name", CASES)
def test_every_case_keeps_the_record_gym_wrote_three_times(name):
    case = Case(name)
    assert (case.meta / "run_dir.txt").read_text().strip() == str(case.run_dir)
    assert json.loads((case.copy / "gym-job.json").read_text()) == case.record
    assert json.loads((case.meta / "index.json").read_text()) == case.record
    assert case.record["gym_job_id"] == case.run_dir.name and case.record["schema_version"] == 1
    for bench in case.record["benchmarks"]:
        job_dir = case.here(bench["job_dir"])
        assert (job_dir / "job.sh").read_text().startswith("#!/bin/bash\n#SBATCH --job-name=gym-")
        assert f"#SBATCH --chdir={bench['job_dir']}\n" in (job_dir / "job.sh").read_text()
    # files.log: seconds since submit, what happened, size, path in the run dir
    for line in (case.meta / "files.log").read_text().splitlines():
        t, kind, size, rel = line.split(maxsplit=3)
        assert float(t) >= 0 and kind in ("new", "grow", "shrink") and int(size) >= 0 and not rel.startswith("/")


def test_completed():
    case = Case("completed")
    [(jid, states)] = case.jobs().items()
    assert states == ["PENDING", "RUNNING", "COMPLETED"]
    assert "  policy ready." in case.out("mcqa", jid)
    assert case.sacct()[jid]["State"] == "COMPLETED" and case.sacct()[f"{jid}.0"]["State"] == "CANCELLED"
    assert f"*** STEP {jid}.0 ON" in (case.copy / "mcqa" / "logs" / f"policy-{jid}.log").read_text()
    rows = (case.copy / "mcqa" / "artifacts" / "rollouts.jsonl").read_text().splitlines()
    assert len(rows) == 10


def test_svc_dies_at_startup():
    case = Case("svc_dies_at_startup")
    [(jid, states)] = case.jobs().items()
    assert states[-1] == "FAILED" and case.sacct()[jid]["ExitCode"] == "1:0"
    out = case.out("mcqa", jid)
    assert "srun: error: vm: task 0: Exited with exit code 1" in out and "  policy died during startup." in out
    assert "RuntimeError: stand-in vllm: told to die" in (case.copy / "mcqa/logs" / f"policy-{jid}.log").read_text()
    assert not (case.copy / "mcqa/logs" / f"driver-{jid}.log").exists()


def test_pending_cancelled():
    case = Case("pending_cancelled")
    [(jid, states)] = case.jobs().items()
    assert states == ["PENDING", "CANCELLED"]
    assert "scancel " + jid in (case.meta / "actions.log").read_text()
    assert "JobState=PENDING Reason=BeginTime" in next((case.meta / "scontrol").glob(f"{jid}-01-PENDING.txt")).read_text()
    tree = (case.meta / "tree.txt").read_text().splitlines()   # (git keeps no empty dir: logs/ is only here)
    assert [ln.split()[-1] for ln in tree] == ["gym-job.json", "mcqa/", "mcqa/artifacts/", "mcqa/job.sh",
                                               "mcqa/logs/", "resolved-config.yaml"]


def test_timeout_resumed():
    case = Case("timeout_resumed")
    jobs = case.jobs()
    *timed_out, done, never = sorted(jobs, key=int)          # how many links timed out depends on the machine
    assert timed_out and all(jobs[j][-1] == "TIMEOUT" for j in timed_out)
    assert jobs[done][-1] == "COMPLETED" and jobs[never] == ["PENDING", "CANCELLED"]
    [bench] = case.record["benchmarks"]
    assert bench["job_id"] == timed_out[0]                    # the record names the first link only
    job_dir = case.here(bench["job_dir"])
    assert (job_dir / ".gym_job_chain").read_text().split() == [*timed_out, done]
    for prev, link in zip([*timed_out, done], [*timed_out[1:], done, never], strict=True):
        if link != never:
            assert f"Previous job {prev}: TIMEOUT. Resuming..." in case.out("mcqa", link)
        assert f"Auto-resume follow-up queued: {link} (afternotok:{prev})" in case.out("mcqa", prev)
    assert f"*** JOB {timed_out[0]} ON vm CANCELLED AT" in case.out("mcqa", timed_out[0])
    assert "DUE TO TIME LIMIT ***" in case.out("mcqa", timed_out[0])
    assert "Reason=DependencyNeverSatisfied" in (case.meta / "scontrol" / f"{never}-final.txt").read_text()
    assert case.sacct()[timed_out[0]]["State"] == "TIMEOUT"
    rows = [json.loads(r) for r in (job_dir / "artifacts" / "rollouts.jsonl").read_text().splitlines()]
    assert sorted({(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows}) == \
        [(t, r) for t in range(5) for r in range(2)]


def test_driver_aborts():
    case = Case("driver_aborts")
    [(jid, states)] = case.jobs().items()
    assert states[-1] == "FAILED"
    log = (case.copy / "mcqa/logs" / f"driver-{jid}.log").read_text()
    assert "ClientResponseError: 500" in log
    rows = (case.copy / "mcqa/artifacts/rollouts.jsonl").read_text().splitlines()
    assert 0 < len(rows) < 10


def test_two_benchmarks_one_waits():
    case = Case("two_benchmarks_one_waits")
    ids = {b["benchmark"]: b["job_id"] for b in case.record["benchmarks"]}
    assert set(ids) == {"mcqa", "mcqa_again"}
    assert all(states[-1] == "COMPLETED" for states in case.jobs().values())
    snaps = (case.meta / "squeue_snapshots.log").read_text().split("--- t=")
    assert any(f"{ids['mcqa']}|gym-mcqa|RUNNING|" in s and f"{ids['mcqa_again']}|gym-mcqa_again|PENDING|Resources|" in s
               for s in snaps)


def test_sbatch_refused():
    case = Case("sbatch_refused")
    [bench] = case.record["benchmarks"]
    assert bench["job_id"] is None and "invalid partition specified: nosuch" in bench["error"]
    assert (case.meta / "submit.exit").read_text().strip() == "1"
    assert "failed to submit: mcqa" in (case.meta / "submit.stderr").read_text()
    assert case.jobs() == {}
