"""Facts read from a benchmark's files, one line at a time: what the fold (`job.py`) is made of.

Each fact names the Slurm job (chain link) whose file it came from and carries its evidence (the
file, relative to the submission dir, its 1-based line and its text). Facts are plain frozen
values: reading a file twice gives equal facts, and the fold orders them by their evidence, so
neither the order nor the chunks the files were read in change the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..model import Evidence


@dataclass(frozen=True, slots=True)
class Fact:
    job_id: str
    ev: Evidence


# --- Slurm's own lines (slurmlines.py), in the batch log or a step's log (`origin`) ---
# TaskEnded, StepAborted, SlurmKill, OutOfMemory, SlurmError

# --- the batch log, slurm-<id>.out: Gym's health loop and resume prologue ---

@dataclass(frozen=True, slots=True)
class HealthWait(Fact):
    """`Waiting for NAME at URL...`: the health loop for a service began."""
    service: str
    url: str


@dataclass(frozen=True, slots=True)
class HealthReady(Fact):
    """`  NAME ready.`"""
    service: str


@dataclass(frozen=True, slots=True)
class HealthDied(Fact):
    """`  NAME died during startup.`: its srun step ended before it answered; the script exits 1."""
    service: str


@dataclass(frozen=True, slots=True)
class HealthGaveUp(Fact):
    """`ERROR: NAME did not become healthy after N attempts.`; the script exits 1."""
    service: str
    attempts: int


@dataclass(frozen=True, slots=True)
class TaskEnded(Fact):
    """srun's `error: <node>: task 0: Exited with exit code N` (or `Terminated`, `Killed`, a signal)."""
    node: str
    tasks: str
    exit_code: Optional[int]       # set for `Exited with exit code N`
    how: str                       # srun's words: "Exited with exit code 2", "Terminated", ...
    origin: str = ""               # the step whose log holds the line ("": the batch log)


@dataclass(frozen=True, slots=True)
class StepAborted(Fact):
    """`srun: Job step aborted: Waiting up to N seconds for job step to finish.`: the job is ending."""
    origin: str = ""


@dataclass(frozen=True, slots=True)
class SlurmKill(Fact):
    """slurmstepd's `*** JOB|STEP <id> ON <node> CANCELLED AT <time> [DUE TO ...] ***` (or FAILED)."""
    entity: str                    # "JOB" (the batch script) or "STEP"
    step: str                      # "17", "17.0", "17.batch"
    outcome: str                   # "CANCELLED", "FAILED", "MEMORY ERROR"
    at: str
    due: str                       # "TIME LIMIT", "PREEMPTION", "NODE FAILURE", "JOB REQUEUE", ""
    origin: str = ""


@dataclass(frozen=True, slots=True)
class OutOfMemory(Fact):
    """The kernel's OOM killer in a step (`Detected N oom_kill event(s) in StepId=17.batch`), or
    a process's own out-of-memory error (CUDA, Python: `slurm_step` is then "")."""
    slurm_step: str                # the Slurm step the kernel named: "17.batch", "17.0"
    kernel: bool                   # the kernel's OOM killer (not the process's own error)
    origin: str = ""


@dataclass(frozen=True, slots=True)
class SlurmError(Fact):
    """Any other `srun: error:` / `slurmstepd: error:` line: `execve(): vllm: No such file or
    directory`, a container that failed to start, a step that could not be created."""
    kind: str                      # "exec" (the program could not start), "container", "error"
    message: str
    origin: str = ""


@dataclass(frozen=True, slots=True)
class FollowUpQueued(Fact):
    """`Auto-resume follow-up queued: N (afternotok:M)`: this link queued its successor N."""
    next_id: str


@dataclass(frozen=True, slots=True)
class FollowUpFailed(Fact):
    """`WARNING: Failed to submit auto-resume follow-up.`: no successor; the chain ends here."""


@dataclass(frozen=True, slots=True)
class PreviousJob(Fact):
    """What this link read of its predecessor with sacct and did about it:
    `Previous job 25: TIMEOUT. Resuming...`, `... FAILED. Infra retry 1/2...`,
    `... completed successfully. Exiting.`, `... was cancelled. Stopping chain.`,
    `... state unknown (sacct returned nothing). Resuming...`."""
    previous_id: str
    state: str                     # "" when sacct returned nothing
    action: str                    # one of the A_* below
    retry: Optional[int] = None
    max_retries: Optional[int] = None


A_RESUME, A_RETRY, A_EXIT_DONE, A_STOP_CANCELLED = "resume", "retry", "exit_done", "stop_cancelled"


@dataclass(frozen=True, slots=True)
class ChainStopped(Fact):
    """The chain stopped in this link's prologue, doing no work:
    `Infra retry limit (2) reached after FAILED. Stopping.` or the walltime cap."""
    why: str                       # "retry_limit" or "walltime_cap"
    limit: str                     # "2" or "172800s"
    state: str                     # the predecessor's state (retry limit)


# --- a step's own log (a service's, or the driver's), srun --output ---

@dataclass(frozen=True, slots=True)
class StepFact(Fact):
    step: str                      # the service's name, or "driver"


@dataclass(frozen=True, slots=True)
class Listening(StepFact):
    """A server in the step says where it answers (`Uvicorn running on http://...`,
    `Starting vLLM API server on ...`, a stand-in's `listening on http://...`)."""
    url: str


@dataclass(frozen=True, slots=True)
class StepErrorLine(StepFact):
    """A line of the step's log that reads as an error (a traceback's last line, `ERROR ...`)."""
    marker: str


@dataclass(frozen=True, slots=True)
class CollectionFinished(StepFact):
    """The driver's `Finished rollout collection!`."""


@dataclass(frozen=True, slots=True)
class ResumedRows(StepFact):
    """The driver's `- K rows already done (in main jsonl)` (Gym's resume), or a fresh start (0)."""
    rows_done: int


@dataclass(frozen=True, slots=True)
class ChainEntry(Fact):
    """Line N of `.gym_job_chain`: this link started its work, the Nth to do so."""
    position: int

