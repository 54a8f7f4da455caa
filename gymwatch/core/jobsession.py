"""A submission of several benchmarks read at once: a `RunSession` per benchmark (each its own run,
layout kind `slurm_job`), and one `SlurmFeed` for all of them, so that Slurm is asked once per
poll about every job of the submission (core/slurmfeed.py), each session taking its part of the
answer (the fold keeps its benchmark's jobs)."""

from __future__ import annotations

from typing import Callable, Optional

from .cluster.record import Submission
from .cluster.slurmcli import POLL_INTERVAL
from .joblayout import job_layout
from .rayfeed import INTERVAL as RAY_INTERVAL, RayFeed
from .reducer import Changes
from .session import RunSession, read_now
from .slurmfeed import SlurmFeed, slurm_wanted


class SubmissionSession:
    def __init__(self, sub: Submission, clock: Optional[Callable[[], float]] = None, slurm: Optional[bool] = None,
                 interval: Optional[float] = POLL_INTERVAL, feed: Optional[SlurmFeed] = None,
                 ray: Optional[str] = None, **kw):
        """`slurm`: ask Slurm (None: unless GYMWATCH_NO_SLURM says not to); `interval`: seconds
        between calls (None: once, a report); `feed`: who asks (tests give one with a fake runner);
        `ray`: the Ray dashboard's URL, asked once per poll for every benchmark."""
        self.sub = sub
        asks = slurm if slurm is not None else slurm_wanted()
        self.feed = feed if feed is not None else (SlurmFeed(sub, interval=interval) if asks else None)
        self.ray = RayFeed(ray, interval=None if interval is None else RAY_INTERVAL) if ray else None
        self.sessions: dict[str, RunSession] = {
            b.name: RunSession(job_layout(sub, b), clock=clock, slurm=self.feed, ray=self.ray, **kw)
            for b in sub.benchmarks}

    def poll(self, final: bool = False, budget: Optional[float] = None) -> dict[str, Changes]:
        """Every benchmark's session polled, after one call to Slurm for all of them (when due)."""
        self._ask()
        return {name: s.poll(final=final, budget=budget) for name, s in self.sessions.items()}

    def _ask(self) -> None:
        if self.feed is None:
            return
        for name, s in self.sessions.items():
            job = s.layout.job
            self.feed.register(name, s.reducer.job_ids(), job.script.job_name if job and job.script else "")
        self.feed.answer()

    def read_now(self) -> None:
        """Everything there is now, once (a report)."""
        self._ask()
        for s in self.sessions.values():
            read_now(s)


def read_submission(sub: Submission, helpers: bool = False, slurm: Optional[bool] = None,
                    ray: Optional[str] = None) -> SubmissionSession:
    """Every benchmark of `sub` read as it is now, Slurm (and Ray's dashboard at `ray`) asked once
    (the headless report's path)."""
    ss = SubmissionSession(sub, slurm=slurm, interval=None, helpers=helpers, ray=ray)
    ss.read_now()
    return ss
