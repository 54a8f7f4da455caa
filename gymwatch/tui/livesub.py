"""The submission behind the submission screen: the core's `SubmissionSession` (a session per
benchmark, one Slurm feed for all), the screen's one adapter to it. No Textual here.

Threads: the screen polls in a worker thread. One lock for the whole submission (`lock`), held by
every poll and by the readers that walk a benchmark's state; a benchmark's own screen (its
`LiveRun`, made here on the benchmark's session) reads under the same lock, so the two never
read a session at once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, Optional

from ..core.cluster.record import Submission
from ..core.jobsession import SubmissionSession
from ..core.reducer import Changes
from ..core.slurmfeed import SlurmFeed
from ..core.verdict import Verdict, verdict
from ..report import Benchmark, whole
from .live import POLL_BUDGET, LiveRun, RunClock


class LiveSubmission:
    def __init__(self, sub: Submission, clock: Callable[[], float] = time.time, feed: Optional[SlurmFeed] = None,
                 ray: Optional[str] = None):
        """`feed`: who asks Slurm (None: the session's own, unless --no-slurm; tests give one);
        `ray`: the Ray dashboard's URL (`--ray`), asked for every benchmark at once."""
        self.sub = sub
        self.clock = RunClock(clock)
        self.lock = threading.RLock()
        self.session = SubmissionSession(sub, clock=self.clock, feed=feed, ray=ray)
        self._runs: dict[str, LiveRun] = {}

    @property
    def root(self) -> Path:
        return self.sub.root if self.sub.root is not None else Path(self.sub.run_dir)

    @property
    def name(self) -> str:
        return self.sub.gym_job_id or self.root.name

    @property
    def names(self) -> list[str]:
        return list(self.session.sessions)

    def poll(self) -> dict[str, Changes]:
        """Every benchmark read for what is new, Slurm asked once for all (any thread)."""
        with self.lock:
            return self.session.poll(budget=POLL_BUDGET)

    def benchmarks(self) -> list[Benchmark]:
        """(name, state, verdict) of each benchmark, in the submission's order."""
        with self.lock:
            return [(name, s.state, verdict(s.state)) for name, s in self.session.sessions.items()]

    def whole(self, benchmarks: Optional[list[Benchmark]] = None) -> tuple[str, Verdict]:
        """The submission's verdict, the report's (its worst benchmark's), and that benchmark."""
        return whole(benchmarks if benchmarks is not None else self.benchmarks())

    def run(self, name: str) -> LiveRun:
        """The benchmark `name` as a run for its own screen: its session, under this lock."""
        live = self._runs.get(name)
        if live is None:
            s = self.session.sessions[name]
            live = self._runs[name] = LiveRun(str(self.root / name), clock=self.clock, session=s, lock=self.lock,
                                              name=f"{name} · {self.name}")
        return live

    def catching_up(self) -> str:
        """What is still being read for the first time ("" when nothing)."""
        with self.lock:
            behind = {rel: v for s in self.session.sessions.values() for rel, v in s.behind.items()}
        if not behind:
            return ""
        rel, (done, size) = max(behind.items(), key=lambda kv: kv[1][1] - kv[1][0])
        return f"reading {rel}: {100 * done // max(size, 1)}%"

    def watch_paths(self) -> list[Path]:
        paths = sorted({p for s in self.session.sessions.values() for p in s.watch_paths() if p.exists()})
        return [p for p in paths if not any(q != p and q in p.parents for q in paths)] or [self.root]
