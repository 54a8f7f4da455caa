"""A RunSession owns the tailers of one run and feeds the reducer; `poll()` reads what is new.

`gymwatch report` opens a session and polls once to the end; the live screen polls on
every watchfiles event and on a periodic tick. Same path, same model.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable, Optional

from . import eolcount, procs
from .config import read_info
from .layout import MANIFEST_NAME, NotARun, RunLayout, Stream, discover, find_hydra_dirs, find_streams
from .model import RunState
from .reducer import Changes, Reducer
from .tail import Tailer, decode
from .verdict import settle

PROCESS_CHECK_EVERY = 2.0   # seconds between psutil sweeps on a live run
READ_BUDGET = 8 << 20      # bytes of one file read per slice
LIVE_SLICE = 1 << 20       # ... when a poll has a time budget (~0.1 s of a server log's lines)
SHAPE_CHECK_EVERY = 1.0     # seconds between re-discoveries of what files the run has


class RunSession:
    def __init__(self, layout: RunLayout, clock: Optional[Callable[[], float]] = None,
                 check_processes: bool = True, explicit_file: bool = False, logs_given: bool = False):
        self.layout = layout
        self._explicit = explicit_file     # the user named a rollouts file: its layout is fixed
        self._logs_given = logs_given
        self.clock = clock
        self.check_processes = check_processes
        self._last_proc_check = 0.0
        self._last_shape_check = 0.0
        self._manifest_sig: tuple = ()
        self._caught_up = False
        self._deadline: Optional[float] = None
        self.behind: dict[str, tuple[int, int]] = {}    # rel path -> (bytes read, size) left for later
        self._new_state()

    def _new_state(self) -> None:
        self.state = RunState(root=str(self.layout.root), kind=self.layout.kind)
        self._config_sig: Optional[tuple] = None   # None: the configs were never read
        self.reducer = Reducer(self.state, self._line_clock)
        self._refresh_info()
        self.tailers: dict[Path, Tailer] = {}
        self._rels: dict[Path, str] = {}     # evidence names of the tailed files
        self._streams: dict[Path, Stream] = {s.path: s for s in self.layout.streams}

    def _now(self) -> Optional[float]:
        return self.clock() if self.clock else None

    def _line_clock(self) -> Optional[float]:
        """When a line was seen. Lines already there at the first read have no time: stamping them
        with the attach time would make every server look ready in under a second."""
        return self._now() if self._caught_up else None

    @classmethod
    def open(cls, path: str, logs: Optional[str] = None, **kw) -> "RunSession":
        layout = discover(path, logs)
        return cls(layout, explicit_file=os.path.isfile(path), logs_given=bool(logs), **kw)

    # --- reading -------------------------------------------------------------------
    def poll(self, final: bool = False, budget: Optional[float] = None) -> Changes:
        """Read every watched file from its offset. `final`: the run is over, take partial lines too.
        `budget`: seconds of reading after which a file not read to its end is left for the next
        poll (`behind` lists them; every file still gets a slice), so a screen stays responsive
        while it catches up with a log of gigabytes. Until nothing is behind, lines are untimed."""
        self._deadline = None if budget is None else time.monotonic() + budget
        self.behind = {}
        stamp = self._line_clock()   # None on the first read: the lines already there are untimed
        old = self.state             # server times carry over any re-read below
        now = time.monotonic()
        reshape = final or now - self._last_shape_check >= SHAPE_CHECK_EVERY
        if reshape:
            self._last_shape_check = now
        reset = reshape and self._rediscover()
        if reset:
            self._new_state()
        elif reshape:
            self._refresh_info()
        if self._poll_files(final):
            self._new_state()
            self._poll_files(final)
            reset = True
        if reset:
            carry_times(old, self.state)
        self._caught_up = self._caught_up or not self.behind
        self.state.reading = bool(self.behind)
        self._processes()
        self.reducer.changes.trials |= settle(self.state, self.reducer.trackers, stamp)
        self.state.now = self._now()
        changes = self.reducer.take_changes()
        changes.reset = reset
        return changes

    def _rediscover(self) -> bool:
        """A live run grows into its final shape (sidecars, logs/, bundle files appear late):
        when what the path IS changes, adopt the new layout and read it afresh."""
        lay = self.layout
        if lay.kind == "launched" or self._explicit or not lay.root.is_dir():
            return False
        try:
            fresh = discover(str(lay.root), str(lay.logs_dir) if self._logs_given else None)
        except NotARun:
            return False
        if (fresh.kind, fresh.rollouts, fresh.logs_dir) == (lay.kind, lay.rollouts, lay.logs_dir):
            return False
        self.layout = fresh
        return True

    def _refresh_info(self) -> None:
        """Re-read names and settings when a Hydra config appeared or changed (live runs)."""
        lay = self.layout
        if lay.root.is_dir():
            lay.hydra_dirs = find_hydra_dirs(lay.root)
        sig = tuple(_stat_sig(d / ".hydra" / n) for d in lay.hydra_dirs for n in ("config.yaml", "overrides.yaml"))
        if sig != self._config_sig:
            self._config_sig = sig
            self.state.info = read_info(lay.hydra_dirs, lay.bundle_meta, lay.manifest)
            self.reducer.changes.run = True

    def _poll_files(self, final: bool) -> bool:
        lay = self.layout
        if lay.logs_dir is None and (lay.root / "logs").is_dir() and lay.kind != "launched":
            lay.logs_dir = lay.root / "logs"
        logs = lay.server_logs()
        if set(logs) & self.reducer.fed_from_merged:
            return True   # a server's own log appeared after its merged lines: read it afresh from there
        self.reducer.own_logs = set(logs)
        reset = False
        for name, path in logs.items():
            reset |= self._read(path, final, lambda f, n, raw, name=name:
                                self.reducer.server_log_line(name, f, n, decode(raw)),
                                offset_key=name)
        if lay.kind != "launched":
            dirs = {lay.root} | ({lay.rollouts.parent} if lay.rollouts is not None else set())
            for d in dirs:
                for s in find_streams(d):
                    self._streams.setdefault(s.path, s)
        for stream in list(self._streams.values()):
            reset |= self._read(stream.path, final, lambda f, n, raw, role=stream.role:
                                self.reducer.stream_line(role, f, n, decode(raw)))
        if lay.rollouts is not None:
            if not self.state.collector.started and lay.materialized.exists():
                self.state.collector.started = True   # Gym writes it first, as collection begins
                self.reducer.changes.run = True
            reset |= self._read(lay.materialized, final, self.reducer.materialized_row)
            reset |= self._read(lay.rollouts, final, self.reducer.rollout_row)
            reset |= self._read(lay.failures, final, self.reducer.failure_row)
            self._aggregate()
        return reset

    def _read(self, path: Optional[Path], final: bool, feed, offset_key: str = "") -> bool:
        if path is None:
            return False
        t = self.tailers.get(path)
        if t is None:
            t = self.tailers[path] = self._tailer(path, offset_key)
            self._rels[path] = self.layout.rel(path)
        rel = self._rels[path]
        deadline = self._deadline
        piece = READ_BUDGET if deadline is None else LIVE_SLICE
        while True:   # in slices, so a 300 MB rollouts file is never held whole
            batch = t.read(final=final, max_bytes=piece)
            if batch.error:
                self.reducer.file_error(rel, f"cannot read: {batch.error}")
            if batch.reset:
                return True
            for lineno, raw in batch.lines:
                feed(rel, lineno, raw)
            if batch.lines:
                files = self.reducer.changes.files
                files[rel] = files.get(rel, 0) + len(batch.lines)
            if not batch.more:
                return False
            if deadline is not None and time.monotonic() >= deadline:
                self.behind[rel] = (t.offset, _size(path))
                return False

    def _tailer(self, path: Path, offset_key: str) -> Tailer:
        offset = self.layout.log_offsets.get(offset_key, 0) if offset_key else 0
        if offset <= 0:
            return Tailer(str(path))
        return Tailer(str(path), offset, _count_lines(path, offset))

    def _aggregate(self) -> None:
        agg = self.layout.aggregate
        if agg is None or self.state.aggregate_written:
            return
        try:
            with open(agg, "rb") as fh:
                json.loads(fh.read())
        except (OSError, ValueError):
            return   # absent, or still being written
        self.state.aggregate_written = True
        self.reducer.changes.run = True

    # --- processes ------------------------------------------------------------------
    def _processes(self) -> None:
        if not self.check_processes:
            return
        now = time.monotonic()
        if now - self._last_proc_check < PROCESS_CHECK_EVERY and self._last_proc_check:
            return
        self._last_proc_check = now
        self.refresh_processes()

    def refresh_processes(self) -> None:
        if not self.check_processes:
            return
        lay = self.layout
        if lay.manifest:
            self._reload_manifest()
            live = procs.from_manifest(lay.manifest)
        else:
            live = procs.scan(procs.needles_for(lay.root, lay.rollouts, lay.logs_dir))
        p, c = self.state.parent, self.state.collector
        facts = (live.parent, live.collector, live.parent_exit, live.collector_exit)
        if (p.alive, c.alive, p.exit_code, c.exit_code) != facts:
            self.reducer.changes.run = True
        p.alive, c.alive, p.exit_code, c.exit_code = facts

    def _reload_manifest(self) -> None:
        """The launcher updates its manifest (the eval process starts after readiness): follow it."""
        path = self.layout.root / MANIFEST_NAME
        sig = _stat_sig(path)
        if sig == self._manifest_sig:
            return
        self._manifest_sig = sig
        try:
            fresh = discover(str(self.layout.root))
        except NotARun:
            return
        self.layout.manifest = fresh.manifest
        self.layout.rollouts = self.layout.rollouts or fresh.rollouts
        self.layout.streams = fresh.streams
        for stream in fresh.streams:
            self._streams.setdefault(stream.path, stream)
        self.state.info = read_info(self.layout.hydra_dirs, self.layout.bundle_meta, self.layout.manifest)

    def apply_probe(self, instances: Optional[list] = None, answers: Optional[dict[str, bool]] = None) -> Changes:
        """Fold in what the head server said (`/server_instances`) and which servers answered `GET /`."""
        if instances:
            self.reducer.server_instances(instances)
        for name, ok in (answers or {}).items():
            self.reducer.http_answer(name, ok)
        self.reducer.changes.trials |= settle(self.state, self.reducer.trackers, self._now())
        return self.reducer.take_changes()

    def streams(self) -> list[Stream]:
        """Gym's captured output files found so far (the layout's, and any that appeared)."""
        return sorted(self._streams.values(), key=lambda s: str(s.path))

    def watch_paths(self) -> list[Path]:
        return self.layout.watch_dirs()

    def is_live(self) -> bool:
        return bool(self.state.parent.alive or self.state.collector.alive)


def carry_times(old: RunState, new: RunState) -> None:
    """After the run's files were re-read from the start, keep when each server was first seen,
    became ready and entered its state: a re-read stamps those with the time of the re-read."""
    for name, s in new.servers.items():
        o = old.servers.get(name)
        if o is None:
            continue
        if o.first_seen is not None and (s.first_seen is None or o.first_seen < s.first_seen):
            s.first_seen = o.first_seen
        if o.ready_at is not None and s.ready_at is not None and o.ready_at < s.ready_at:
            s.ready_at = o.ready_at
        if o.state == s.state and o.state_since is not None and (s.state_since is None or o.state_since < s.state_since):
            s.state_since = o.state_since


def _stat_sig(path: Path) -> tuple:
    try:
        st = path.stat()
        return (str(path), st.st_size, st.st_mtime_ns)
    except OSError:
        return (str(path), None, None)


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _count_lines(path: Path, upto: int) -> int:
    """Lines in the first `upto` bytes (a line start), counted as the Tailer counts them
    (\n, \r\n, lone \r): the log index's counter, plus a final \r it leaves undecided at EOF."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return 0
    try:
        vals = eolcount.scan_range(fd, 0, upto)
    finally:
        os.close(fd)
    return sum(vals[1:-3:2]) + vals[-1]


def read_run(path: str, logs: Optional[str] = None, check_processes: bool = True) -> RunSession:
    """Open a run and read everything there is now (the headless report's path)."""
    session = RunSession.open(path, logs, check_processes=check_processes)
    session.refresh_processes()
    session.poll(final=not session.is_live())
    return session
