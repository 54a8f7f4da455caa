"""A run's one-line summary for the list: the report's own model and verdict, fed cheaply.

One truth: a summary is a RunSession (the reducer, settle, verdict) like `gymwatch report`'s,
with the report's process check (its answers taken from one sweep of the process table for
the whole listing, procscan.py) and the same judgement of a run whose processes are not seen
(by its files' activity). What is saved is only which files are read:

- rows (rollouts, failures, materialized inputs) first, whole: trial counts need every row;
- when the aggregate metrics exist and collection started, the verdict and counts follow from
  the rows and the collector's own output (`verdict.verdict`; `[rollout_collection]` lines name
  failed trials), so only Gym's `gym eval run` streams are read on top; the servers then come
  from the `logs/` dir's names, or, when a run has no per-server logs (evaluator bundles, runs
  without `+nemo_gym_log_dir`), from reading `gym env start`'s output too;
- otherwise every log, whole up to HEAD + TAIL bytes; a bigger log contributes its first HEAD
  and last TAIL bytes (`sampled`, shown as `~`), which keeps startup lines and the end.

Times come from what the run records (core/stamps.py): stamped lines read, plus the first and
last stamps of the logs the summary skipped; file times only when the run records none.
Names come from a line scan of Hydra's `config.yaml` (no YAML parser: that alone cost more than
the rest of a small run).

A summary whose verdict depends on liveness (the collector has not finished) records what it
was judged on (`liveness`): runs.py makes it again when that changed (a process came or went,
the files fell quiet), so a cached summary never outlives the truth.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, Optional

from ..core import config, gymlines as gl, procs, stamps
from ..core.layout import BOTH, EVAL, Listings, RunLayout
from ..core.model import FAILED, SILENCE, RunInfo, RunState
from ..core.plan import Reader, ReadingPlan, Session
from ..core.session import RunSession
from ..core.tail import Batch, Tailer, read_fd, read_head
from ..core.verdict import counts, mean_reward, verdict
from .fmt import ERROR
from .procscan import ProcessSweep

HEAD = 256 << 10
TAIL = 256 << 10
_EOL = re.compile(rb"\r\n|\r|\n")

class HeadTail:
    """Reads a big log once: its first HEAD and last TAIL bytes as whole lines. The head's lines
    are numbered from the file's start; the tail's from its end (-1: the last line), their numbers
    from the start not being known without reading what lies between."""

    def __init__(self, path: str):
        self.path, self.done = path, False
        self.offset = self.lineno = 0
        self.mtime: Optional[float] = None      # the file's last write (liveness by files)
        self.exists = False

    def read(self, final: bool = False, max_bytes: Optional[int] = None, blocks: bool = False) -> Batch:
        batch = Batch()
        if self.done:
            return batch
        self.done = True
        try:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                st = os.fstat(fd)
                self.mtime, self.exists, self.offset = st.st_mtime, True, st.st_size
                head = read_fd(fd, st.st_size, HEAD)
                tail = os.pread(fd, TAIL, max(0, st.st_size - TAIL))
            finally:
                os.close(fd)
        except OSError as exc:
            batch.error = exc.strerror or str(exc)
            return batch
        first = _EOL.split(head)[:-1]            # the cut last line is dropped
        last = _EOL.split(tail)[1:]              # and so is the cut first line of the tail
        if last and not last[-1]:
            last.pop()                           # (after the file's last line end: no line)
        batch.lines = [(i, raw) for i, raw in enumerate(first, 1)] + \
            [(i - len(last), raw) for i, raw in enumerate(last)]
        self.lineno = len(first) + len(last)
        return in_blocks(batch) if blocks else batch


def in_blocks(batch: Batch) -> Batch:
    """A batch of numbered lines as blocks of consecutively numbered whole lines (Tailer.read(blocks=True))."""
    lines, batch.lines = batch.lines, []
    start = 0
    for i in range(1, len(lines) + 1):
        if i == len(lines) or lines[i][0] != lines[i - 1][0] + 1:
            batch.blocks.append((lines[start][0], b"".join(raw + b"\n" for _, raw in lines[start:i])))
            start = i
    return batch


def all_named(state: RunState) -> bool:
    """Gym has named every server: all are ready, or its first `0 / N servers ready. Waiting for
    servers to spin up: [...]` listed them all."""
    p = state.parent
    return p.all_ready is not None or (p.ready_count is not None and p.ready_count[0] == 0
                                       and p.pending is not None and len(p.pending) == p.ready_count[1])


class ReadyCut:
    """`gym env start`'s output for a summary whose rows may decide the verdict: read up to where
    Gym has named every server (its first `0 / N servers ready` list, else `All N / N servers
    ready`) and no further, unless the summary then needs everything (it reads on from there)."""

    STEP = 16           # lines handed over at a time, so the cut lands near the line

    def __init__(self, inner: Reader, plan: "SummaryPlan", session: Session):
        self.inner, self.plan, self.session = inner, plan, session
        self.lines: list = []
        self.i = 0
        self.more = True
        self.cut = False            # stopped before the end of the file
        self.lineno = 0             # lines handed over

    @property
    def offset(self) -> int:
        return self.inner.offset

    @property
    def mtime(self) -> Optional[float]:
        return self.inner.mtime

    @property
    def exists(self) -> bool:
        return self.inner.exists

    def read(self, final: bool = False, max_bytes: Optional[int] = None, blocks: bool = False) -> Batch:
        if self.plan.phase == FIRST and all_named(self.session.state):
            self.cut = self.i < len(self.lines) or self.more
            return Batch()
        if self.i >= len(self.lines):
            batch = self.inner.read(final, max_bytes)
            if batch.error or batch.reset or not batch.lines:
                self.more = batch.more
                return batch
            self.lines, self.i, self.more = batch.lines, 0, batch.more
        out = Batch()
        out.lines = self.lines[self.i:self.i + self.STEP]
        self.i += self.STEP
        self.lineno += len(out.lines)
        out.more = self.i < len(self.lines) or self.more
        self.cut = False
        return in_blocks(out) if blocks else out


# What a summary reads (SummaryPlan.phase): first the rows and the output every outcome needs
# (the collector's; `gym env start`'s when there are no per-server logs), then, if the rows do not
# decide the verdict, everything.
FIRST, ALL = "first", "all"


class SummaryPlan(ReadingPlan):
    """A summary's reading plan: names by a line scan, rows first, and logs only when they can
    matter; a big log sampled (its head and tail); no following of the run's files (one look at a
    run just found), the process check from the listing's one sweep of the process table."""

    follow = False
    orphans = False     # (pids read from an old run's logs say nothing about this machine now)

    def __init__(self, layout: RunLayout, sweep: Optional[ProcessSweep] = None):
        self.phase = ALL
        self.sampled = False              # a log was read in part (its head and tail)
        self.named: frozenset = frozenset()    # servers Gym listed all at once (`0 / N servers ready ...: [...]`)
        self.skipped: set[Path] = set()   # files left unread
        self.peeked: dict[Path, tuple] = {}    # streams looked at, not read: their (first, last) stamps
        self.sweep = sweep
        self._wants: dict[Path, bool] = {}
        self._streams = {s.path: s for s in layout.streams}
        self._rows = {layout.rollouts, layout.materialized, layout.failures, layout.health_verdicts} - {None}

    def info(self, layout: RunLayout) -> RunInfo:
        return config.read_names(layout.hydra_dirs, layout.bundle_meta, layout.manifest)

    def liveness(self, layout: RunLayout) -> procs.Liveness:
        if layout.manifest:
            return procs.from_manifest(layout.manifest)
        self.sweep = self.sweep or ProcessSweep()
        return self.sweep.liveness(needles(layout))

    def wants(self, session: Session, path: Path, server: str) -> bool:
        want = True
        if self.phase != ALL:
            if server:
                want = False       # a server's own log: not needed when the rows decide
            else:
                want = self._wants.get(path)         # type: ignore[assignment]
                if want is None:
                    want = self._wants[path] = self._first_wants(session, path)
        if not want:
            self.skipped.add(path)
        return want

    def _first_wants(self, session: Session, path: Path) -> bool:
        if path in self._rows:
            return True
        stream = self._streams.get(path)
        if stream is None:
            return False
        if stream.role not in (EVAL, BOTH):
            if session.server_logs():
                return False
            # no per-server logs: the servers are only here. Gym's first `0 / N servers ready.
            # Waiting for servers to spin up: [...]` lists them all (the reducer takes its servers
            # from that line too); without one, read up to where Gym has named them (ReadyCut)
            names, times = _gym_listed(path)
            if names is None:
                return True
            self.named = self.named | names
            self.peeked[path] = times
            return False
        if stream.role == BOTH and not session.server_logs():
            return True
        # the collector's lines matter to the verdict only where they name trials ([rollout_collection]
        # /run failed, rollout dropped from the score): a file without one is left unread
        mentions, times = _peek(path, b"[rollout_")
        if not mentions:
            self.peeked[path] = times
        return mentions

    def reader(self, session: Session, path: Path, server: str) -> Optional[Reader]:
        if path in self._rows or server and session.layout.log_offsets.get(server):
            return None
        big = session.size(path) > HEAD + TAIL
        if big:
            self.sampled = True
        t = HeadTail(str(path)) if big else Tailer(str(path))
        stream = self._streams.get(path)
        if self.phase == FIRST and stream is not None and stream.role not in (EVAL, BOTH):
            return ReadyCut(t, self, session)
        return t

    def read(self, session: RunSession) -> bool:
        """Rows and the collector's output first; everything else only if they do not decide the
        verdict. True: every log was read (the server column's failed count is known)."""
        agg = session.layout.aggregate
        if agg is not None and session.is_file(agg):      # else the rows cannot decide: read all at once
            self.phase = FIRST
            session.poll(final=True)
            state = session.state
            if state.aggregate_written and state.collector.started:
                return False     # verdict and counts follow from rows + collector lines (verdict.verdict)
        self.phase = ALL
        self.skipped = set()
        session.poll(final=True)
        return True

    def skipped_stamps(self, session: RunSession) -> list[tuple[Optional[float], Optional[float]]]:
        """First and last stamps of the logs left unread, or read only up to all servers ready:
        Gym's captured output, which holds every server's output too (`tee`); the servers' own logs
        when there is none."""
        skipped = self.skipped | {p for p, t in session.tailers.items() if isinstance(t, ReadyCut) and t.cut}
        paths = sorted(p for p in skipped if p in self._streams) or sorted(skipped)
        return [self.peeked[p] if p in self.peeked else stamps.scan_file(p) for p in paths]


def _peek(path: Path, needle: bytes, chunk: int = 1 << 20) -> tuple[bool, tuple]:
    """Does the file hold `needle` (a substring search, no line splitting)? And, if not, its first
    and last stamps (from the same read when it is small)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            data = read_fd(fd, os.fstat(fd).st_size, chunk)
            if len(data) < chunk:
                if needle in data:
                    return True, (None, None)
                return False, stamps.scan_lines(data.splitlines())
            while data:
                if needle in data:
                    return True, (None, None)
                more = os.read(fd, chunk)
                data = data[-len(needle):] + more if more else b""
        finally:
            os.close(fd)
    except OSError:
        return True, (None, None)             # let the tailer report why it cannot be read
    return False, stamps.scan_file(path)


_LISTED = b" servers ready. Waiting for servers to spin up: ["


def _gym_listed(path: Path, limit: int = 1 << 20) -> tuple[Optional[frozenset], tuple]:
    """The servers of Gym's first `0 / N servers ready. Waiting for servers to spin up: [...]`
    line in a file (None: no such line in its first `limit` bytes, or it does not list all N),
    and the file's first and last stamps."""
    try:
        data = read_head(path, limit)
        whole = len(data) < limit
    except OSError:
        return None, (None, None)
    times = stamps.scan_lines(data.splitlines()) if whole else stamps.scan_file(path)
    i = data.find(_LISTED)
    if i < 0:
        return None, times
    start = max(data.rfind(b"\n", 0, i), data.rfind(b"\r", 0, i)) + 1
    end = data.find(b"\n", i)
    line = data[start:end if end >= 0 else len(data)].decode("utf-8", "replace")
    found = gl.parse_pending(line)
    if found is None:
        return None, times
    ready, total, names = found
    if ready != 0 or len(set(names)) != total:
        return None, times
    return frozenset(names), times


def needles(lay: RunLayout) -> list[str]:
    return procs.needles_for(lay.root, lay.rollouts, lay.logs_dir)


def summarize(path: str | os.PathLike, layout: RunLayout, sig: list, sweep: Optional[ProcessSweep] = None,
              check_processes: bool = True, listed: Optional[Listings] = None) -> dict[str, Any]:
    """The list's facts about one run. Never raises: a broken run is listed as an error. `listed`:
    the listings `layout` and `sig` were made from: the summary takes the run's files as they say
    (it goes with its signature, and makes ~10 stat calls fewer)."""
    out: dict[str, Any] = {"path": str(path), "kind": layout.kind, "started": None, "ended": None,
                           "duration": None, "started_from": None, "ended_from": None}
    file_times = [m / 1e9 for _, _, m in sig if m]
    try:
        plan = SummaryPlan(layout, sweep)
        session = RunSession(layout, check_processes=check_processes, plan=plan, listed=listed)
        logs_read = plan.read(session)
    except Exception as exc:  # noqa: BLE001 - one bad run must not stop the listing
        out.update(_times_only(layout, file_times))
        out.update(verdict=ERROR, reason=f"{type(exc).__name__}: {exc}", liveness=None)
        return out
    state = session.state
    v = verdict(state)
    logs = session.server_logs()
    names = {gl.log_stem(n) for n in state.servers} | set(logs)
    if logs_read or not logs:
        names = set(state.servers) | plan.named      # every server the report knows, by its name
    try:
        more = plan.skipped_stamps(session)
        times = stamps.run_times(state, layout, more, file_times).to_json()
    except Exception:  # noqa: BLE001 - times are a detail; the verdict stands without them
        times = {}
    out.update(times)
    out.update(
        environment=state.info.environment or None, agent=state.info.agent or None,
        model=state.info.model or None, servers=len(names),
        servers_failed=sum(1 for s in state.servers.values() if s.state == FAILED) if logs_read else None,
        trials=counts(state), expected=state.expected_total, mean_reward=mean_reward(state),
        verdict=v.name, reason=v.reason, exit_code=v.exit_code, logs_read=logs_read, sampled=plan.sampled,
        liveness=liveness_record(state, layout))
    session.close()
    return out


def _times_only(layout: RunLayout, file_times: list[float]) -> dict[str, Any]:
    try:
        return stamps.run_times(RunState(root=str(layout.root)), layout, (), file_times).to_json()
    except Exception:  # noqa: BLE001
        return {}


def ended_by_content(state: RunState) -> bool:
    """The verdict cannot change with processes or time: the collection finished, or gym env start
    said it ended before any collection."""
    c, p = state.collector, state.parent
    if c.finished or state.aggregate_written:
        return True
    return not c.started and bool(p.finished or p.died or p.timeout or p.traceback)


def liveness_record(state: RunState, layout: RunLayout) -> Optional[dict[str, Any]]:
    """What a liveness-dependent verdict was judged on, for runs.py to check a cached summary
    against; None when the verdict does not depend on it."""
    if ended_by_content(state):
        return None
    seen = bool(state.parent.alive or state.collector.alive)
    last = state.activity.last_write
    return {"seen": seen, "quiet": quiet(seen, last), "last_write": last,
            "needles": needles(layout), "manifest": bool(layout.manifest)}


def quiet(seen: bool, last_write: Optional[float], now: Optional[float] = None) -> bool:
    """No process seen and no write for SILENCE seconds (core.model.Activity.quiet)."""
    if seen or last_write is None:
        return False
    return (time.time() if now is None else now) - last_write >= SILENCE


def still_true(summary: dict[str, Any], sweep: ProcessSweep, now: Optional[float] = None) -> bool:
    """Is a cached summary's liveness what it was? (False: make it again.)"""
    rec = summary.get("liveness")
    if not rec:
        return True
    if rec.get("manifest"):
        return False                  # a launched run that has not ended: its pids are cheap to ask
    live = sweep.liveness(rec.get("needles") or [])
    seen = bool(live.parent or live.collector)
    return seen == rec.get("seen") and quiet(seen, rec.get("last_write"), now) == rec.get("quiet")
