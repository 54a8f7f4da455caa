"""The run behind the screen: a RunSession (which follows a path that is not a run yet, and the
run's files as they appear: RunLayout.refresh()), plus progress-rate samples. The screen's one
adapter to the session: what it reads of the run's files (polls, which logs a server has, the
retry file) goes through here. No Textual here.

Threads: the screen polls in a worker thread while the UI thread reads the state. `lock` is
held by every write (`poll()`, `apply_probe()`) and by the screen's readers that walk the
state's dicts (applying changes, navigating, the retry file), so no reader sees a dict change
size under it; a row drawn alone (a dict look-up, attributes) needs no lock.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Callable, Iterable, Optional

from ..core import rerun
from ..core.layout import BOTH, ENV, WAITING, replay_speed
from ..core.model import T_COMPLETED, T_FAILED, T_NEVER_RAN, RunState, TrialKey, collector_ended
from ..core.reducer import Changes
from ..core.session import RunSession
from ..retry import RetryInput, nothing_to_rerun, write

__all__ = ["Changes", "LiveRun", "RunClock", "LogSource"]

LogSource = tuple[str, Path, str]   # a log in a merged view: (label, path, path relative to the root)

RATE_WINDOW = 60.0   # seconds of samples behind the trials/s rate
# A log's first timestamp starts the elapsed clock when it is this recent (a replay of an old
# recording, or a clock far off, would count days).
STAMP_TRUSTED_FOR = 3 * 86400.0
POLL_BUDGET = 0.1    # seconds of reading per poll; the rest of a huge file is read on the next ones


class RunClock:
    """The run's own time, the clock of everything the screen times: the wall clock, or, in a
    replay at N times speed, a clock N times as fast from when the replay said so (continuous:
    no jump), so that 60 s of Gym's spin-up limit read as 60 s on screen at any replay speed."""

    def __init__(self, wall: Callable[[], float]):
        self.wall = wall
        self.speed = 1.0
        self._wall0, self._run0 = 0.0, 0.0     # where the current speed took over

    def __call__(self) -> float:
        return self._run0 + (self.wall() - self._wall0) * self.speed

    def set_speed(self, speed: float) -> None:
        if speed != self.speed:
            self._run0, self._wall0 = self(), self.wall()
            self.speed = speed


class LiveRun:
    def __init__(self, path: str, logs: Optional[str] = None, clock: Callable[[], float] = time.time,
                 check_processes: Optional[bool] = None, session: Optional[RunSession] = None,
                 lock: Optional[threading.RLock] = None, name: str = "", ray: Optional[str] = None):
        """`session`: one already open (a benchmark of a submission: the submission's session
        made it, its Slurm feed shared), read under `lock` (shared with the submission's polls);
        `name`: what the summary calls the run (default: its root's name); `ray`: the Ray
        dashboard's URL (`--ray`), asked in the background."""
        self.path, self.logs, self.ray = path, logs, ray
        self.clock = RunClock(clock)
        self._default_check = check_processes is None      # a replay has no processes to look for
        self.check_processes = not os.environ.get("GYMWATCH_NO_PROCESS_CHECK") if check_processes is None \
            else check_processes
        self.replay = False
        self.session: Optional[RunSession] = session
        self.opened_at = self.clock()
        self._samples: deque[tuple[float, int]] = deque()
        self.lock = lock if lock is not None else threading.RLock()
        self._name = name
        if session is None:
            self._open()

    @property
    def name(self) -> str:
        return self._name or self.root.name

    def _seen_replay(self) -> None:
        """A run `gymwatch replay` writes says so, with its speed, before its first file (the
        screen may have opened on the empty dir before): from then on the clock runs at it."""
        if self.replay:
            return
        speed = replay_speed(Path(self.path).expanduser())
        if speed is not None:
            self.replay = True
            self.clock.set_speed(speed)
            self.check_processes = self.check_processes and not self._default_check
            if self.session is not None:
                self.session.check_processes = self.check_processes

    def _open(self) -> None:
        """The session; NotARun when the path is not a directory (an empty one is watched until
        it is a run: a replay or a launcher is about to fill it)."""
        self._seen_replay()
        self.session = RunSession.open(self.path, self.logs, wait=True, clock=self.clock,
                                       check_processes=self.check_processes, ray=self.ray)

    @property
    def waiting(self) -> str:
        """Why there is no run to show yet ("" once there is)."""
        lay = self.session.layout if self.session else None
        return lay.waiting if lay is not None and lay.kind == WAITING else ""

    @property
    def state(self) -> Optional[RunState]:
        return self.session.state if self.session and not self.waiting else None

    @property
    def root(self) -> Path:
        return self.session.layout.root if self.session else Path(self.path).expanduser().resolve()

    def poll(self) -> Changes:
        """Read what is new (any thread: the state is written under `lock`)."""
        with self.lock:
            return self._poll()

    def _poll(self) -> Changes:
        assert self.session is not None
        waited = bool(self.waiting)
        if waited:
            self._seen_replay()
        changes = self.session.poll(budget=POLL_BUDGET)
        if self.waiting:
            return Changes()
        changes.reset = changes.reset or waited      # the run's first poll
        self._sample()
        return changes

    def catching_up(self) -> str:
        """What is still being read for the first time ("" when nothing), e.g.
        'reading logs/policy_model.log: 12% of 1.0 GB'. (A poll refills it as it reads.)"""
        with self.lock:
            behind = dict(self.session.behind) if self.session else {}
        if not behind:
            return ""
        rel, (done, size) = max(behind.items(), key=lambda kv: kv[1][1] - kv[1][0])
        more = f" (+{len(behind) - 1} more)" if len(behind) > 1 else ""
        return f"reading {rel}: {100 * done // max(size, 1)}% of {_human(size)}{more}"

    def apply_probe(self, instances: Optional[list], answers: Optional[dict[str, bool]]) -> Changes:
        """What a `--head` probe found, through the reducer (under `lock`, like a poll)."""
        with self.lock:
            return self.session.apply_probe(instances, answers) if self.session is not None else Changes()

    # --- the run's logs ---------------------------------------------------------------
    def path_of(self, rel: str) -> Path:
        """A path of the run (evidence names files relative to its root)."""
        p = Path(rel)
        return p if p.is_absolute() else self.root / p

    def snapshot(self) -> Optional[RunState]:
        """The state as it is now, for reading outside `lock` (the charts, in a thread): its own
        dict of trials (the trials and servers themselves are shared), taken under the lock."""
        with self.lock:
            state = self.state
            if state is None:
                return None
            view = copy.copy(state)
            view.trials, view.servers = dict(state.trials), dict(state.servers)
            return view

    def server_log(self, name: str) -> Optional[str]:
        """The server's own log (`<logs>/<name>.log`), relative to the root."""
        if self.session is None:
            return None
        path = self.session.layout.own_log(name)
        return self.session.layout.rel(path) if path is not None else None

    def gym_streams(self, rel: str) -> list[LogSource]:
        """Gym's captured stdout and stderr that `rel` is one of, as merged-view sources."""
        if self.session is None:
            return []
        lay = self.session.layout
        mine = lay.gym_output()
        if rel not in {lay.rel(s.path) for s in mine}:
            return []
        return [(s.path.name.rsplit(".", 2)[-2] if s.path.name.count(".") >= 2 else s.path.name,
                 s.path, lay.rel(s.path)) for s in mine]

    def all_logs(self) -> tuple[list[LogSource], tuple[str, ...]]:
        """What the merged view of every server shows, and its order hint: each server's own log,
        in the order Gym's captured stdout received their lines (every server prints there too);
        where the servers' output is only in Gym's captured output, that output (already merged)."""
        if self.session is None:
            return [], ()
        lay = self.session.layout
        sources = [(name, path, lay.rel(path)) for name, path in sorted(lay.server_logs().items())]
        out = sorted(lay.gym_output((ENV, BOTH)), key=lambda s: s.stderr)
        if sources:
            return sources, (str(out[0].path),) if out else ()
        return [(s.path.name, s.path, lay.rel(s.path)) for s in lay.gym_output()], ()

    def stream_paths(self) -> dict[str, Path]:
        """Gym's captured output files, by their path relative to the root."""
        if self.session is None:
            return {}
        return {self.session.layout.rel(s.path): s.path for s in self.session.streams()}

    # --- a rerun of what did not complete -----------------------------------------------
    def rerunnable(self, keys: Optional[Iterable[TrialKey]] = None) -> list[rerun.RerunTrial]:
        """The trials a retry file would hold: those of `keys` (else all) that did not complete."""
        with self.lock:
            plan = rerun.plan(self.state) if self.state is not None else []
        wanted = set(keys) if keys is not None else None
        return [p for p in plan if wanted is None or (p.task_index, p.rollout_index) in wanted]

    def write_retry(self, file: str, keys: Optional[Iterable[TrialKey]] = None) -> tuple[Optional[RetryInput], str]:
        """`gymwatch report --retry-input FILE` for `keys` (else every trial that did not complete):
        the file written (never inside the run) and the lines to show, or (None, why not).
        RetryRefused when FILE cannot be written."""
        plan = self.rerunnable(keys)
        with self.lock:
            state = self.state
            if self.session is None or state is None:
                return None, "no run to read yet"
            written = write(state, self.session.layout, plan, file)
        if written is None:
            return None, nothing_to_rerun(plan, file)
        return written, "\n".join(written.text())

    def watch_paths(self) -> list[Path]:
        paths = self.session.watch_paths() if self.session else [self.root]
        paths = sorted({p for p in paths if p.exists()})
        return [p for p in paths if not any(q != p and q in p.parents for q in paths)]

    # --- progress ---------------------------------------------------------------------
    def done_total(self) -> tuple[int, int]:
        state = self.state
        if state is None:
            return 0, 0
        with self.lock:
            done = sum(1 for t in state.trials.values() if t.status in (T_COMPLETED, T_FAILED, T_NEVER_RAN))
        total = state.expected_total if state.expected_total is not None else len(state.trials)
        return done, max(total, len(state.trials))

    def _sample(self) -> None:
        now = self.clock()
        done, _ = self.done_total()
        s = self._samples
        if s and done < s[-1][1]:
            s.clear()
        s.append((now, done))
        while len(s) > 2 and now - s[0][0] > RATE_WINDOW:
            s.popleft()
        while len(s) > 2 and s[0][1] == s[1][1] == 0:
            s.popleft()     # before the first trial finished: startup, not the collection's pace

    def rate_eta(self) -> tuple[Optional[float], Optional[float]]:
        """Trials per second over the last minute, and seconds left at that rate."""
        if len(self._samples) < 2 or self.state is None or collector_ended(self.state):
            return None, None
        (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
        if t1 - t0 < 2 or d1 <= d0:
            return (0.0 if t1 - t0 >= 2 else None), None
        rate = (d1 - d0) / (t1 - t0)
        done, total = self.done_total()
        return rate, max(0, total - done) / rate

    def started_at(self) -> float:
        """When the run started (the summary's elapsed time): its own record, else the first
        server seen, else when this screen opened."""
        state = self.state
        if state is not None:
            if state.info.started_at:
                return state.info.started_at
            with self.lock:
                seen = [s.first_seen for s in state.servers.values() if s.first_seen is not None]
            stamp = state.first_stamp        # the run's first timestamped line: for a late attach
            if not (seen or self.replay) and stamp is not None and 0 <= self.clock() - stamp <= STAMP_TRUSTED_FOR:
                seen.append(stamp)           # (not in a replay: its lines carry the recording's times)
            if seen:
                return min(seen + [self.opened_at])
        return self.opened_at




def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
