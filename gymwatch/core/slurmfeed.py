"""Slurm asked about a submission's jobs for the sessions that read its benchmarks: one call for
every job of the submission (core/cluster/slurmcli.py's `poll_submission`: one `squeue`, then
`sacct` or `scontrol` only for jobs that ended), at most every `interval` seconds (a live screen:
`slurmcli.POLL_INTERVAL`), or once (a report). Its answers are kept merged (an ended job's answer
outlives Slurm's memory of it) and numbered, so each session applies each answer once. A feed that
polls on (a screen) asks in a thread of its own: a poll of the session never waits for Slurm (an
SSH hop, a slow controller), it takes the answer the next poll after it came.

Never asked when the user said so (`--no-slurm`, or GYMWATCH_NO_SLURM=1 in the environment): the
jobs' states are then inferred from their files, and the report says Slurm was not asked. Slurm
that cannot be asked (no client here, SSH down) answers with its error: the same inference,
saying why.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Optional

from .cluster import slurmcli
from .cluster.record import Submission
from .cluster.slurmcli import SlurmPoll
from .pacedfeed import PacedFeed

NO_SLURM_ENV = "GYMWATCH_NO_SLURM"


def files_alone() -> None:
    """`--no-slurm`: this process, and the screens it starts, read submitted runs from files alone."""
    os.environ[NO_SLURM_ENV] = "1"


def slurm_wanted() -> bool:
    """Slurm may be asked (the environment does not say GYMWATCH_NO_SLURM)."""
    return os.environ.get(NO_SLURM_ENV, "") in ("", "0")


@dataclass(frozen=True)
class Answer:
    poll: SlurmPoll             # everything learned so far, merged
    asked_at: datetime          # when it was asked (local time, as Slurm's own times)
    number: int                 # 1, 2, ...: a session applies each number once


class SlurmFeed(PacedFeed[Answer]):
    THREAD = "slurm"

    def __init__(self, sub: Submission, interval: Optional[float] = slurmcli.POLL_INTERVAL,
                 runner: slurmcli.Runner = slurmcli.run_command, clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = datetime.now):
        """`interval`: seconds between calls; None: one call for the feed's life (a report).
        `now`: the local time an answer was asked at (a job's time in the queue counts to it)."""
        super().__init__(interval, clock)
        self.sub = sub
        self.runner = runner
        self.now = now
        self._ids: dict[str, set[str]] = {}          # per benchmark: the links its files name
        self._names: dict[str, str] = {}             # per benchmark: job.sh's job name
        self.calls = 0

    def register(self, benchmark: str, job_ids: set[str], job_name: str = "") -> None:
        """A benchmark's links known so far (asked about at the next call)."""
        with self._lock:
            self._ids[benchmark] = set(job_ids)
            if job_name:
                self._names[benchmark] = job_name

    def _snapshot(self) -> tuple[dict[str, set[str]], dict[str, str]]:
        return {b: set(i) for b, i in self._ids.items()}, dict(self._names)

    def _ask(self, snapshot: tuple[dict[str, set[str]], dict[str, str]], last: Optional[Answer]) -> Answer:
        ids, names = snapshot
        final = set()
        if last is not None:      # ended jobs whose end Slurm told in full: not asked again
            final = {j for j, job in last.poll.jobs.items() if job.ended and job.exit_code is not None}
        poll = slurmcli.poll_submission(self.sub, ids, job_names=names, runner=self.runner, final=final)
        with self._lock:
            self.calls += 1
        merged = poll if last is None else last.poll.merged(poll)
        return Answer(merged, self.now(), last.number + 1 if last is not None else 1)
