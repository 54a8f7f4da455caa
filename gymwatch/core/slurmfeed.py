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
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Optional

from .cluster import slurmcli
from .cluster.record import Submission
from .cluster.slurmcli import SlurmPoll

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


class SlurmFeed:
    def __init__(self, sub: Submission, interval: Optional[float] = slurmcli.POLL_INTERVAL,
                 runner: slurmcli.Runner = slurmcli.run_command, clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = datetime.now):
        """`interval`: seconds between calls; None: one call for the feed's life (a report).
        `now`: the local time an answer was asked at (a job's time in the queue counts to it)."""
        self.sub = sub
        self.interval = interval
        self.runner = runner
        self.clock = clock
        self.now = now
        self._ids: dict[str, set[str]] = {}          # per benchmark: the links its files name
        self._names: dict[str, str] = {}             # per benchmark: job.sh's job name
        self._last: Optional[Answer] = None
        self._asked: Optional[float] = None
        self._lock = threading.Lock()
        self._busy = False                           # a call is under way
        self.calls = 0

    def register(self, benchmark: str, job_ids: set[str], job_name: str = "") -> None:
        """A benchmark's links known so far (asked about at the next call)."""
        with self._lock:
            self._ids[benchmark] = set(job_ids)
            if job_name:
                self._names[benchmark] = job_name

    def answer(self) -> Optional[Answer]:
        """Slurm's latest answer, asked for first when the last call is `interval` old: at once
        for a feed asked once (its first answer is then this call's), else in the background."""
        with self._lock:
            now = self.clock()
            due = self._asked is None or (self.interval is not None and now - self._asked >= self.interval)
            if not due or self._busy:
                return self._last
            self._asked, self._busy = now, True
            ids, names = {b: set(i) for b, i in self._ids.items()}, dict(self._names)
        if self.interval is None:
            self._ask(ids, names)
        else:
            threading.Thread(target=self._ask, args=(ids, names), name="slurm", daemon=True).start()
        with self._lock:
            return self._last

    def _ask(self, ids: dict[str, set[str]], names: dict[str, str]) -> None:
        try:
            with self._lock:
                last = self._last
            final = set()
            if last is not None:      # ended jobs whose end Slurm told in full: not asked again
                final = {j for j, job in last.poll.jobs.items() if job.ended and job.exit_code is not None}
            poll = slurmcli.poll_submission(self.sub, ids, job_names=names, runner=self.runner, final=final)
            with self._lock:
                self.calls += 1
                merged = poll if self._last is None else self._last.poll.merged(poll)
                number = self._last.number + 1 if self._last is not None else 1
                self._last = Answer(merged, self.now(), number)
        finally:
            with self._lock:
                self._busy = False
