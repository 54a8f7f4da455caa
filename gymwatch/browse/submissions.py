"""Submissions (`gym eval submit`) in the runs list: one row each, from the submission dirs the
walk found under the roots and from Gym's local index of this machine's submissions
(`~/.cache/nemo-gym/jobs/<gym_job_id>.json`, under $XDG_CACHE_HOME when set), each once.

A row is made from the submission's files alone (each benchmark read as `gymwatch report` reads
it with `--no-slurm`): Slurm is not asked by a listing. Not cached: a submission has a few
benchmarks, and its jobs' state moves while they are queued or running.
"""

from __future__ import annotations

import calendar
import time
from pathlib import Path
from typing import Any, Iterable, Optional

from ..core.cluster import record
from ..core.cluster.model import P_ENDED
from ..core.cluster.record import Submission, SubmissionError
from ..core.cluster.words import state_words
from ..core.jobsession import read_submission
from ..core.model import TRIAL_STATUSES
from ..core.verdict import counts, mean_reward, verdict
from ..report import Benchmark, whole
from .fmt import ERROR

SUBMISSION = "submission"      # a row's `kind`


def find(dirs: Iterable[str], index: Optional[Path] = None) -> list[Submission]:
    """The submissions at `dirs` (the walk's), then those of Gym's index not among them."""
    index = record.index_dir() if index is None else index
    out: dict[str, Submission] = {}
    for d in dirs:
        sub = _resolve(d)
        if sub is not None:
            out.setdefault(sub.gym_job_id or d, sub)
    try:
        records = sorted(index.glob("*.json"))
    except OSError:
        records = []
    for path in records:
        sub = _resolve(str(path))
        if sub is not None and sub.gym_job_id not in out:
            out[sub.gym_job_id] = sub
    return list(out.values())


def _resolve(path: str) -> Optional[Submission]:
    try:
        return record.resolve(path)
    except (SubmissionError, OSError, ValueError):
        return None


def summary(sub: Submission) -> dict[str, Any]:
    """The submission's row: the whole's verdict (its worst benchmark's, as the report says it),
    and per benchmark its job's ids, phase, Slurm state (as its files tell) and verdict."""
    row: dict[str, Any] = {
        "path": str(sub.root or sub.record or sub.run_dir), "kind": SUBMISSION, "gym_job_id": sub.gym_job_id,
        "started": _epoch(sub.submitted_at), "environment": "gym eval submit", "agent": None,
        "mean_reward": None, "duration": None, "servers": None, "slurm": "not asked (files alone)"}
    if sub.root is None:
        return {**row, "verdict": ERROR, "reason": f"its files are not on this machine (run dir {sub.run_dir})",
                "benchmarks": [{"name": b.name} for b in sub.benchmarks]}
    try:
        ss = read_submission(sub, slurm=False)
        benchmarks: list[Benchmark] = [(n, s.state, verdict(s.state)) for n, s in ss.sessions.items()]
    except Exception as exc:  # noqa: BLE001 - listed with why, never a traceback in the list
        return {**row, "verdict": ERROR, "reason": f"{type(exc).__name__}: {exc}",
                "benchmarks": [{"name": b.name} for b in sub.benchmarks]}
    if not benchmarks:
        return {**row, "verdict": ERROR, "reason": "a submission without a benchmark", "benchmarks": []}
    name, v = whole(benchmarks)
    trials = dict.fromkeys(TRIAL_STATUSES, 0)
    for _, state, _ in benchmarks:
        for k, n in counts(state).items():
            trials[k] += n
    each = [_benchmark(b) for b in benchmarks]
    # a benchmark's mean reward is its own: a mean over several benchmarks would mean nothing
    mean = each[0]["mean_reward"] if len(each) == 1 else None
    return {**row, "verdict": v.name, "reason": v.reason, "worst": name, "trials": trials, "mean_reward": mean,
            "benchmarks": each}


def _benchmark(b: Benchmark) -> dict[str, Any]:
    name, state, v = b
    c = state.job_conclusion
    job = state.job
    return {"name": name, "verdict": v.name, "jobs": [ln.job_id for ln in job.links] if job else [],
            "phase": c.phase if c else None, "slurm_state": c.state if c else None,
            "state": state_word(b), "headline": c.headline if c else None, "mean_reward": mean_reward(state)}


def state_word(b: Benchmark) -> str:
    """A benchmark's job in a word or two: queued, running, or how it ended."""
    c = b[1].job_conclusion
    if c is None:
        return "unknown"
    if c.phase == P_ENDED:
        return state_words(c.state)
    return c.phase.replace("_", " ")


def _epoch(stamp: str) -> Optional[float]:
    """Gym's `submitted_at` (UTC, ISO with Z) as seconds since the epoch."""
    if not stamp:
        return None
    try:
        return float(calendar.timegm(time.strptime(stamp.rstrip("Z").split(".")[0], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None
