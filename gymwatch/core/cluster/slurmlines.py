"""Slurm's own lines, wherever a job's files hold them (the batch log or a step's log).

srun prints about the tasks of its step (`srun: error: <node>: task 0: Exited with exit code 2`,
`... task 0: Terminated`, `srun: Job step aborted: ...`); slurmstepd about the job or a step
(`slurmstepd-<node>: error: *** STEP 17.0 ON <node> CANCELLED AT <time> ***`, `... DUE TO TIME
LIMIT ***`, `... FAILED (non-zero exit code or other failure mode) ***`, `execve(): vllm: No
such file or directory`, the cgroup's `Detected 1 oom_kill event in StepId=17.batch`).
"""

from __future__ import annotations

import re
from typing import Optional

from ..model import Evidence
from .facts import Fact, OutOfMemory, SlurmError, SlurmKill, StepAborted, TaskEnded

KEYS = ("srun", "slurmstepd", "***", "oom")     # every line slurm_fact reads holds one of these
_KILL_RE = re.compile(
    r"\*\*\* (JOB|STEP) (\S+)(?: ON (\S+))? "
    r"(?:(CANCELLED) AT (\S+)(?: DUE TO ([^*]+?))?|(FAILED) \(.*?\)|UNCORRECTABLE (MEMORY ERROR) AT (\S+)) \*\*\*")
_TASK_RE = re.compile(r"^srun: error: (\S+): tasks? ([\d,\-\[\]]+): (.+?)\s*$")
_EXIT_RE = re.compile(r"Exited with exit code (\d+)")
_OOM_RE = re.compile(r"Detected (\d+) oom[-_]kill event(?:s|\(s\))? in (?:StepId=|step )?(\d+(?:\.[A-Za-z0-9]+)?)")
_ERROR_RE = re.compile(r"^(?:srun|slurmstepd(?:-\S+)?): error: (.+?)\s*$")
_ABORTED = "srun: Job step aborted"


def slurm_fact(job_id: str, ev: Evidence, origin: str = "") -> Optional[Fact]:
    """The fact in one of Slurm's lines, None when the line is not Slurm's. `origin`: the step
    whose log holds the line ("" for the batch log)."""
    text = ev.text
    if not any(k in text for k in KEYS):
        return None
    if (m := _KILL_RE.search(text)) is not None:
        outcome = m.group(4) or m.group(7) or m.group(8) or ""
        due = (m.group(6) or "").split(",")[0].strip()
        return SlurmKill(job_id, ev, entity=m.group(1), step=m.group(2), outcome=outcome,
                         at=m.group(5) or m.group(9) or "", due=due, origin=origin)
    if (m := _OOM_RE.search(text)) is not None:
        return OutOfMemory(job_id, ev, slurm_step=m.group(2), kernel=True, origin=origin)
    if text.startswith(_ABORTED):
        return StepAborted(job_id, ev, origin=origin)
    if (m := _TASK_RE.match(text)) is not None:
        code = _EXIT_RE.search(m.group(3))
        return TaskEnded(job_id, ev, node=m.group(1), tasks=m.group(2),
                         exit_code=int(code.group(1)) if code else None, how=m.group(3), origin=origin)
    if (m := _ERROR_RE.match(text)) is not None:
        return SlurmError(job_id, ev, kind=_error_kind(m.group(1)), message=m.group(1), origin=origin)
    return None


def _error_kind(message: str) -> str:
    if "execve()" in message:
        return "exec"
    if "pyxis" in message or "enroot" in message or "container" in message.lower():
        return "container"
    return "error"
