"""The model of one benchmark's Slurm job: plain data, made only by `job.fold()`.

A `Job` is a chain of `Link`s (one, unless the benchmark is resumable): each a Slurm job with its
state, where that state came from (Slurm, or inferred from the job's files), its service steps
and what its prologue said of the link before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..model import Evidence

# Where a link's state came from.
FROM_SLURM, FROM_FILES = "slurm", "files"

# A service step's states, as the board shows them.
SV_NOT_STARTED = "not_started"       # its job has not started (or never reached it)
SV_STARTING = "starting"             # launched; Gym's health loop has not seen it answer
SV_HEALTHY = "healthy"               # answered its health check
SV_DIED = "died"                     # its step ended during startup
SV_NEVER_HEALTHY = "never_healthy"   # the health loop gave up on it
SV_ENDED = "ended"                   # ended with the job (the job's normal end kills every service)
SERVICE_STATES = (SV_NOT_STARTED, SV_STARTING, SV_HEALTHY, SV_DIED, SV_NEVER_HEALTHY, SV_ENDED)

# The job's phase, as a person asks about it.
P_NOT_SUBMITTED, P_QUEUED, P_RUNNING, P_ENDED, P_UNKNOWN = "not_submitted", "queued", "running", "ended", "unknown"
PHASES = (P_NOT_SUBMITTED, P_QUEUED, P_RUNNING, P_ENDED, P_UNKNOWN)


@dataclass
class ServiceStep:
    name: str
    port: Optional[int] = None
    url: str = ""                           # what its health check asks
    attempts: Optional[int] = None          # of the health loop
    interval: Optional[int] = None          # seconds between attempts
    state: str = SV_NOT_STARTED
    detail: str = ""                        # in words: "died during startup: exit code 2", ...
    evidence: Optional[Evidence] = None     # the batch log's line that set the state
    healthy: Optional[Evidence] = None      # the batch log's `NAME ready.` (kept once the job's end ends it)
    cause: Optional[Evidence] = None        # the line saying why it died (its log's, else srun's)
    log: str = ""                           # its log's name (relative to the submission dir)
    exit_code: Optional[int] = None         # srun's `Exited with exit code N` for it
    listening: str = ""                     # where its server said it listens
    out_of_memory: bool = False


@dataclass
class Link:
    """One Slurm job of the benchmark (a resumable benchmark's chain has several)."""

    job_id: str
    previous: Optional[str] = None          # the link it resumes
    state: str = ""                         # Slurm's word (PENDING, RUNNING, FAILED, ...); "" unknown
    source: str = ""                        # FROM_SLURM or FROM_FILES; "" when neither could tell
    reason: str = ""                        # Slurm's reason (why pending; why it ended)
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    nodes: str = ""
    elapsed: Optional[int] = None           # seconds it ran (as of Slurm's answer)
    time_limit: Optional[int] = None        # seconds
    submit_time: str = ""
    start_time: str = ""                    # while PENDING: Slurm's expected start, when it gives one
    end_time: str = ""
    dependency: str = ""
    forgotten: bool = False                 # Slurm no longer knows it (older than it remembers)
    started: bool = False                   # it ran (its files say so, or Slurm does)
    services: list[ServiceStep] = field(default_factory=list)
    driver_log: str = ""
    collection_finished: Optional[Evidence] = None
    rows_done_before: Optional[int] = None  # rows already in the rollouts when it began (Gym's resume)
    rows_written: Optional[int] = None      # rows it added, when that can be told
    said_of_previous: Optional[Evidence] = None   # its prologue's line about the previous link
    previous_state: str = ""                # ... and the state it read of it with sacct ("" unknown)
    action: str = ""                        # in words: "resumed", "infra retry 1/2", "stopped the chain: ..."
    stopped_chain: bool = False             # its prologue ended the chain: a limit, or a cancelled predecessor
    prologue_only: bool = False             # its prologue ended it before any work (it speaks for the link before)
    followup: Optional[str] = None          # the successor it queued
    normal_end: bool = False                # its steps were killed at its end: how every job ends
    not_needed: bool = False                # a successor cancelled because the link before it succeeded
    cause: Optional[Evidence] = None        # the line to read first about how it ended
    cause_words: str = ""
    evidence: list[Evidence] = field(default_factory=list)   # the lines its inferred state rests on

    def service(self, name: str) -> Optional[ServiceStep]:
        return next((s for s in self.services if s.name == name), None)


@dataclass
class Job:
    """One benchmark of a submission, as Slurm and its files tell it."""

    benchmark: str
    job_dir: str
    sbatch_error: Optional[str] = None      # sbatch refused it: no job at all
    refused_at: Optional[Evidence] = None   # ... said in this line of the record
    links: list[Link] = field(default_factory=list)
    time_limit: Optional[int] = None        # job.sh's --time, seconds
    resumable: bool = False
    max_retries: Optional[int] = None
    rollouts: str = ""                      # where the driver writes the rows (as job.sh says)
    slurm_error: str = ""                   # why Slurm could not be asked ("" when it answered or was not asked)
    slurm_asked: bool = False               # a poll's answer is in this model
    accounting: Optional[bool] = None       # sacct answered (True) or failed (False)
    notes: list[str] = field(default_factory=list)

    def link(self, job_id: str) -> Optional[Link]:
        return next((ln for ln in self.links if ln.job_id == job_id), None)

    def link_of_row(self, row: int) -> Optional[str]:
        """Which link wrote row `row` (1-based, in rollouts file order), when the chain tells."""
        for ln in self.links:
            if ln.rows_done_before is not None and ln.rows_written is not None:
                if ln.rows_done_before < row <= ln.rows_done_before + ln.rows_written:
                    return ln.job_id
        return None


@dataclass(frozen=True)
class Conclusion:
    """The benchmark's job in one phase and one line, with what it rests on."""

    phase: str                              # P_*
    state: str                              # the deciding link's Slurm state ("" unknown)
    job_id: str                             # the deciding link ("" when there is none)
    headline: str                           # words for a person: "queued 3:05: waiting for resources"
    details: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    failed: bool = False                    # ended without doing its work (or never will start)
    never_starts: bool = False              # pending for a reason that cannot clear by itself
    near_limit: bool = False                # running close to its time limit
    inferred: bool = False                  # the state was inferred from files, not told by Slurm
