"""A RunSession owns the tailers of one run and feeds the reducer; `poll()` reads what is new.

`gymwatch report` opens a session and polls once to the end; the live screen polls on
every watchfiles event and on a periodic tick. Same path, same model.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from . import eolcount, fast, procs, records, score
from .fast import fork
from .layout import BOTH, EVAL, WAITING, Listings, Refreshed, RunLayout, Stream
from .model import Evidence, RunState, parent_ended
from .plan import FULL, Reader, ReadingPlan
from .reducer import Changes, Reducer
from .tail import Tailer, read_head, read_head_stat

if TYPE_CHECKING:      # (a submitted run's pieces are imported when one is read)
    from .cluster.files import JobFile
    from .rayfeed import RayAnswer, RayFeed
    from .slurmfeed import Answer, SlurmFeed

PROCESS_CHECK_EVERY = 2.0   # seconds between psutil sweeps on a live run
READ_BUDGET = 8 << 20      # bytes of one file read per slice
LIVE_SLICE = 1 << 20       # ... when a poll has a time budget (a slice well within it)
SHAPE_CHECK_EVERY = 1.0     # seconds between re-discoveries of what files the run has
ROWS_LOOK_EVERY = 0.2       # ... while the collector runs and no rollouts file is known
KEYS_CHILD_MIN = 32 << 20    # bytes of materialized inputs worth a forked child (core/fast/fork.py)
ROWS_CHILD_MIN = 64 << 20    # bytes of rollouts worth a forked child for their back part
ROWS_CHILD_SHARE = 0.35      # of the rollouts' bytes that child decodes (niced, sharing a core)
STALE_SLACK = 2.0           # seconds a sidecar may predate the materialized inputs and still be this run's
HEALTH_SETTLE = 5.0         # seconds an unparsable quality_summary.json must stay unchanged to be malformed


class RunSession:
    def __init__(self, layout: RunLayout, clock: Optional[Callable[[], float]] = None,
                 check_processes: bool = True, timed: bool = False, helpers: bool = False,
                 plan: ReadingPlan = FULL, listed: Optional[Listings] = None, slurm: Optional["SlurmFeed"] = None,
                 ray: Optional["RayFeed"] = None):
        """`plan`: what is read, and how (core/plan.py). `listed`: listings of the run just taken,
        for a one-shot read of it (the runs browser's summary): its files' sizes and times as they
        say, the same the summary's cache key was made from. `slurm`: for a submitted run (layout
        kind `slurm_job`), who asks Slurm about its jobs (core/slurmfeed.py; None: never asked,
        its jobs' states are inferred from their files). Its job stands in for the process check.
        `ray`: for a run whose services span nodes (`--ray URL`), who asks Ray's dashboard
        (core/rayfeed.py)."""
        self.layout = layout
        self.slurm = slurm
        self._answer: Optional["Answer"] = None         # Slurm's latest answer, applied
        self.ray = ray
        self._ray_answer: Optional["RayAnswer"] = None  # the dashboard's latest answer, applied
        self.plan = plan
        self.listed = listed
        self.helpers = helpers              # may fork helpers (core/fast/fork.py): a process doing nothing else
        self.clock = clock
        self.check_processes = check_processes
        self._last_proc_check = 0.0
        self._last_shape_check = 0.0
        self._last_rows_look = 0.0
        self._looked_at_end = False   # looked for the rows file once the collector said it finished
        self._caught_up = timed     # timed: reopened on a run already watched, its new lines are new now
        self._deadline: Optional[float] = None
        self.behind: dict[str, tuple[int, int]] = {}    # rel path -> (bytes read, size) left for later
        self._new_state()

    def _new_state(self) -> None:
        self.state = RunState(root=str(self.layout.root), kind=self.layout.kind)
        self.reducer = Reducer(self.state, self._line_clock)
        job = self.layout.job
        if job is not None:
            self.reducer.job_known(job.bench, job.script, job.files, job.refused_at)
            if self._answer is not None:        # (a run read afresh keeps what Slurm said)
                self.reducer.slurm_answer(self._answer.poll, self._answer.asked_at)
        if self._ray_answer is not None:        # (and what Ray said)
            a = self._ray_answer
            self.reducer.ray_answer(a.state, a.asked_at, a.names)
        self._read_names()
        self.tailers: dict[Path, Reader] = {}
        self._rels: dict[Path, str] = {}     # evidence names of the tailed files
        self._logs: Optional[dict[str, Path]] = None     # the servers' own logs, as last listed

    def _now(self) -> Optional[float]:
        return self.clock() if self.clock else None

    def _line_clock(self) -> Optional[float]:
        """When a line was seen. Lines already there at the first read have no time: stamping them
        with the attach time would make every server look ready in under a second."""
        return self._now() if self._caught_up else None

    @classmethod
    def open(cls, path: str, logs: Optional[str] = None, wait: bool = False, slurm: Optional[bool] = None,
             ray: Optional[str] = None, **kw) -> "RunSession":
        """A session of the run at `path` (core/target.py: a submission's one benchmark too;
        target.IsSubmission for several). `wait`: a directory that is not a run yet is watched
        until it is one (its layout's kind is `waiting`, and says why). `slurm`: ask Slurm about
        a submitted run's jobs (None: unless the environment says GYMWATCH_NO_SLURM); `once`
        (True with no screen: a report) asks it once, and Ray's dashboard at `ray` too."""
        from .target import run_layout

        layout = run_layout(path, logs, wait=wait)
        once = kw.pop("once", False)
        if layout.job is not None:
            from .cluster.slurmcli import POLL_INTERVAL
            from .slurmfeed import SlurmFeed, slurm_wanted

            if slurm if slurm is not None else slurm_wanted():
                kw["slurm"] = SlurmFeed(layout.job.sub, interval=None if once else POLL_INTERVAL)
        if ray:
            from .rayfeed import INTERVAL, RayFeed

            kw["ray"] = RayFeed(ray, interval=None if once else INTERVAL)
        return cls(layout, **kw)

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
        if self.layout.job is not None:
            self.layout.job.ids = self.reducer.job_ids()
        seen = self.layout.refresh(whole=reshape) if self.plan.follow else Refreshed()
        reset = seen.new
        if reset:
            self._new_state()
        elif seen.names:
            self._read_names()
        if self._poll_files(final) or self._rows_appeared():
            self._new_state()
            self._poll_files(final)
            reset = True
        if reset:
            self.reducer.carry_times(old)
        self._caught_up = self._caught_up or not self.behind
        self._slurm()
        self._ray()
        self._processes()
        self._file_activity()
        self.reducer.read_progress(bool(self.behind), self._now())
        self.reducer.settle(stamp)
        changes = self.reducer.take_changes()
        changes.reset = reset
        return changes

    def _file_activity(self) -> None:
        """The read files' last writes, and those that tell a collection's pace from its files
        alone (core/pace.py): its results', its inputs' (its start) and its own output's."""
        lay, tailers = self.layout, self.tailers
        writes = {self._rels[p]: t.mtime for p, t in tailers.items() if t.mtime is not None}

        def last(paths) -> Optional[float]:
            return max((t.mtime for p in paths if p is not None and (t := tailers.get(p)) is not None
                        and t.mtime is not None), default=None)

        collector = [s.path for s in lay.streams if s.role in (EVAL, BOTH)]
        self.reducer.file_activity(max(writes.values(), default=None), time.time(), writes,
                                   last([lay.rollouts]), last([lay.rollouts, lay.failures]),
                                   last([lay.materialized]), last(collector))

    def _rows_appeared(self) -> bool:
        """The collector started (or finished) in what was just read, but the run's rollouts file
        is not known yet: Gym has written it by now, so find it in this poll, not a second later
        (a finished collection with its rows unread would look like one that recorded nothing).
        True: the run is another now, read it afresh."""
        c = self.state.collector
        if self.layout.rollouts is not None or not c.started or not self.plan.follow:
            return False
        now = time.monotonic()
        ended = c.finished or self.state.aggregate_written
        if now - self._last_rows_look < ROWS_LOOK_EVERY and not (ended and not self._looked_at_end):
            return False
        self._last_rows_look, self._looked_at_end = now, ended
        return self.layout.refresh().new

    def _read_names(self) -> None:
        """Names and settings from Hydra's configs, the manifest or a bundle (core/config.py)."""
        if self.plan.follow:
            self.layout.names_read()
        self.reducer.run_info(self.plan.info(self.layout))

    def server_logs(self) -> dict[str, Path]:
        """The run's per-server logs now. A logs dir that cannot be listed is said once (not a run
        without logs)."""
        if self._logs is not None and not self.plan.follow:
            return self._logs          # a one-shot read: the logs as they were first listed
        lay = self.layout
        logs = self._logs = lay.server_logs(self.listed)
        if not logs and lay.logs_dir is not None:
            rel = lay.rel(lay.logs_dir).rstrip("/") + "/"
            why = _unlistable(lay.logs_dir)
            if why:
                self.reducer.unreadable(rel, why)
            else:
                self.reducer.readable(rel)
        return logs

    def _poll_files(self, final: bool) -> bool:
        lay = self.layout
        logs = self.server_logs()
        if not self.reducer.servers_own_logs(set(logs)):
            return True   # a server's own log appeared after its merged lines: read it afresh from there
        reset = False
        for name, path in logs.items():
            reset |= self._read(path, final, lambda f, first, block, name=name:
                                self.reducer.server_log_block(name, f, first, block),
                                offset_key=name, blocks=True)
        job: dict[Path, "JobFile"] = {}
        if lay.job is not None:
            from .cluster.files import JOBSCRIPT, ROLLOUTS

            job = {f.path: f for f in lay.job.files if f.kind not in (JOBSCRIPT, ROLLOUTS)}
            self.reducer.job_known(lay.job.bench, lay.job.script, lay.job.files, lay.job.refused_at)
        for stream in list(lay.streams):
            reset |= self._read(stream.path, final, self._stream_feed(stream, job.pop(stream.path, None)), blocks=True)
        for f in job.values():        # the job's own files (the driver log that is Gym's output: just above)
            reset |= self._read(f.path, final, lambda _, first, block, f=f: self.reducer.job_block(f, first, block),
                                blocks=True)
        if lay.rollouts is not None:
            if not self.state.collector.started and lay.materialized is not None and self._exists(lay.materialized):
                self.reducer.collection_began()
            # big files of a report's one-shot read: the inputs, and the rollouts' back part, on the other core
            keys = self._helper("fork:inputs", lay.materialized, final, KEYS_CHILD_MIN, 0.0, records.input_rows)
            rows = self._helper("fork:rows", lay.rollouts, final, ROWS_CHILD_MIN, ROWS_CHILD_SHARE, records.rollout_rows)
            try:
                if keys is None:
                    reset |= self._read(lay.materialized, final, self.reducer.materialized_block, blocks=True)
                reset |= self._read(lay.rollouts, final, self.reducer.rollout_block, blocks=True,
                                    stop=rows[1] if rows is not None else None)
                if rows is not None and not reset:
                    reset |= self._helped(rows, lay.rollouts, final, self.reducer.rollout_rows,
                                          self.reducer.rollout_block)
                self.reducer.cut_row(self._cut_row(lay.rollouts))
                if keys is not None and lay.materialized is not None and not reset:
                    reset |= self._helped(keys, lay.materialized, final, self.reducer.materialized_rows,
                                          self.reducer.materialized_block)
            finally:
                for helper in (rows, keys):
                    if helper is not None:
                        helper[0].close()
            reset |= self._read(lay.failures, final, self.reducer.failure_block, blocks=True)
            if self._from_this_run(lay.health_verdicts):
                reset |= self._read(lay.health_verdicts, final, self.reducer.verdict_row)
            self._aggregate()
            self._health_summary(final)
        return reset

    def _stream_feed(self, stream: Stream, job_file: Optional["JobFile"]):
        """What reads a block of Gym's captured output: the reducer's stream part, and when the
        stream is a submitted run's driver log, its job part too (the same lines: one tailer)."""
        if job_file is None:
            return lambda f, first, block: self.reducer.stream_block(stream.role, f, first, block)

        def both(f: str, first: int, block: bytes) -> None:
            self.reducer.stream_block(stream.role, f, first, block)
            self.reducer.job_block(job_file, first, block)
        return both

    def _slurm(self) -> None:
        """A submitted run: Slurm's answer about its jobs, when there is a newer one."""
        job = self.layout.job
        if self.slurm is None or job is None:
            return
        self.slurm.register(job.bench.name, self.reducer.job_ids(), job.script.job_name if job.script else "")
        answer = self.slurm.answer()
        if answer is not None and (self._answer is None or answer.number > self._answer.number):
            self._answer = answer
            self.reducer.slurm_answer(answer.poll, answer.asked_at)

    def _ray(self) -> None:
        """A run with `--ray`: the dashboard's answer, when there is a newer one."""
        if self.ray is None:
            return
        answer = self.ray.answer()
        if answer is not None and (self._ray_answer is None or answer.number > self._ray_answer.number):
            self._ray_answer = answer
            self.reducer.ray_answer(answer.state, answer.asked_at, answer.names)

    def _read(self, path: Optional[Path], final: bool, feed, offset_key: str = "", blocks: bool = False,
              stop: Optional[int] = None) -> bool:
        """Feed the file's new lines: `feed(rel, lineno, raw)` a line; with `blocks`
        `feed(rel, first lineno, block of whole lines)`."""
        if path is None or not self.plan.wants(self, path, offset_key):
            return False
        t = self.tailers.get(path)
        if t is None:
            t = self.tailers[path] = self._tailer(path, offset_key)
            self._rels[path] = self.layout.rel(path)
        rel = self._rels[path]
        deadline = self._deadline
        piece = READ_BUDGET if deadline is None else LIVE_SLICE
        while True:   # in slices, so a 300 MB rollouts file is never held whole
            before = t.lineno
            # (`stop` only when given: a helper reads on from there; a plan's own readers take none)
            batch = t.read(final=final, max_bytes=piece, blocks=blocks) if stop is None or not isinstance(t, Tailer) \
                else t.read(final=final, max_bytes=piece, blocks=blocks, stop=stop)
            if batch.error:
                lay = self.layout
                self.reducer.unreadable(rel, batch.error, rows=path in (lay.rollouts, lay.failures, lay.materialized))
                return False
            self.reducer.readable(rel)
            if batch.reset:
                return True
            for lineno, raw in batch.blocks if blocks else batch.lines:
                feed(rel, lineno, raw)
            self.reducer.lines_read(rel, t.lineno - before)
            if not batch.more:
                return False
            if deadline is not None and time.monotonic() >= deadline:
                self.behind[rel] = (t.offset, self.size(path))
                return False

    def _cut_row(self, path: Path) -> Optional[Evidence]:
        """The rollouts file's last line when it is no whole row: a partial line held back, or
        (read to the end) an unusable line with no line end after it. Gym ends every row with one,
        so either is a row cut short: once the collector has ended, it died writing it."""
        t = self.tailers.get(path)
        if not isinstance(t, Tailer) or not t.exists:
            return None
        rel = self._rels[path]
        if t.held:
            return Evidence(rel, t.lineno + 1, "", CUT_ROW)
        if t.lineno and self.reducer.last_bad_row(rel) == t.lineno and not _ends_a_line(path, t.offset):
            return Evidence(rel, t.lineno, "", CUT_ROW)
        return None

    def _helper(self, use: str, path: Optional[Path], final: bool, worth: int, share: float,
                decode: Callable[[bytes], list[records.Row]]) -> Optional[tuple[fork.Child, int]]:
        """A forked child reading the rows file at `path` from where its last `share` starts (0:
        all of it), decoded by `decode`, while this process reads the rest: only for a one-shot
        read of a whole file of at least `worth` bytes by a process allowed to fork
        (`read_run()`: the report, diff). (child, its start). `use`: fast.PATHS's name."""
        if not self.helpers or not final or self._deadline is not None or path is None:
            return None
        t = self.tailers.get(path)
        if t is not None and t.offset:
            return None
        size = self.size(path)
        if size < worth or not fork.can_fork(use):
            return None
        start = fork.split_point(str(path), size, share) if share else 0
        if start is None:
            return None
        try:
            return fork.rows_child(str(path), start, final, decode), start
        except OSError:
            return None

    def _helped(self, helper: tuple[fork.Child, int], path: Path, final: bool, rows_feed, block_feed) -> bool:
        """Apply the rows a helper decoded, after this process's own (which end at its start), and
        move the file's tailer past them; if the child failed in any way, read them here."""
        child, start = helper
        t = self.tailers.get(path)
        if t is None:
            t = self.tailers[path] = self._tailer(path, "")
            self._rels[path] = self.layout.rel(path)
        got = fork.rows_answer(child) if isinstance(t, Tailer) and t.offset == start else None
        if got is None or not isinstance(t, Tailer):
            return self._read(path, final, block_feed, blocks=True)
        end, lines, blocks = got
        rel, base = self._rels[path], t.lineno
        for first, rows in blocks:
            rows_feed(rel, base + first, rows)
        t.adopt(end, base + lines)
        self.reducer.lines_read(rel, lines)
        return False

    # A file's facts: now, or as listings just taken have them (`listed`: a one-shot read)
    def _stat(self, path: Path) -> os.stat_result:
        return os.stat(path) if self.listed is None else self.listed.stat(path)

    def is_file(self, path: Path) -> bool:
        """A regular file now (or as the listings just taken say)."""
        return self._is(path, stat.S_ISREG)

    def _is(self, path: Path, kind: Callable[[int], bool]) -> bool:
        """Is `path` of this kind (stat.S_ISDIR, S_ISREG)? False when it cannot be stat'ed."""
        try:
            return kind(self._stat(path).st_mode)
        except OSError:
            return False

    def _exists(self, path: Path) -> bool:
        try:
            self._stat(path)
        except OSError as exc:
            if exc.errno in _ABSENT:
                return False
            raise
        return True

    def size(self, path: Path) -> int:
        """The file's size now (or as the listings just taken say); 0 when it cannot be stat'ed."""
        try:
            return self._stat(path).st_size
        except OSError:
            return 0

    def _tailer(self, path: Path, offset_key: str) -> Reader:
        """The file's reader: the plan's, else a Tailer (from where this run began in a log a
        launched run shares with earlier ones)."""
        own = self.plan.reader(self, path, offset_key)
        if own is not None:
            return own
        offset = self.layout.log_offsets.get(offset_key, 0) if offset_key else 0
        if offset <= 0:
            return Tailer(str(path))
        return Tailer(str(path), offset, _count_lines(path, offset))

    def _from_this_run(self, path: Optional[Path]) -> bool:
        """Gym 0.4-0.6 leave an earlier run's aggregate metrics beside reused rollouts, and no
        version clears the health files: a file older than this run's materialized inputs (which
        every collection writes first) is an earlier run's, and would make this one look finished."""
        if path is None:
            return False
        try:
            mtime = self._stat(path).st_mtime
        except OSError:
            return False
        inputs = self.layout.materialized
        try:
            fresh = inputs is None or mtime >= self._stat(inputs).st_mtime - STALE_SLACK
        except OSError:
            return True
        if not fresh:
            note = f"{self.layout.rel(path)} is older than this run's inputs (left by an earlier run): not read"
            self.reducer.note(note)
        return fresh

    def _aggregate(self) -> None:
        agg = self.layout.aggregate
        if agg is None or self.state.aggregate_written or not self._from_this_run(agg):
            return
        rel = self.layout.rel(agg)
        try:
            scores = score.gym_scores(read_head(agg), rel)
        except OSError as exc:
            if exc.errno not in _ABSENT:
                self.reducer.unreadable(rel, exc.strerror or str(exc))
            return
        except (ValueError, RecursionError):
            return   # still being written
        self.reducer.aggregate_done(scores)

    def _health_summary(self, final: bool) -> None:
        """Gym's quality_summary.json: read once it is whole (it is written in one go at the end).
        One that does not parse is malformed only when nothing more will come: on the final read,
        or once it has not changed for HEALTH_SETTLE seconds (a write caught halfway is not)."""
        path = self.layout.health_summary
        if path is None or self.reducer.health_file_totals or not self._from_this_run(path):
            return
        try:
            data, st = read_head_stat(path, 8 << 20)
            mtime = st.st_mtime
        except OSError:
            return
        if not data.strip():
            return
        if not final and time.time() - mtime < HEALTH_SETTLE:
            try:
                json.loads(data)
            except ValueError:
                return   # still being written
        self.reducer.health_summary(self.layout.rel(path), data)

    # --- processes ------------------------------------------------------------------
    def _processes(self) -> None:
        if not self.check_processes or self.layout.kind == WAITING or self.layout.job is not None:
            return
        now = time.monotonic()
        if now - self._last_proc_check < PROCESS_CHECK_EVERY and self._last_proc_check:
            return
        self._last_proc_check = now
        self.refresh_processes()

    def refresh_processes(self) -> None:
        """The run's processes looked for now. Not a submitted run's: it runs on a compute node,
        its job's state stands in (core/reducer/jobs.py)."""
        if not self.check_processes or self.layout.job is not None:
            return
        lay = self.layout
        # a launched run's manifest as it is now (a launched run is never another run: no reset)
        if lay.manifest and self.plan.follow and lay.refresh().names:
            self._read_names()
        live = self.plan.liveness(lay)
        self.reducer.processes(live.parent, live.collector, live.parent_exit, live.collector_exit, checked=True)
        if self.plan.orphans:
            self.reducer.orphans(self._orphans())

    def _orphans(self) -> dict[str, int]:
        """Servers still running on this machine after gym env start ended (Gym signals only their
        shell wrappers; a server that ignores that keeps its port)."""
        if not parent_ended(self.state):
            return {}
        return {s.name: s.pid for s in self.state.servers.values()
                if s.pid and procs.server_process_alive(s.pid, s.venv)}

    def apply_probe(self, instances: Optional[list] = None, answers: Optional[dict[str, bool]] = None) -> Changes:
        """Fold in what the head server said (`/server_instances`) and which servers answered `GET /`."""
        if instances:
            self.reducer.server_instances(instances)
        for name, ok in (answers or {}).items():
            self.reducer.http_answer(name, ok)
        self.reducer.settle(self._now())
        return self.reducer.take_changes()

    def streams(self) -> list[Stream]:
        """Gym's captured output files found so far."""
        return sorted(self.layout.streams, key=lambda s: str(s.path))

    def watch_paths(self) -> list[Path]:
        return self.layout.watch_dirs()

    def close(self) -> None:
        """Done with this session: its readers and its reducer's clock (which refer back to it)
        are let go, so that it is freed at once, not by the cyclic collector."""
        self.tailers = {}
        self.reducer.w.clock = _no_clock

    def is_live(self) -> bool:
        """Its processes run (a submitted run: its job is queued or running)."""
        c = self.state.job_conclusion
        if self.layout.job is not None:
            from .cluster.model import P_QUEUED, P_RUNNING

            return c is not None and c.phase in (P_QUEUED, P_RUNNING)
        return bool(self.state.parent.alive or self.state.collector.alive)


def _no_clock() -> None:
    return None


CUT_ROW = "the last row, cut mid-line (no line end after it)"


def _ends_a_line(path: Path, offset: int) -> bool:
    """The byte before `offset` ends a line (or cannot be read: then nothing is claimed)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return True
    try:
        return os.pread(fd, 1, offset - 1) in (b"\n", b"\r") if offset > 0 else True
    except OSError:
        return True
    finally:
        os.close(fd)


def _unlistable(d: Path) -> str:
    """Why a directory cannot be listed ('' when it can, or is not there)."""
    try:
        with os.scandir(d):
            return ""
    except OSError as exc:
        return "" if exc.errno in _ABSENT else (exc.strerror or str(exc))


_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)      # Path.exists() says False


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


def read_run(path: str, logs: Optional[str] = None, check_processes: bool = True,
             helpers: bool = True, ray: Optional[str] = None) -> RunSession:
    """Open a run and read everything there is now (the headless report's path, and diff's).
    `helpers`: forked children may read part of a big run meanwhile (core/fast/fork.py; never
    from a process with other threads, which it checks). `ray`: the Ray dashboard's URL, asked once."""
    session = RunSession.open(path, logs, check_processes=check_processes, helpers=helpers, once=True, ray=ray)
    read_now(session)
    return session


def read_now(session: RunSession) -> None:
    """Read everything there is now, once (partial last lines too once the run is over). A
    submitted run's job says whether it is over only once read: read it first, then the rest."""
    session.refresh_processes()
    with fast.bulk_load():
        if session.layout.job is not None:
            session.poll()
            if not session.is_live():
                session.poll(final=True)
        else:
            session.poll(final=not session.is_live())
