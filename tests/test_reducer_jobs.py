"""A submitted run's job through the `Reducer` front (core/reducer/jobs.py): its own files' lines
and Slurm's answers make `RunState.job`, its service steps servers of kind `service`, and the
verdict where Gym's lines cannot decide (queued, a service that died or never became healthy, a
job Slurm will never start, sbatch's refusal, a time limit, a cancel, a failed job). Driven here
line by line as a reader would, with the recorded submissions and Slurm's recorded answers."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from gymwatch.core.cluster import files as F, jobscript, record
from gymwatch.core.cluster.model import FROM_FILES, FROM_SLURM, P_ENDED, P_QUEUED
from gymwatch.core.cluster.record import job_id_key
from gymwatch.core.cluster.slurmcli import SlurmJob, SlurmPoll
from gymwatch.core.layout import BOTH
from gymwatch.core.model import (
    EXITED,
    FAILED,
    K_SERVICE,
    PENDING,
    READY,
    STARTING,
    T_COMPLETED,
    T_MISSING,
    T_PENDING,
    V_COLLECTING,
    V_COLLECTION_ABORTED,
    V_INCOMPLETE,
    V_OK,
    V_QUEUED,
    V_STARTING,
    V_STARTUP_FAILED,
    RunState,
)
from gymwatch.core.reducer import Reducer
from gymwatch.core.verdict import EXIT_OK, EXIT_RUN, EXIT_TRIALS, verdict
from submissions import final_poll, grown, run_dir, squeue_at


def reduce(sub_dir: Path, *answers: SlurmPoll, asked_at: datetime | None = None) -> RunState:
    """`reducer()`'s state."""
    return reducer(sub_dir, *answers, asked_at=asked_at).state


def reducer(sub_dir: Path, *answers: SlurmPoll, asked_at: datetime | None = None) -> Reducer:
    """The benchmark named (a job dir), else the first, of the submission at `sub_dir` read through the Reducer front: its
    job's files line by line (finding the chain's links as they are named), the last link's driver
    log as Gym's captured output, its rows, then Slurm's answers."""
    sub = record.resolve(sub_dir)
    bench = sub.benchmark(sub.focus) if sub.focus else sub.benchmarks[0]
    script = jobscript.read(bench.local_dir / "job.sh") if bench.local_dir else None
    r = Reducer(RunState(root=str(sub.root), kind="slurm_job"))
    read: set[Path] = set()
    for _ in range(6):                       # a chain's links appear as the files before them name them
        files = F.job_files(sub, bench, script, r.job_ids())
        r.job_known(bench, script, files, record.refusal_line(sub, bench))
        for f in files:
            if f.kind in (F.JOBSCRIPT, F.ROLLOUTS) or f.path in read or not f.path.is_file():
                continue
            read.add(f.path)
            for n, text in enumerate(f.path.read_text(errors="replace").splitlines(), 1):
                r.job_line(f, n, text)
    drivers = [f for f in files if f.kind == F.DRIVER and f.path.is_file()]
    if drivers:
        d = max(drivers, key=lambda f: job_id_key(f.job_id))
        for n, text in enumerate(d.path.read_text(errors="replace").splitlines(), 1):
            r.stream_line(BOTH, d.name, n, text)
    rows = next((f for f in files if f.kind == F.ROLLOUTS), None)
    if rows is not None:
        inputs = rows.path.with_name(rows.path.stem + "_materialized_inputs.jsonl")
        for path, feed in ((inputs, r.materialized_row), (rows.path, r.rollout_row)):
            if path.is_file():
                for n, raw in enumerate(path.read_bytes().splitlines(), 1):
                    feed(str(path.relative_to(sub.root)), n, raw)
    for poll in answers:
        r.slurm_answer(poll, asked_at)
    r.settle()
    return r


def services(state: RunState) -> dict[str, tuple[str, str]]:
    return {s.name: (s.state, s.phase) for s in state.servers.values() if s.kind == K_SERVICE}


# --- every recorded submission from files alone, then with Slurm's last answer -------------------

def test_a_completed_run_s_normal_end_is_not_a_failure():
    for answers in ((), (final_poll("completed"),)):
        state = reduce(run_dir("completed"), *answers)
        v = verdict(state)
        assert (v.name, v.reason, v.exit_code) == (V_OK, "10 trials completed", EXIT_OK)
        [link] = state.job.links
        assert (link.job_id, link.state, link.normal_end) == ("101", "COMPLETED", True)
        assert link.source == (FROM_SLURM if answers else FROM_FILES)
        assert state.job_conclusion.inferred is not answers
        policy = state.servers["policy"]
        assert (policy.kind, policy.state, policy.phase) == (K_SERVICE, EXITED, "ended with the job")
        assert policy.became_ready and policy.ready_evidence.where() == "mcqa/slurm-101.out:2"
        assert policy.log_file == "mcqa/logs/policy-101.log" and policy.port == 29861
        # Gym's own servers, read from the driver log's `(name) ` lines, beside the service
        assert {s.name for s in state.servers.values() if s.kind != K_SERVICE} == {
            "policy_model", "mcqa", "mcqa_simple_agent", "mcqa_environment_server"}
        assert state.parent.alive is False and state.collector.alive is False     # the job ended


def test_a_service_that_dies_during_startup_is_a_startup_failure_at_its_own_error():
    for answers in ((), (final_poll("svc_dies_at_startup"),)):
        state = reduce(run_dir("svc_dies_at_startup"), *answers)
        v = verdict(state)
        inferred = "" if answers else " (Slurm state inferred from files)"
        assert (v.name, v.exit_code) == (V_STARTUP_FAILED, EXIT_RUN)
        assert v.reason == ("service policy (job 201) died during startup: exit code 1: RuntimeError: stand-in "
                            "vllm: told to die during startup (--stub-mode die)" + inferred)
        assert v.evidence.where() == "mcqa/logs/policy-201.log:9"
        assert [e.where() for e in v.related] == ["mcqa/slurm-201.out:3"]      # `  policy died during startup.`
        policy = state.servers["policy"]
        assert (policy.state, policy.failure.where()) == (FAILED, "mcqa/logs/policy-201.log:9")
        assert policy.failure_reason.startswith("died during startup: exit code 1: RuntimeError: stand-in vllm")


def test_a_service_that_never_became_healthy():
    for answers in ((), (final_poll("svc_never_healthy_timeout"),)):
        state = reduce(run_dir("svc_never_healthy_timeout"), *answers)
        v = verdict(state)
        assert v.name == V_STARTUP_FAILED and v.evidence.where() == "mcqa/slurm-18.out:2"
        assert v.reason.startswith("service policy (job 18) never healthy: 2 of 2 attempts over 0:10")
        assert services(state) == {"policy": (FAILED, "never healthy: 2 of 2 attempts over 0:10")}


def test_a_chain_whose_service_died_until_its_retry_limit_stopped_it():
    state = reduce(run_dir("resumable_chain_svc_dies_with_sacct"), final_poll("resumable_chain_svc_dies_with_sacct"))
    v = verdict(state)
    assert [ln.job_id for ln in state.job.links] == ["12", "13", "14", "15"]
    assert v.name == V_STARTUP_FAILED and v.evidence.where() == "mcqa/logs/policy-14.log:1"
    assert v.reason == ("service policy (job 14) died during startup: exit code 2: slurmstepd-vm: error: execve(): "
                        "vllm: No such file or directory; then stopped the chain: infra retry limit (2) reached "
                        "after FAILED")


def test_a_driver_that_aborts_keeps_gym_s_own_abort_though_the_driver_then_segfaulted():
    for answers in ((), (final_poll("driver_aborts"),)):
        state = reduce(run_dir("driver_aborts"), *answers)
        v = verdict(state)
        assert (v.name, v.exit_code) == (V_COLLECTION_ABORTED, EXIT_RUN)
        assert v.reason.startswith("the collector aborted: mcqa_environment_server answered 500 on /run")
        assert "; job 401 failed: " in v.reason and v.reason.endswith("a job step ended: Segmentation fault"
                                                                     + ("" if answers else " (Slurm state inferred from files)"))
        assert state.servers["policy"].state == EXITED


def test_a_job_cancelled_while_queued_is_queued_from_files_and_incomplete_from_slurm():
    state = reduce(run_dir("pending_cancelled"))
    v = verdict(state)
    assert (v.name, v.exit_code, v.evidence) == (V_QUEUED, EXIT_OK, None)
    assert v.reason == ("job 301 has not started: no output from it yet (still queued, or it never ran) "
                        "(Slurm state inferred from files)")
    assert services(state) == {"policy": (PENDING, "not started: job 301 has not started")}
    v = verdict(reduce(run_dir("pending_cancelled"), final_poll("pending_cancelled")))
    assert (v.name, v.reason, v.exit_code) == (V_INCOMPLETE, "job 301 was cancelled before it started", EXIT_TRIALS)


def test_a_queued_job_says_why_it_waits_how_long_and_when_slurm_expects_it():
    """The hand-recorded begin-time job, at its PENDING answer (scontrol gives its submit time)."""
    from gymwatch.core.cluster.slurmcli import parse_scontrol
    from submissions import CASES
    [job] = parse_scontrol((CASES["pending_begintime_cancelled"] / "_meta/scontrol/4-01-PENDING.txt").read_text())
    state = reduce(run_dir("pending_begintime_cancelled"), SlurmPoll(jobs={"4": job}),
                   asked_at=datetime(2026, 12, 6, 4, 40, 13))
    v = verdict(state)
    assert (v.name, v.exit_code) == (V_QUEUED, EXIT_OK)
    assert v.reason == ("job 4 queued 4:00: waiting for its begin time; Slurm expects it to start at "
                        "2026-12-06T05:36:13")
    assert state.parent.alive is None and state.activity.processes_seen     # in Slurm's hands, not ended


def test_sbatch_refusing_the_job_is_a_startup_failure_at_the_record_s_line():
    state = reduce(run_dir("sbatch_refused"))
    v = verdict(state)
    assert (v.name, v.exit_code) == (V_STARTUP_FAILED, EXIT_RUN)
    assert v.reason == ("sbatch refused the job: sbatch: error: invalid partition specified: nosuch sbatch: error: "
                        "Batch job submission failed: Invalid partition name specified")
    assert v.evidence.where() == "gym-job.json:15" and '"error": "sbatch: error: invalid' in v.evidence.text
    assert state.job.links == [] and services(state) == {"policy": (PENDING, "not started: sbatch refused the job")}


def test_a_resume_chain_is_one_run_its_last_link_decides():
    for answers in ((), (final_poll("timeout_resumed"),)):
        state = reduce(run_dir("timeout_resumed"), *answers)
        v = verdict(state)
        assert (v.name, v.reason) == (V_OK, "10 trials completed")
        assert [ln.state for ln in state.job.links][:4] == ["TIMEOUT", "TIMEOUT", "TIMEOUT", "COMPLETED"]
        assert [(ln.rows_done_before, ln.rows_written) for ln in state.job.links[:4]] == [
            (0, 2), (2, 4), (6, 4), (10, 0)]
        assert state.job_conclusion.job_id == "704"


def test_two_benchmarks_each_read_as_its_own_run():
    sub = run_dir("two_benchmarks_one_waits")
    state = reduce(sub / "mcqa_again", final_poll("two_benchmarks_one_waits"))
    assert state.job.benchmark == "mcqa_again" and [ln.job_id for ln in state.job.links] == ["602"]
    assert verdict(state).name == V_OK


# --- moments of a run (the files as they were, Slurm's answer then) ------------------------------

def test_a_time_limit_with_its_successor_queued_is_queued_to_resume(tmp_path):
    """timeout_resumed at 155 s: job 701 hit its time limit part-way (Slurm was still finishing
    it off then), 702 queued to resume it."""
    sub = grown("timeout_resumed", 155.0, tmp_path)
    state = reduce(sub, squeue_at("timeout_resumed", 155.0))
    assert verdict(state).name == V_COLLECTING and state.job_conclusion.job_id == "701"   # COMPLETING
    work = str(record.resolve(sub).benchmarks[0].job_dir)
    state = reduce(sub, SlurmPoll(jobs={"701": SlurmJob("701", state="TIMEOUT", reason="TimeLimit", work_dir=work),
                                        "702": SlurmJob("702", state="PENDING", reason="Priority", work_dir=work)}))
    v = verdict(state)
    written = sum(t.status == T_COMPLETED for t in state.trials.values())
    assert 0 < written < 10
    assert (v.name, v.exit_code) == (V_QUEUED, EXIT_OK)
    assert v.reason == ("job 702 queued: waiting: other jobs come first (priority); it resumes job 701, which hit "
                        f"its time limit; {written} of 10 trials written so far")
    assert not any(t.status == T_MISSING for t in state.trials.values())    # the chain goes on


def test_a_time_limit_with_nothing_to_resume_it_is_incomplete(tmp_path):
    """timeout_resumed at 140 s (job 701 collecting, 2 rows written), as if 701 could not queue its
    follow-up; then Slurm says it hit its time limit."""
    sub = grown("timeout_resumed", 140.0, tmp_path)
    out = sub / "mcqa" / "slurm-701.out"
    out.write_text(out.read_text().replace("Auto-resume follow-up queued: 702 (afternotok:701)",
                                           "WARNING: Failed to submit auto-resume follow-up."))
    work = str(record.resolve(sub).benchmarks[0].job_dir)
    state = reduce(sub, SlurmPoll(jobs={"701": SlurmJob("701", state="TIMEOUT", reason="TimeLimit", time_limit=120,
                                                        elapsed=144, work_dir=work, nodes="vm")}))
    v = verdict(state)
    assert [ln.job_id for ln in state.job.links] == ["701"]
    assert (v.name, v.exit_code) == (V_INCOMPLETE, EXIT_TRIALS)
    assert v.reason == "the job hit its 2 min time limit (job 701): 2 of 10 trials written"
    assert sum(t.status == T_MISSING for t in state.trials.values()) == 8


def test_a_chain_s_successor_cancelled_before_it_started_leaves_the_run_incomplete(tmp_path):
    sub = grown("timeout_resumed", 155.0, tmp_path)
    work = str(record.resolve(sub).benchmarks[0].job_dir)
    state = reduce(sub, SlurmPoll(jobs={"701": SlurmJob("701", state="TIMEOUT", reason="TimeLimit", work_dir=work),
                                        "702": SlurmJob("702", state="CANCELLED", work_dir=work)}))
    v = verdict(state)
    written = sum(t.status == T_COMPLETED for t in state.trials.values())
    assert (v.name, v.exit_code) == (V_INCOMPLETE, EXIT_TRIALS)
    assert v.reason == f"job 702 was cancelled before it started: {written} of 10 trials written"


@pytest.mark.parametrize("t, want, service", [
    (4.5, V_QUEUED, (PENDING, "not started: job 101 has not started")),
    (10.0, V_STARTING, (STARTING, "waiting for its health check (up to 12 attempts, 5s apart): "
                                  "http://localhost:29861/v1/models")),
])
def test_a_completed_run_moment_by_moment(tmp_path, t, want, service):
    state = reduce(grown("completed", t, tmp_path), squeue_at("completed", t))
    v = verdict(state)
    assert v.name == want and services(state)["policy"] == service
    if want == V_STARTING:
        assert v.reason.startswith("waiting for policy; job 101 running on vm for ")


def test_a_running_job_while_its_service_is_healthy_and_gym_starts(tmp_path):
    state = reduce(grown("completed", 20.0, tmp_path), squeue_at("completed", 20.0))
    assert services(state)["policy"][0] == READY
    assert state.activity.processes_seen and state.parent.alive is None      # Slurm says it runs


# --- what Slurm alone can tell --------------------------------------------------------------------

def test_a_job_slurm_will_never_start_is_a_startup_failure(tmp_path):
    sub = grown("completed", 4.5, tmp_path)
    work = str(record.resolve(sub).benchmarks[0].job_dir)
    state = reduce(sub, SlurmPoll(jobs={"101": SlurmJob("101", state="PENDING", reason="PartitionConfig",
                                                        work_dir=work)}))
    v = verdict(state)
    assert (v.name, v.exit_code, v.evidence) == (V_STARTUP_FAILED, EXIT_RUN, None)
    assert v.reason == ("Slurm will never start job 101: asks for more than its partition has (nodes, CPUs, "
                        "memory or GPUs) (PartitionConfig)")


@pytest.mark.parametrize("state_, words", [
    ("OUT_OF_MEMORY", "job 401 ran out of memory"),
    ("NODE_FAIL", "job 401 lost: a node it ran on failed"),
    ("PREEMPTED", "job 401 preempted by a higher-priority job"),
    ("CANCELLED", "job 401 was cancelled"),
])
def test_a_job_that_ended_without_an_abort_of_gym_s_own_is_incomplete(tmp_path, state_, words):
    """driver_aborts, cut before Gym's abort: 4 rows written, then Slurm ends the job."""
    sub = grown("driver_aborts", 124.6, tmp_path)
    work = str(record.resolve(sub).benchmarks[0].job_dir)
    state = reduce(sub, SlurmPoll(jobs={"401": SlurmJob("401", state=state_, work_dir=work, nodes="vm")}))
    v = verdict(state)
    assert (v.name, v.exit_code) == (V_INCOMPLETE, EXIT_TRIALS)
    assert v.reason.startswith(words) and v.reason.endswith("4 of 10 trials written")
    assert not any(t.status == T_PENDING for t in state.trials.values())


def test_slurm_s_answer_is_folded_in_when_it_comes(tmp_path):
    """One reducer, read once, then told by Slurm: the job and the verdict follow the answer."""
    sub = grown("completed", 4.5, tmp_path)
    state = reduce(sub)
    assert verdict(state).name == V_QUEUED and state.job_conclusion.inferred
    state = reduce(sub, squeue_at("completed", 4.5))
    assert state.job_conclusion.phase == P_QUEUED and not state.job_conclusion.inferred
    assert verdict(state).reason == "job 101 queued: waiting to be scheduled"


def test_a_job_ended_by_slurm_marks_its_missing_trials(tmp_path):
    sub = grown("driver_aborts", 124.6, tmp_path)
    alive = reduce(sub, squeue_at("driver_aborts", 60.0))
    assert alive.job_conclusion.phase != P_ENDED
    assert not any(t.status == T_MISSING for t in alive.trials.values())
