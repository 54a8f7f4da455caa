"""A batch log (`slurm-<id>.out`, the batch script's stdout and stderr) line by line into facts.

What Gym's job.sh prints: its health loop per service (`Waiting for NAME at URL...`,
`  NAME ready.`, `  NAME died during startup.`, `ERROR: NAME did not become healthy after N
attempts.`), and in a resumable job its prologue (`Previous job 25: TIMEOUT. Resuming...`,
`Infra retry 1/2`, `Infra retry limit (2) reached after FAILED. Stopping.`, `Auto-resume follow-up
queued: 26 (afternotok:25)`). What Slurm prints there: srun's lines about the steps it ran, the
job's cancellation (`*** JOB 17 ON node CANCELLED AT ... DUE TO TIME LIMIT ***`).
"""

from __future__ import annotations

import re
from typing import Optional

from ..model import Evidence
from .facts import (
    A_EXIT_DONE,
    A_RESUME,
    A_RETRY,
    A_STOP_CANCELLED,
    ChainStopped,
    Fact,
    FollowUpFailed,
    FollowUpQueued,
    HealthDied,
    HealthGaveUp,
    HealthReady,
    HealthWait,
    PreviousJob,
)
from .slurmlines import slurm_fact

_WAIT_RE = re.compile(r"^Waiting for (\S+) at (\S*?)\.\.\.\s*$")
_READY_RE = re.compile(r"^\s+(\S+) ready\.\s*$")
_DIED_RE = re.compile(r"^\s+(\S+) died during startup\.\s*$")
_GAVE_UP_RE = re.compile(r"^ERROR: (\S+) did not become healthy after (\d+) attempts\.")
_QUEUED_RE = re.compile(r"^Auto-resume follow-up queued: (\S+)")
_QUEUE_FAILED = "WARNING: Failed to submit auto-resume follow-up"
_PREV_UNKNOWN_RE = re.compile(r"^Previous job (\S+): state unknown")
_PREV_DONE_RE = re.compile(r"^Previous job (\S+) completed successfully\. Exiting\.")
_PREV_CANCELLED_RE = re.compile(r"^Previous job (\S+) was cancelled\. Stopping chain\.")
_PREV_RETRY_RE = re.compile(r"^Previous job (\S+): (\S+)\. Infra retry (\d+)/(\d+)")
_PREV_RESUME_RE = re.compile(r"^Previous job (\S+): (\S+)\. Resuming")
_RETRY_LIMIT_RE = re.compile(r"^Infra retry limit \((\d+)\) reached after (\S+)\. Stopping\.")
_WALLTIME_CAP_RE = re.compile(r"^Accumulated walltime \((\d+)s\) reached max_walltime cap \((.*)\)\. Stopping chain\.")


def facts(job_id: str, ev: Evidence) -> tuple[Fact, ...]:
    """The facts in one line of job `job_id`'s batch log (`ev` holds its file, line and text)."""
    fact = _gym_fact(job_id, ev) or slurm_fact(job_id, ev)
    return (fact,) if fact is not None else ()


def _gym_fact(job_id: str, ev: Evidence) -> Optional[Fact]:
    text = ev.text
    if (m := _WAIT_RE.match(text)) is not None:
        return HealthWait(job_id, ev, service=m.group(1), url=m.group(2))
    if (m := _READY_RE.match(text)) is not None:
        return HealthReady(job_id, ev, service=m.group(1))
    if (m := _DIED_RE.match(text)) is not None:
        return HealthDied(job_id, ev, service=m.group(1))
    if (m := _GAVE_UP_RE.match(text)) is not None:
        return HealthGaveUp(job_id, ev, service=m.group(1), attempts=int(m.group(2)))
    if not text.startswith(("Auto-resume", "WARNING: Failed", "Previous job", "Infra retry", "Accumulated")):
        return None
    return _chain_fact(job_id, ev)


def _chain_fact(job_id: str, ev: Evidence) -> Optional[Fact]:
    text = ev.text
    if (m := _QUEUED_RE.match(text)) is not None:
        return FollowUpQueued(job_id, ev, next_id=m.group(1))
    if text.startswith(_QUEUE_FAILED):
        return FollowUpFailed(job_id, ev)
    if (m := _PREV_UNKNOWN_RE.match(text)) is not None:
        return PreviousJob(job_id, ev, previous_id=m.group(1), state="", action=A_RESUME)
    if (m := _PREV_DONE_RE.match(text)) is not None:
        return PreviousJob(job_id, ev, previous_id=m.group(1), state="COMPLETED", action=A_EXIT_DONE)
    if (m := _PREV_CANCELLED_RE.match(text)) is not None:
        return PreviousJob(job_id, ev, previous_id=m.group(1), state="CANCELLED", action=A_STOP_CANCELLED)
    if (m := _PREV_RETRY_RE.match(text)) is not None:
        return PreviousJob(job_id, ev, previous_id=m.group(1), state=m.group(2), action=A_RETRY,
                           retry=int(m.group(3)), max_retries=int(m.group(4)))
    if (m := _PREV_RESUME_RE.match(text)) is not None:
        return PreviousJob(job_id, ev, previous_id=m.group(1), state=m.group(2), action=A_RESUME)
    if (m := _RETRY_LIMIT_RE.match(text)) is not None:
        return ChainStopped(job_id, ev, why="retry_limit", limit=m.group(1), state=m.group(2))
    if (m := _WALLTIME_CAP_RE.match(text)) is not None:
        return ChainStopped(job_id, ev, why="walltime_cap", limit=m.group(2), state="")
    return None
