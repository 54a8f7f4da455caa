"""What the user named: a run, or a submission (`gym eval submit`), and which one. The one resolver
every command goes through (attach, report, diff, serve; stop reads submissions itself).

- a Gym run (core/layout.py's `discover()`): a Gym output dir, a run dir gymwatch launched, an
  evaluator bundle, a rollouts file;
- a submission (core/cluster/record.py's `resolve()`): its dir (`gym-job.json`, or named
  `gym-job-<stamp>-<hex>`), one benchmark's job dir in it, Gym's record of it (the manifest, or
  the local index's copy), or a gym job id that is no path here, looked up in Gym's local index.

A submission of one benchmark, or one benchmark's job dir, is that benchmark's run (kind
`slurm_job`, core/joblayout.py); a submission of several is a `Submission`, read benchmark by
benchmark (core/jobsession.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

from .cluster import record
from .cluster.record import GYM_JOB_ID_RE, JOB_SCRIPT, MANIFEST, Submission, SubmissionError
from .layout import NotARun, RunLayout, discover

RECORD_MAX = 1 << 20     # bytes of a .json file looked at for a Gym job record
GYM_SCRIPT_MARK = "GYM_CMD=("     # the driver's command in the job.sh Gym 0.7 writes


class IsSubmission(NotARun):
    """The path names a submission of several benchmarks: not one run (`submission` is it)."""

    def __init__(self, sub: Submission):
        self.submission = sub
        names = ", ".join(b.name for b in sub.benchmarks)
        super().__init__(f"{sub.root or sub.gym_job_id}: a submission of {len(sub.benchmarks)} benchmarks ({names})")


def resolve(path: str, logs: Optional[str] = None, wait: bool = False) -> RunLayout | Submission:
    """The run `path` names (its layout; a submission's lone or named benchmark too), or the
    submission of several benchmarks it names. NotARun (one line) when it is neither."""
    if is_submission(path):
        from .joblayout import job_layout

        try:
            sub = record.resolve(path)
        except SubmissionError as exc:
            raise NotARun(str(exc)) from None
        if sub.focus is not None:
            return job_layout(sub, sub.benchmark(sub.focus))
        if len(sub.benchmarks) == 1:
            return job_layout(sub, sub.benchmarks[0])
        if not sub.benchmarks:
            raise NotARun(f"{sub.root or sub.record}: a submission without a benchmark")
        return sub
    return discover(path, logs, wait=wait)


def run_layout(path: str, logs: Optional[str] = None, wait: bool = False) -> RunLayout:
    """The run `path` names; IsSubmission when it names a submission of several benchmarks."""
    got = resolve(path, logs, wait)
    if isinstance(got, Submission):
        raise IsSubmission(got)
    return got


def is_submission(path: str) -> bool:
    """Whether `path` names a submission (or one benchmark of one), not a Gym run."""
    p = Path(path).expanduser()
    if p.is_dir():
        return _submission_dir(p)
    if p.is_file():
        return p.name == MANIFEST or (p.suffix == ".json" and _job_record(p))
    text = str(path)
    return bool(text) and "/" not in text and (
        GYM_JOB_ID_RE.match(text.removesuffix(".json")) is not None
        or (record.index_dir() / f"{text.removesuffix('.json')}.json").is_file())


def _submission_dir(p: Path) -> bool:
    if (p / MANIFEST).is_file() or GYM_JOB_ID_RE.match(p.resolve().name):
        return True
    if not (p / JOB_SCRIPT).is_file():
        return False
    parent = p.resolve().parent
    if (parent / MANIFEST).is_file() or GYM_JOB_ID_RE.match(parent.name):
        return True
    try:        # a job dir copied alone: a job.sh that Gym wrote
        with open(p / JOB_SCRIPT, encoding="utf-8", errors="replace") as fh:
            return GYM_SCRIPT_MARK in fh.read(RECORD_MAX)
    except OSError:
        return False


def _job_record(p: Path) -> bool:
    """A JSON file holding a Gym job record (the local index's copy, or a manifest renamed)."""
    try:
        if os.path.getsize(p) > RECORD_MAX:
            return False
        data = json.loads(p.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "gym_job_id" in data and "benchmarks" in data
