"""A benchmark's facts and Slurm's answer folded into its Job (job.py), and the Job's conclusion
(conclusion.py): on the recorded submissions, and on hand-made cases of every way a job ends."""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path

import pytest

from gymwatch.core.cluster import files as F, jobscript, record
from gymwatch.core.cluster.conclusion import conclude
from gymwatch.core.cluster.job import fold, job_ids_in
from gymwatch.core.cluster.model import (
    FROM_FILES,
    FROM_SLURM,
    P_ENDED,
    P_NOT_SUBMITTED,
    P_QUEUED,
    P_RUNNING,
    SV_DIED,
    SV_ENDED,
    SV_HEALTHY,
    SV_NEVER_HEALTHY,
    SV_NOT_STARTED,
    SV_STARTING,
)
from gymwatch.core.cluster.slurmcli import SlurmJob, SlurmPoll, parse_sacct, parse_scontrol

SLURM = Path(__file__).parent / "fixtures" / "gym-0.7.0-slurm"
RECORDED_SCRIPT = next(SLURM.glob("real_mcqa_cold/gym-job-*/mcqa/job.sh")).read_text()
RESUMABLE_SCRIPT = next(SLURM.glob("resumable_chain_svc_dies_with_sacct/gym-job-*/mcqa/job.sh")).read_text()


def read_facts(sub, bench, script, *, shuffle: random.Random | None = None):
    """Every fact of the benchmark's files, learning the chain's links as a live reader would."""
    ids: set[str] = set()
    facts: list = []
    for _ in range(4):
        files = F.job_files(sub, bench, script, ids)
        facts = []
        for f in files:
            if f.kind not in (F.JOBSCRIPT, F.ROLLOUTS) and f.path.is_file():
                facts.extend(x for n, text in enumerate(f.path.read_text().splitlines(), 1) for x in f.facts(n, text))
        ids = job_ids_in(facts)
    if shuffle is not None:
        shuffle.shuffle(facts)
    return facts, files


def recorded(case: str):
    sub = record.resolve(next((SLURM / case).glob("gym-job-*")))
    bench = sub.benchmarks[0]
    script = jobscript.read(bench.local_dir / "job.sh")
    facts, files = read_facts(sub, bench, script)
    return sub, bench, script, facts, files


def meta_poll(case: str, final: bool = True) -> SlurmPoll:
    meta = SLURM / case / "_meta"
    jobs = {}
    for path in sorted((meta / "scontrol").glob("*-final.txt" if final else "*.txt")):
        for job in parse_scontrol(path.read_text()):
            jobs[job.job_id] = job
    if (meta / "sacct.txt").is_file():
        for job in parse_sacct((meta / "sacct.txt").read_text()):
            jobs[job.job_id] = jobs[job.job_id].merged(job) if job.job_id in jobs else job
    return SlurmPoll(jobs=jobs)


# --- the recorded submissions ---

def test_a_completed_job_s_normal_end_is_not_a_failure():
    _, bench, script, facts, files = recorded("real_mcqa_cold")
    for poll in (None, meta_poll("real_mcqa_cold")):
        job = fold(bench, script, facts, poll, files=files)
        [link] = job.links
        assert (link.job_id, link.state, link.exit_code, link.normal_end) == ("17", "COMPLETED", 0, True)
        [policy] = link.services
        assert (policy.state, policy.detail, policy.port) == (SV_ENDED, "ended with the job", 18601)
        assert policy.log == "mcqa/logs/policy-17.log" and link.driver_log == "mcqa/logs/driver-17.log"
        assert policy.listening == "http://127.0.0.1:18601"
        assert link.collection_finished is not None and link.rows_done_before == 0
        c = conclude(job)
        assert (c.phase, c.state, c.headline, c.failed) == (P_ENDED, "COMPLETED", "completed", False)
        assert c.inferred is (poll is None) and link.source == (FROM_FILES if poll is None else FROM_SLURM)
    assert conclude(fold(bench, script, facts, None)).details == (
        "state inferred from files: Slurm was not asked",)


def test_a_service_that_never_became_healthy():
    _, bench, script, facts, files = recorded("svc_never_healthy_timeout")
    for poll in (None, meta_poll("svc_never_healthy_timeout")):
        job = fold(bench, script, facts, poll, files=files)
        [policy] = job.links[0].services
        assert policy.state == SV_NEVER_HEALTHY and policy.detail == "never healthy: 2 of 2 attempts over 0:10"
        assert policy.evidence is not None and policy.evidence.where() == "mcqa/slurm-18.out:2"
        c = conclude(job)
        assert (c.phase, c.state, c.failed) == (P_ENDED, "FAILED", True)
        assert c.headline == "failed: exit code 1: policy never healthy: 2 of 2 attempts over 0:10"
        assert [e.where() for e in c.evidence] == ["mcqa/slurm-18.out:2"]


def test_a_resume_chain_whose_service_died_in_every_link_until_the_retry_limit():
    _, bench, script, facts, files = recorded("resumable_chain_svc_dies_with_sacct")
    for poll in (None, meta_poll("resumable_chain_svc_dies_with_sacct")):
        job = fold(bench, script, facts, poll, files=files)
        assert [ln.job_id for ln in job.links] == ["12", "13", "14", "15"]
        assert [ln.previous for ln in job.links] == [None, "12", "13", "14"]
        assert [ln.followup for ln in job.links] == ["13", "14", "15", None]
        for link in job.links[:3]:
            [policy] = link.services
            assert (link.state, link.exit_code, policy.state, policy.exit_code) == ("FAILED", 1, SV_DIED, 2)
            assert policy.detail == "died during startup: exit code 2"
            assert policy.cause is not None and policy.cause.text.endswith("execve(): vllm: No such file or directory")
            assert policy.cause.file == f"mcqa/logs/policy-{link.job_id}.log"
        assert [ln.action for ln in job.links] == [
            "", "resumed job 12 (FAILED): infra retry 1/2", "resumed job 13 (FAILED): infra retry 2/2",
            "stopped the chain: infra retry limit (2) reached after FAILED"]
        last = job.links[-1]
        assert last.stopped_chain and last.services[0].state == SV_NOT_STARTED
        c = conclude(job)
        assert (c.phase, c.state, c.job_id, c.failed) == (P_ENDED, "FAILED", "15", True)
        assert c.headline == ("failed: exit code 1: stopped the chain: infra retry limit (2) reached after FAILED; "
                              "job 14: policy died during startup: exit code 2: "
                              "slurmstepd-vm: error: execve(): vllm: No such file or directory")
        assert [e.where() for e in c.evidence] == ["mcqa/slurm-15.out:1", "mcqa/logs/policy-14.log:1"]
        assert c.details[:4] == (
            "link 1: job 12 FAILED, failed: exit code 1; policy died during startup: exit code 2: "
            "slurmstepd-vm: error: execve(): vllm: No such file or directory",
            "link 2: job 13 FAILED, failed: exit code 1; resumed job 12 (FAILED): infra retry 1/2; policy died during "
            "startup: exit code 2: slurmstepd-vm: error: execve(): vllm: No such file or directory",
            "link 3: job 14 FAILED, failed: exit code 1; resumed job 13 (FAILED): infra retry 2/2; policy died during "
            "startup: exit code 2: slurmstepd-vm: error: execve(): vllm: No such file or directory",
            "link 4: job 15 FAILED, failed: exit code 1; stopped the chain: infra retry limit (2) reached after FAILED")


def test_a_job_cancelled_while_it_waited_for_its_begin_time():
    _, bench, script, facts, files = recorded("pending_begintime_cancelled")
    assert facts == []
    queued = fold(bench, script, facts, meta_poll("pending_begintime_cancelled", final=False).merged(
        SlurmPoll(jobs={"4": parse_scontrol(next(SLURM.glob("pending_*/_meta/scontrol/4-01-PENDING.txt")).read_text())[0]})))
    c = conclude(queued, now=datetime(2026, 12, 6, 4, 40, 13))
    assert (c.phase, c.state, c.never_starts, c.inferred) == (P_QUEUED, "PENDING", False, False)
    assert c.headline == "queued 4:00: waiting for its begin time; Slurm expects it to start at 2026-12-06T05:36:13"
    assert queued.links[0].services[0].state == SV_NOT_STARTED
    c = conclude(fold(bench, script, facts, meta_poll("pending_begintime_cancelled")))
    assert (c.phase, c.state, c.headline, c.failed) == (P_ENDED, "CANCELLED", "cancelled before it started", True)
    # From files alone nothing ran: no batch log.
    c = conclude(fold(bench, script, facts, None, files=files))
    assert (c.phase, c.state, c.inferred) == (P_QUEUED, "", True)
    assert c.headline == "job 4 has not started: no output from it yet (still queued, or it never ran)"


@pytest.mark.parametrize("case", ["real_mcqa_cold", "svc_never_healthy_timeout", "resumable_chain_svc_dies_with_sacct"])
def test_the_fold_is_the_same_in_any_order_chunks_or_repeats(case):
    sub, bench, script, facts, files = recorded(case)
    want = fold(bench, script, facts, None, files=files)
    rng = random.Random(7)
    for _ in range(5):
        shuffled, _ = read_facts(sub, bench, script, shuffle=rng)
        cut = rng.randrange(len(shuffled) + 1)
        chunks = shuffled[:cut] + shuffled + shuffled[cut:]          # some facts read twice
        assert fold(bench, script, chunks, None, files=files) == want
    assert conclude(fold(bench, script, list(reversed(facts)), None, files=files)) == conclude(want)


# --- hand-made jobs ---

class JobDir:
    """A benchmark's job dir in tmp_path with a Gym job.sh, and its logs written line by line."""

    def __init__(self, tmp_path: Path, script: str = RECORDED_SCRIPT, first: str = "31"):
        root = tmp_path / "gym-job-20261207T100000Z-abcdef"
        (root / "mcqa" / "logs").mkdir(parents=True)
        (root / "mcqa" / "job.sh").write_text(script)
        self.dir = root / "mcqa"
        self.sub = record.Submission(
            gym_job_id=root.name, version="0.7.0", submitted_at="2026-12-07T10:00:00Z", cluster="c", executor="slurm",
            hostname=None, submitted_by="me", run_dir=str(root), root=root, record=None,
            benchmarks=(record.Benchmark("mcqa", str(root / "mcqa"), root / "mcqa", first, None),))
        self.bench = self.sub.benchmarks[0]
        self.script = jobscript.read(self.dir / "job.sh")

    def write(self, name: str, *lines: str) -> "JobDir":
        (self.dir / name).write_text("".join(f"{ln}\n" for ln in lines))
        return self

    def job(self, poll: SlurmPoll | None = None, rows_total: int | None = None):
        facts, files = read_facts(self.sub, self.bench, self.script)
        return fold(self.bench, self.script, facts, poll, files=files, rows_total=rows_total)


WAIT, READY = "Waiting for policy at http://localhost:18601...", "  policy ready."
END = ("srun: Job step aborted: Waiting up to 12 seconds for job step to finish.", "srun: error: n1: task 0: Terminated")


def slurm(*jobs: SlurmJob, forgotten: frozenset[str] = frozenset(), error: str = "") -> SlurmPoll:
    return SlurmPoll(jobs={j.job_id: j for j in jobs}, forgotten=forgotten, error=error)


def test_a_time_limit_from_files(tmp_path):
    d = JobDir(tmp_path).write("slurm-31.out", WAIT, READY,
                               "slurmstepd: error: *** JOB 31 ON n1 CANCELLED AT 2026-12-07T10:20:00 DUE TO TIME LIMIT ***",
                               *END)
    d.write("logs/policy-31.log", "slurmstepd: error: *** STEP 31.0 ON n1 CANCELLED AT 2026-12-07T10:20:00 DUE TO "
                                  "TIME LIMIT ***")
    job = d.job()
    c = conclude(job)
    assert (c.phase, c.state, c.inferred, c.failed) == (P_ENDED, "TIMEOUT", True, True)
    assert c.headline == ("hit its time limit (45:00): slurmstepd: error: *** JOB 31 ON n1 CANCELLED AT "
                          "2026-12-07T10:20:00 DUE TO TIME LIMIT ***")
    assert [e.where() for e in job.links[0].evidence] == ["mcqa/slurm-31.out:3"]
    assert job.links[0].services[0].state == SV_ENDED


def test_a_time_limit_with_every_row_written_is_still_a_timeout_by_slurm(tmp_path):
    d = JobDir(tmp_path).write("slurm-31.out", WAIT, READY, *END)
    d.write("logs/driver-31.log", "Clearing output fpath since `resume_from_cache=False`!",
            "Finished rollout collection! View results at:")
    c = conclude(d.job(slurm(SlurmJob("31", state="TIMEOUT", reason="TimeLimit", exit_code=0, signal=0,
                                      elapsed=2700, time_limit=2700, nodes="n1"))))
    assert (c.state, c.headline, c.failed, c.inferred) == ("TIMEOUT", "hit its time limit (45:00)", True, False)


def test_a_segfaulted_driver_is_failed_not_collecting(tmp_path):
    d = JobDir(tmp_path).write("slurm-31.out", WAIT, READY, "srun: error: n1: task 0: Segmentation fault (core dumped)",
                               *END)
    c = conclude(d.job())
    assert (c.phase, c.state, c.inferred) == (P_ENDED, "FAILED", True)
    assert c.headline == "failed: killed by SIGSEGV: a job step ended: Segmentation fault (core dumped)"
    told = conclude(d.job(slurm(SlurmJob("31", state="FAILED", reason="NonZeroExitCode", exit_code=0, signal=11))))
    assert told.headline.startswith("failed: killed by SIGSEGV") and not told.inferred


def test_a_driver_that_exited_non_zero_after_the_services_were_ready(tmp_path):
    d = JobDir(tmp_path).write("slurm-31.out", WAIT, READY, "srun: error: n1: task 0: Exited with exit code 3", *END)
    c = conclude(d.job())
    assert (c.state, c.headline) == ("FAILED", "failed: exit code 3: a job step ended: Exited with exit code 3")
    assert d.job().links[0].services[0].state == SV_ENDED


def test_a_job_whose_vllm_never_started_is_running_with_its_service_starting(tmp_path):
    d = JobDir(tmp_path).write("slurm-31.out", WAIT)
    d.write("logs/policy-31.log", "INFO 12-07 10:00:05 Loading weights took 3.2 seconds")
    running = slurm(SlurmJob("31", state="RUNNING", elapsed=125, time_limit=2700, nodes="n1"))
    job = d.job(running)
    assert job.links[0].services[0].state == SV_STARTING
    c = conclude(job)
    assert (c.phase, c.headline, c.near_limit) == (P_RUNNING, "running on n1 for 2:05 of 45:00; policy starting", False)
    c = conclude(d.job())
    assert (c.phase, c.state, c.inferred) == (P_RUNNING, "RUNNING", True)
    assert c.headline == "running; policy starting (no end in its files yet)"


def test_a_running_job_near_its_time_limit(tmp_path):
    d = JobDir(tmp_path).write("slurm-31.out", WAIT, READY)
    c = conclude(d.job(slurm(SlurmJob("31", state="RUNNING", elapsed=2460, time_limit=2700, nodes="n1"))))
    assert c.near_limit and c.headline == "running on n1 for 41:00 of 45:00: near its time limit, 4:00 left"
    c = conclude(d.job(slurm(SlurmJob("31", state="RUNNING", elapsed=600, time_limit=2700, nodes="n1"))))
    assert not c.near_limit and c.headline == "running on n1 for 10:00 of 45:00"
    assert d.job(slurm(SlurmJob("31", state="RUNNING"))).links[0].services[0].state == SV_HEALTHY


@pytest.mark.parametrize("reason, words, never", [
    ("None", "waiting to be scheduled", False),
    ("Priority", "waiting: other jobs come first (priority)", False),
    ("Resources", "waiting for resources: the nodes it needs are busy", False),
    ("BeginTime", "waiting for its begin time", False),
    ("Dependency", "waiting for the job it depends on", False),
    ("JobHeldAdmin", "held by an administrator", False),
    ("JobHeldUser", "held by its owner (scontrol release lets it run)", False),
    ("PartitionConfig", "asks for more than its partition has (nodes, CPUs, memory or GPUs) (PartitionConfig): "
                        "it will never start as it is", True),
    ("PartitionTimeLimit", "asks for more time than its partition allows (PartitionTimeLimit): it will never start "
                           "as it is", True),
    ("DependencyNeverSatisfied", "its dependency can never be met (DependencyNeverSatisfied): it will never start "
                                 "as it is", True),
    ("QOSMaxWallDurationPerJobLimit", "asks for more than its QOS allows per job (QOSMaxWallDurationPerJobLimit) "
                                      "(QOSMaxWallDurationPerJobLimit): it will never start as it is", True),
    ("AssocGrpGRES", "waiting (AssocGrpGRES)", False),
    ("ReqNodeNotAvail, UnavailableNodes:gpu[1-2]", "a node it asks for is not available (down, drained or reserved): "
                                                   "UnavailableNodes:gpu[1-2]", False),
    ("QOSGrpCpuLimit", "waiting: a limit of its QOS is reached (QOSGrpCpuLimit)", False),
])
def test_pending_with_each_reason(tmp_path, reason, words, never):
    d = JobDir(tmp_path)
    pending = SlurmJob("31", state="PENDING", reason="" if reason == "None" else reason,
                       submit_time="2026-12-07T10:00:00")
    c = conclude(d.job(slurm(pending)), now=datetime(2026, 12, 7, 10, 3, 5))
    assert (c.phase, c.never_starts, c.failed) == (P_QUEUED, never, never)
    assert c.headline == f"queued 3:05: {words}"


@pytest.mark.parametrize("state, code, signal, headline", [
    ("FAILED", 2, 0, "failed: exit code 2"),
    ("FAILED", 0, 9, "failed: killed by SIGKILL"),
    ("OUT_OF_MEMORY", 0, 125, "ran out of memory"),
    ("NODE_FAIL", 0, 0, "lost: a node it ran on failed"),
    ("PREEMPTED", 0, 0, "preempted by a higher-priority job"),
    ("CANCELLED", 0, 15, "cancelled"),
    ("BOOT_FAIL", 0, 0, "its nodes failed to boot"),
])
def test_every_end_slurm_tells(tmp_path, state, code, signal, headline):
    d = JobDir(tmp_path).write("slurm-31.out", WAIT, READY)
    c = conclude(d.job(slurm(SlurmJob("31", state=state, exit_code=code, signal=signal, nodes="n1", elapsed=60))))
    assert (c.phase, c.state, c.headline, c.failed, c.inferred) == (P_ENDED, state, headline, True, False)


@pytest.mark.parametrize("line, state", [
    ("slurmstepd: error: *** JOB 31 ON n1 CANCELLED AT 2026-12-07T10:20:00 DUE TO PREEMPTION ***", "PREEMPTED"),
    ("slurmstepd: error: *** JOB 31 ON n1 CANCELLED AT 2026-12-07T10:20:00 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR "
     "DETAILS ***", "NODE_FAIL"),
    ("slurmstepd: error: *** JOB 31 ON n1 CANCELLED AT 2026-12-07T10:20:00 ***", "CANCELLED"),
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=31.batch. Some of the step tasks have been OOM Killed.",
     "OUT_OF_MEMORY"),
])
def test_every_end_the_files_tell(tmp_path, line, state):
    d = JobDir(tmp_path).write("slurm-31.out", WAIT, READY, line)
    c = conclude(d.job())
    assert (c.phase, c.state, c.inferred, c.failed) == (P_ENDED, state, True, True)
    assert c.evidence[0].text == line


def test_a_service_killed_by_the_out_of_memory_killer_died_during_startup(tmp_path):
    d = JobDir(tmp_path).write("slurm-31.out", WAIT, "srun: error: n1: task 0: Out Of Memory", "  policy died during startup.")
    d.write("logs/policy-31.log", "INFO loading", "slurmstepd: error: Detected 1 oom_kill event in StepId=31.0. Some of "
                                  "the step tasks have been OOM Killed.")
    job = d.job()
    [policy] = job.links[0].services
    assert policy.state == SV_DIED and policy.out_of_memory and policy.detail == "died during startup: out of memory"
    assert policy.cause is not None and policy.cause.file == "mcqa/logs/policy-31.log"
    assert conclude(job).state == "FAILED"


def test_a_service_whose_traceback_ends_its_log(tmp_path):
    d = JobDir(tmp_path).write("slurm-31.out", WAIT, "srun: error: n1: task 0: Exited with exit code 1",
                               "  policy died during startup.")
    d.write("logs/policy-31.log", "Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
            "ValueError: max_model_len 32768 is larger than the model allows")
    [policy] = d.job().links[0].services
    assert policy.cause is not None and policy.cause.where() == "mcqa/logs/policy-31.log:3"


def test_a_job_slurm_forgot_is_told_from_its_files(tmp_path):
    d = JobDir(tmp_path).write("slurm-31.out", WAIT, READY, *END)
    c = conclude(d.job(slurm(forgotten=frozenset({"31"}))))
    assert (c.state, c.inferred) == ("COMPLETED", True)
    assert c.details == ("state inferred from files: Slurm no longer knows job 31 (older than it remembers)",)
    c = conclude(d.job(slurm(error="no `squeue` here (no Slurm client on this machine)")))
    assert c.details == ("state inferred from files: Slurm could not be asked: no `squeue` here "
                         "(no Slurm client on this machine)",)


def test_a_rejected_sbatch(tmp_path):
    bench = record.Benchmark("aime", "/l/aime", None, None, "sbatch: error: Batch job submission failed: "
                                                             "Invalid account or account/partition combination")
    c = conclude(fold(bench, None, [], None))
    assert (c.phase, c.failed) == (P_NOT_SUBMITTED, True)
    assert c.headline == ("sbatch refused it: sbatch: error: Batch job submission failed: Invalid account or "
                          "account/partition combination")


def test_a_chain_resumed_after_a_time_limit_and_which_link_wrote_which_rows(tmp_path):
    d = JobDir(tmp_path, RESUMABLE_SCRIPT)
    d.write(".gym_job_chain", "31", "32")
    d.write("slurm-31.out", "Auto-resume follow-up queued: 32 (afternotok:31)", WAIT, READY,
            "slurmstepd: error: *** JOB 31 ON n1 CANCELLED AT 2026-12-07T10:20:00 DUE TO TIME LIMIT ***", *END)
    d.write("logs/driver-31.log", "Skipping resume_from_cache because output_fpath /x/rollouts.jsonl doesn't exist!")
    d.write("slurm-32.out", "Previous job 31: TIMEOUT. Resuming...", "Auto-resume follow-up queued: 33 (afternotok:32)",
            WAIT, READY, *END)
    d.write("logs/driver-32.log", "Resumed from cache. Found:", "- 10 original input rows",
            "- 6 rows already done (in main jsonl)", "Finished rollout collection! View results at:")
    job = d.job(rows_total=10)
    assert [(ln.job_id, ln.state, ln.source) for ln in job.links] == [
        ("31", "TIMEOUT", FROM_FILES), ("32", "COMPLETED", FROM_FILES), ("33", "CANCELLED", FROM_FILES)]
    assert [(ln.rows_done_before, ln.rows_written) for ln in job.links] == [(0, 6), (6, 4), (None, None)]
    assert job.link_of_row(6) == "31" and job.link_of_row(7) == "32" and job.link_of_row(11) is None
    assert job.links[2].not_needed and job.links[2].services[0].state == SV_NOT_STARTED
    c = conclude(job)
    assert (c.phase, c.state, c.job_id, c.headline, c.failed) == (P_ENDED, "COMPLETED", "32", "completed", False)
    assert c.details[:3] == (
        "link 1: job 31 TIMEOUT, hit its time limit; slurmstepd: error: *** JOB 31 ON n1 CANCELLED AT "
        "2026-12-07T10:20:00 DUE TO TIME LIMIT ***; wrote rows 1-6",
        "link 2: job 32 COMPLETED, completed; resumed job 31 (TIMEOUT); wrote rows 7-10",
        "link 3: job 33 CANCELLED (DependencyNeverSatisfied), cancelled: not needed, the link before it ended the chain")
    # Slurm says the same of the unneeded successor.
    told = d.job(slurm(SlurmJob("31", state="TIMEOUT", work_dir=d.bench.job_dir),
                       SlurmJob("32", state="COMPLETED", exit_code=0, signal=0, work_dir=d.bench.job_dir),
                       SlurmJob("33", state="CANCELLED", reason="DependencyNeverSatisfied", work_dir=d.bench.job_dir)))
    assert conclude(told).state == "COMPLETED" and told.links[2].not_needed


def test_a_running_link_s_queued_successor_only_stands_by(tmp_path):
    d = JobDir(tmp_path, RESUMABLE_SCRIPT)
    d.write("slurm-31.out", "Auto-resume follow-up queued: 32 (afternotok:31)", WAIT, READY)
    c = conclude(d.job(slurm(SlurmJob("31", state="RUNNING", elapsed=60, time_limit=1200, nodes="n1"),
                             SlurmJob("32", state="PENDING", reason="Dependency", dependency="afternotok:31(unfulfilled)",
                                      work_dir=d.bench.job_dir))))
    assert (c.phase, c.job_id, c.headline) == (P_RUNNING, "31", "running on n1 for 1:00 of 20:00")
    assert c.details[1] == "link 2: job 32 PENDING (Dependency), queued"
    # From files alone the successor waits on its running predecessor.
    files_only = d.job()
    assert [(ln.state, ln.reason) for ln in files_only.links] == [("RUNNING", ""), ("PENDING", "Dependency")]


def test_successors_slurm_finds_by_their_work_dir_join_the_chain_in_order(tmp_path):
    d = JobDir(tmp_path, RESUMABLE_SCRIPT)
    d.write("slurm-31.out", "Auto-resume follow-up queued: 32 (afternotok:31)", WAIT)
    other = SlurmJob("99", state="RUNNING", work_dir="/elsewhere/mcqa")
    job = d.job(slurm(SlurmJob("33", state="PENDING", reason="Dependency", dependency="afternotok:32(unfulfilled)",
                               work_dir=d.bench.job_dir),
                      SlurmJob("32", state="RUNNING", command=f"{d.bench.job_dir}/job.sh 31", work_dir=d.bench.job_dir),
                      SlurmJob("31", state="FAILED", exit_code=1, signal=0, work_dir=d.bench.job_dir), other))
    assert [(ln.job_id, ln.state) for ln in job.links] == [("31", "FAILED"), ("32", "RUNNING"), ("33", "PENDING")]
    assert conclude(job).job_id == "32"


def test_a_link_that_could_not_queue_its_follow_up_says_the_chain_ends(tmp_path):
    d = JobDir(tmp_path, RESUMABLE_SCRIPT)
    d.write("slurm-31.out", "WARNING: Failed to submit auto-resume follow-up. Chain will NOT continue on failure.", WAIT)
    assert d.job().links[0].action == "could not queue its follow-up: the chain ends with it"
    d.write("slurm-32.out", "Previous job 31: TIMEOUT. Resuming...",
            "WARNING: Failed to submit auto-resume follow-up. Chain will NOT continue on failure.")
    assert d.job().link("32").action == (
        "resumed job 31 (TIMEOUT); could not queue its follow-up: the chain ends with it")


def test_a_service_gym_names_that_job_sh_does_not(tmp_path):
    d = JobDir(tmp_path, "#!/bin/bash\n")
    d.write("slurm-31.out", "Waiting for judge at http://localhost:9000...", "  judge ready.", *END)
    [judge] = d.job().links[0].services
    assert (judge.name, judge.state) == ("judge", SV_ENDED)


@pytest.mark.parametrize("prologue, state, headline, failed", [
    (("Previous job 31 was cancelled. Stopping chain.",), "CANCELLED",
     "ended: stopped the chain: job 31 was cancelled; job 31: slurmstepd: error: *** JOB 31 ON n1 CANCELLED AT "
     "2026-12-07T10:20:00 ***", True),
    (("Previous job 31: TIMEOUT. Resuming...",
      "Accumulated walltime (180000s) reached max_walltime cap (48:00:00 = 172800s). Stopping chain."), "TIMEOUT",
     "ended: stopped the chain: accumulated walltime reached its cap (48:00:00 = 172800s); job 31: slurmstepd: "
     "error: *** JOB 31 ON n1 CANCELLED AT 2026-12-07T10:20:00 DUE TO TIME LIMIT ***", True),
    (("Previous job 31 completed successfully. Exiting.",), "COMPLETED", "completed", False),
])
def test_a_link_whose_prologue_ended_it_speaks_for_the_link_before(tmp_path, prologue, state, headline, failed):
    due = {"CANCELLED": "", "TIMEOUT": " DUE TO TIME LIMIT", "COMPLETED": None}[state]
    d = JobDir(tmp_path, RESUMABLE_SCRIPT)
    end = () if due is None else (f"slurmstepd: error: *** JOB 31 ON n1 CANCELLED AT 2026-12-07T10:20:00{due} ***",)
    d.write("slurm-31.out", "Auto-resume follow-up queued: 32 (afternotok:31)", WAIT, READY, *end, *END)
    d.write("slurm-32.out", *prologue)
    job = d.job()
    assert job.links[0].state == state and job.links[1].prologue_only
    assert job.links[1].services[0].state == SV_NOT_STARTED
    c = conclude(job)
    assert (c.job_id, c.state, c.headline, c.failed) == ("32", "COMPLETED", headline, failed)


def _as_they_grew(case: str):
    """(time, files cut to their size then, Slurm's squeue line then) at every change recorded in _meta."""
    meta = SLURM / case / "_meta"
    growth = [ln.split() for ln in (meta / "files.log").read_text().splitlines()]
    states = [ln.split(maxsplit=2) for ln in (meta / "states.log").read_text().splitlines()]
    times = sorted({float(g[0]) for g in growth} | {float(s[0]) for s in states})
    for t in times:
        sizes = {g[3]: int(g[2]) for g in growth if float(g[0]) <= t}
        rows = [s[2] for s in states if float(s[0]) <= t]
        yield t, sizes, rows[-1] if rows else None


@pytest.mark.parametrize("case, phases", [
    ("real_mcqa_cold", [("queued", "not_started"), ("running", "starting"), ("running", "healthy"),
                        ("ended", "ended")]),
    ("svc_never_healthy_timeout", [("queued", "not_started"), ("running", "starting"),
                                   ("running", "never_healthy"), ("ended", "never_healthy")]),
])
def test_a_submission_read_as_it_grew(tmp_path, case, phases):
    """The recorded files cut to their sizes at each moment, with Slurm's state then: what a live
    reader sees, moment by moment."""
    from gymwatch.core.cluster.slurmcli import parse_squeue
    src = next((SLURM / case).glob("gym-job-*"))
    header = "JOBID|NAME|STATE|REASON|TIME|TIME_LIMIT|CPUS|NODELIST|DEPENDENCY\n"
    seen = []
    for t, sizes, row in _as_they_grew(case):
        root = tmp_path / f"t{t}" / src.name
        for name, size in sizes.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            data = (src / name).read_bytes()[:size]
            (root / name).write_bytes(data[:data.rfind(b"\n") + 1] if name.endswith((".out", ".log")) else data)
        if not (root / "gym-job.json").is_file():
            continue
        sub = record.resolve(root)
        bench = sub.benchmarks[0]
        script = jobscript.read(bench.local_dir / "job.sh")
        facts, files = read_facts(sub, bench, script)
        poll = SlurmPoll(jobs={j.job_id: j for j in parse_squeue(header + row)}) if row else None
        job = fold(bench, script, facts, poll, files=files)
        step = (conclude(job).phase, job.links[0].services[0].state)
        if not seen or seen[-1] != step:
            seen.append(step)
    assert seen == phases
