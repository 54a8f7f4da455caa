"""A submitted job's logs line by line into facts: the batch log (batchlog.py), a step's own log
(steplog.py) and Slurm's lines in either (slurmlines.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gymwatch.core.cluster import batchlog, steplog
from gymwatch.core.cluster.facts import (
    A_EXIT_DONE,
    A_RESUME,
    A_RETRY,
    A_STOP_CANCELLED,
    ChainStopped,
    CollectionFinished,
    FollowUpFailed,
    FollowUpQueued,
    HealthGaveUp,
    HealthReady,
    HealthWait,
    Listening,
    OutOfMemory,
    PreviousJob,
    ResumedRows,
    SlurmError,
    SlurmKill,
    StepAborted,
    StepErrorLine,
    TaskEnded,
)
from gymwatch.core.model import Evidence

SLURM = Path(__file__).parent / "fixtures" / "gym-0.7.0-slurm"


def batch(text: str, job_id: str = "17"):
    return batchlog.facts(job_id, Evidence("mcqa/slurm-17.out", 3, text))


def one(text: str, job_id: str = "17"):
    [fact] = batch(text, job_id)
    return fact


def step(text: str, name: str = "policy", job_id: str = "17"):
    return steplog.facts(job_id, name, Evidence(f"mcqa/logs/{name}-17.log", 5, text))


def test_every_line_of_the_recorded_batch_logs():
    seen = []
    for path in sorted(SLURM.glob("*/gym-job-*/mcqa/slurm-*.out")):
        job_id = path.stem.split("-")[1]
        for n, text in enumerate(path.read_text().splitlines(), 1):
            facts = batchlog.facts(job_id, Evidence(path.name, n, text))
            assert len(facts) == 1, (path, n, text)     # every line of these logs means something
            assert facts[0].ev == Evidence(path.name, n, text) and facts[0].job_id == job_id
            seen.append(type(facts[0]).__name__)
    assert set(seen) == {"HealthWait", "HealthReady", "HealthDied", "HealthGaveUp", "TaskEnded", "StepAborted",
                         "FollowUpQueued", "PreviousJob", "ChainStopped"}


def test_the_health_loop_lines():
    assert one("Waiting for policy at http://localhost:18601...") == HealthWait(
        "17", Evidence("mcqa/slurm-17.out", 3, "Waiting for policy at http://localhost:18601..."),
        service="policy", url="http://localhost:18601")
    assert isinstance(one("  policy ready."), HealthReady)
    assert one("  judge_2 died during startup.").service == "judge_2"
    gave_up = one("ERROR: policy did not become healthy after 360 attempts.")
    assert isinstance(gave_up, HealthGaveUp) and gave_up.attempts == 360


@pytest.mark.parametrize("text, code, how", [
    ("srun: error: vm: task 0: Exited with exit code 2", 2, "Exited with exit code 2"),
    ("srun: error: node-a01: tasks 0-3: Exited with exit code 1", 1, "Exited with exit code 1"),
    ("srun: error: vm: task 0: Terminated", None, "Terminated"),
    ("srun: error: gpu7: task 0: Segmentation fault (core dumped)", None, "Segmentation fault (core dumped)"),
    ("srun: error: gpu7: task 0: Killed", None, "Killed"),
    ("srun: error: gpu7: task 0: Out Of Memory", None, "Out Of Memory"),
])
def test_srun_says_how_a_task_ended(text, code, how):
    fact = one(text)
    assert isinstance(fact, TaskEnded) and (fact.exit_code, fact.how) == (code, how)


def test_a_step_aborted_at_the_job_s_end():
    assert isinstance(one("srun: Job step aborted: Waiting up to 32 seconds for job step to finish."), StepAborted)


@pytest.mark.parametrize("text, entity, step, outcome, due", [
    ("slurmstepd: error: *** JOB 31 ON gpu7 CANCELLED AT 2026-12-06T05:00:01 DUE TO TIME LIMIT ***",
     "JOB", "31", "CANCELLED", "TIME LIMIT"),
    ("slurmstepd: error: *** JOB 31 ON gpu7 CANCELLED AT 2026-12-06T05:00:01 DUE TO PREEMPTION ***",
     "JOB", "31", "CANCELLED", "PREEMPTION"),
    ("slurmstepd: error: *** JOB 31 ON gpu7 CANCELLED AT 2026-12-06T05:00:01 DUE TO NODE FAILURE, SEE SLURMCTLD "
     "LOG FOR DETAILS ***", "JOB", "31", "CANCELLED", "NODE FAILURE"),
    ("slurmstepd: error: *** JOB 31 ON gpu7 CANCELLED AT 2026-12-06T05:00:01 ***", "JOB", "31", "CANCELLED", ""),
    ("slurmstepd: error: *** JOB 31 CANCELLED AT 2016-01-01T00:00:00 DUE TO TIME LIMIT ***",   # older Slurm
     "JOB", "31", "CANCELLED", "TIME LIMIT"),
    ("slurmstepd-vm: error: *** STEP 18.0 ON vm FAILED (non-zero exit code or other failure mode) ***",
     "STEP", "18.0", "FAILED", ""),
])
def test_slurmstepd_s_word_on_a_job_or_a_step(text, entity, step, outcome, due):
    fact = one(text, job_id="31")
    assert isinstance(fact, SlurmKill) and (fact.entity, fact.step, fact.outcome, fact.due) == (entity, step, outcome, due)


@pytest.mark.parametrize("text, slurm_step", [
    ("slurmstepd: error: Detected 1 oom_kill event in StepId=17.batch. Some of the step tasks have been OOM Killed.",
     "17.batch"),
    ("slurmstepd: error: Detected 2 oom-kill event(s) in step 17.0 cgroup. Some of your processes may have been "
     "killed by the cgroup out-of-memory handler.", "17.0"),
])
def test_the_kernel_s_out_of_memory_killer(text, slurm_step):
    fact = one(text)
    assert isinstance(fact, OutOfMemory) and fact.kernel and fact.slurm_step == slurm_step and fact.origin == ""


def test_other_slurm_errors_and_their_kind():
    assert one("slurmstepd-vm: error: execve(): vllm: No such file or directory").kind == "exec"
    pyxis = one("slurmstepd: error: pyxis: container start failed with error code: 1")
    assert isinstance(pyxis, SlurmError) and pyxis.kind == "container"
    assert one("srun: error: Unable to create step for job 17: Memory required by task is not available").kind == "error"


def test_the_resume_prologue_lines():
    assert one("Auto-resume follow-up queued: 26 (afternotok:25)", "25") == FollowUpQueued(
        "25", Evidence("mcqa/slurm-17.out", 3, "Auto-resume follow-up queued: 26 (afternotok:25)"), next_id="26")
    assert isinstance(one("WARNING: Failed to submit auto-resume follow-up. Chain will NOT continue on failure."),
                      FollowUpFailed)
    cases = {
        "Previous job 25: TIMEOUT. Resuming...": ("25", "TIMEOUT", A_RESUME, None),
        "Previous job 25: PREEMPTED. Resuming...": ("25", "PREEMPTED", A_RESUME, None),
        "Previous job 25: state unknown (sacct returned nothing). Resuming...": ("25", "", A_RESUME, None),
        "Previous job 12: FAILED. Infra retry 1/2...": ("12", "FAILED", A_RETRY, 1),
        "Previous job 12: OUT_OF_MEMORY. Infra retry 2/3...": ("12", "OUT_OF_MEMORY", A_RETRY, 2),
        "Previous job 25 completed successfully. Exiting.": ("25", "COMPLETED", A_EXIT_DONE, None),
        "Previous job 25 was cancelled. Stopping chain.": ("25", "CANCELLED", A_STOP_CANCELLED, None),
    }
    for text, (prev, state, action, retry) in cases.items():
        fact = one(text, "26")
        assert isinstance(fact, PreviousJob) and (fact.previous_id, fact.state, fact.action, fact.retry) == (
            prev, state, action, retry), text
    limit = one("Infra retry limit (2) reached after FAILED. Stopping.")
    assert isinstance(limit, ChainStopped) and (limit.why, limit.limit, limit.state) == ("retry_limit", "2", "FAILED")
    cap = one("Accumulated walltime (180000s) reached max_walltime cap (48:00:00 = 172800s). Stopping chain.")
    assert isinstance(cap, ChainStopped) and cap.why == "walltime_cap" and cap.limit == "48:00:00 = 172800s"


@pytest.mark.parametrize("text", ["", "Head node IP address: 10.0.0.1", "hello srun world", "*** not slurm",
                                  "policy ready.", "Previous job unparsable"])
def test_other_lines_say_nothing(text):
    assert batch(text) == ()


def test_a_service_log_recorded():
    lines = (SLURM / "resumable_chain_svc_dies_with_sacct").glob("gym-job-*/mcqa/logs/policy-12.log")
    [text] = next(lines).read_text().splitlines()
    [fact] = step(text, job_id="12")
    assert isinstance(fact, SlurmError) and fact.kind == "exec" and fact.origin == "policy"
    [cancel] = step("slurmstepd-vm: error: *** STEP 17.0 ON vm CANCELLED AT 2026-12-06T04:53:43 ***")
    assert isinstance(cancel, SlurmKill) and cancel.entity == "STEP" and cancel.origin == "policy"


@pytest.mark.parametrize("text, url", [
    ("INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)", "http://0.0.0.0:8000"),
    ("(APIServer pid=1) INFO 12-06 04:52:53 [api_server.py:1900] Starting vLLM API server 0 on http://0.0.0.0:8000",
     "http://0.0.0.0:8000"),
    ("stub_policy listening on http://127.0.0.1:18601 rules=/x.json", "http://127.0.0.1:18601"),
])
def test_a_server_says_where_it_listens(text, url):
    [fact] = step(text)
    assert isinstance(fact, Listening) and fact.url == url and fact.step == "policy"


def test_a_service_s_own_errors():
    [oom] = step("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert isinstance(oom, OutOfMemory) and not oom.kernel and oom.origin == "policy"
    [exc] = step("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens")
    assert isinstance(exc, StepErrorLine) and exc.marker == "exception_line"
    [err] = step("(EngineCore_0 pid=321) ERROR 12-06 04:53:10 [core.py:700] EngineCore failed to start.")
    assert isinstance(err, StepErrorLine)
    assert step("INFO 12-06 04:52:53 Loading weights took 3.2 seconds") == ()


def test_the_driver_s_lines_that_place_it_in_the_chain():
    [done] = step("Finished rollout collection! View results at:", "driver")
    assert isinstance(done, CollectionFinished)
    [resumed] = step("- 6 rows already done (in main jsonl)", "driver")
    assert isinstance(resumed, ResumedRows) and resumed.rows_done == 6
    [fresh] = step("Clearing output fpath since `resume_from_cache=False`!", "driver")
    assert isinstance(fresh, ResumedRows) and fresh.rows_done == 0
    # The driver's own errors are the run reducer's to read; Gym's server lines are not the driver's.
    assert step("ValueError: boom", "driver") == ()
    assert step("(mcqa) Finished rollout collection!", "driver") == ()
    [gone] = step("slurmstepd: error: execve(): gym: No such file or directory", "driver")
    assert isinstance(gone, SlurmError) and gone.origin == "driver"
