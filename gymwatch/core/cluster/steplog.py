"""A job step's own log (srun `--output`: `logs/<service>-<id>.log`, `logs/driver-<id>.log`) into facts.

Slurm writes into it too: `slurmstepd-<node>: error: execve(): vllm: No such file or directory`
when the program cannot start, `*** STEP 17.0 ON <node> CANCELLED AT <time> ***` when the job's
end kills the step (normal: every job ends that way), the OOM killer's report. A service adds its
server's startup (`Uvicorn running on http://...`, vLLM's `Starting vLLM API server on ...`, a
stand-in's `listening on http://...`) and its errors. The driver is an end-to-end `gym eval run`,
read in full by the run reducer; here only what places it in the chain: `Finished rollout
collection!` and, on a resumed link, Gym's `- K rows already done (in main jsonl)`.
"""

from __future__ import annotations

import re
from typing import Optional

from ..markers import find_marker
from ..model import Evidence
from .facts import CollectionFinished, Fact, Listening, OutOfMemory, ResumedRows, StepErrorLine
from .slurmlines import KEYS, slurm_fact

DRIVER = "driver"
_LISTEN_RE = re.compile(r"(?:Uvicorn running on|Starting vLLM API server(?: \d+)? on|listening on) (https?://\S+)")
_OWN_OOM_RE = re.compile(r"\b(?:torch\.)?(?:cuda\.)?OutOfMemoryError\b|CUDA out of memory|^MemoryError\b")
_ROWS_DONE_RE = re.compile(r"^- (\d+) rows already done \(in main jsonl\)")
_FRESH = ("Clearing output fpath since", "Skipping resume_from_cache because output_fpath")
_FINISHED = "Finished rollout collection!"
# Every line of a driver's log that gives a fact holds one of these (its Gym lines: Gym's whole
# output, read by the run reducer, gives none): a block of lines without any gives none.
DRIVER_WORDS = tuple(w.encode() for w in (*KEYS, _FINISHED, "rows already done", *_FRESH))


def facts(job_id: str, step: str, ev: Evidence) -> tuple[Fact, ...]:
    """The facts in one line of step `step`'s log (a service's name, or DRIVER) of job `job_id`."""
    fact = slurm_fact(job_id, ev, origin=step)
    if fact is None:
        fact = _driver_fact(job_id, ev) if step == DRIVER else _service_fact(job_id, step, ev)
    return (fact,) if fact is not None else ()


def _service_fact(job_id: str, step: str, ev: Evidence) -> Optional[Fact]:
    text = ev.text
    if (m := _LISTEN_RE.search(text)) is not None:
        return Listening(job_id, ev, step=step, url=m.group(1).rstrip(".,)"))
    if _OWN_OOM_RE.search(text):
        return OutOfMemory(job_id, ev, slurm_step="", kernel=False, origin=step)
    marker = find_marker(text)
    return StepErrorLine(job_id, ev, step=step, marker=marker) if marker else None


def _driver_fact(job_id: str, ev: Evidence) -> Optional[Fact]:
    text = ev.text
    if text.startswith(_FINISHED):
        return CollectionFinished(job_id, ev, step=DRIVER)
    if text.startswith("- ") and (m := _ROWS_DONE_RE.match(text)) is not None:
        return ResumedRows(job_id, ev, step=DRIVER, rows_done=int(m.group(1)))
    if text.startswith(_FRESH):
        return ResumedRows(job_id, ev, step=DRIVER, rows_done=0)
    return None


def may_hold_facts(step: str, block: bytes) -> bool:
    """Whether a block of step `step`'s log lines can give a fact (False: skip it whole)."""
    return step != DRIVER or any(w in block for w in DRIVER_WORDS)
