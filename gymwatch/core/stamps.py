"""When a run started and ended, from what the run itself records; file times only as a last resort.

Sources, best first:
- an evaluator bundle's `metadata.json` (`started_at`, `finished_at`: ISO 8601 with a zone;
  `duration_sec`) and a launched run's manifest (`created`) and status files (`started`, `ended`):
  exact epoch times;
- timestamps at the start of log lines: Ray's `2026-12-01 06:36:06,330\tINFO worker.py:...`,
  Python logging as Hydra configures it `[2026-12-01 06:31:30,423][nemo_gym...][INFO] - ...`
  (captured streams and `hydra/*/global_config.log`), Ray's C++ lines
  `[2026-11-29 13:30:45,905 W 30925 30925] ...`, and Hydra's own `outputs/<YYYY-MM-DD>/<HH-MM-SS>/`
  run dir names;
- `response.created_at` of the first and last rows (epoch seconds, set by the model server);
- file modification times, only when nothing above says anything, and not when every file of the
  run carries (nearly) the same time: that is a copy (`cp -r`, `rsync -r`), not the run.

**Time zone.** Log lines and Hydra dir names carry no zone. They are read as the local time of the
machine that wrote them, and gymwatch assumes that machine's zone is the one it runs in itself
(`TZ`, else the system's): read a run written in another zone with `TZ=<its zone>`. An ISO time
with a zone (`Z`, `+02:00`) and epoch numbers are exact. When a run's response times contradict
its log stamps (a model call before Gym printed its first line: the zone assumption is wrong), the
log stamps are not used.

A bound nothing records is None (shown as `?`), never a guess.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from .tail import read_fd, read_head

# A line can start with a timestamp only if it starts with one of these (the reducer checks this
# one character before calling line_stamp, so untimed lines cost one set lookup).
STAMP_START = frozenset("[12")

_LINE_RE = re.compile(
    r"\[?((?:19|20|21)\d\d)-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?(?=[\s\]\[|,]|$)")
_HYDRA_DIR_RE = re.compile(r"(?:^|/)((?:19|20|21)\d\d)-(\d\d)-(\d\d)/(\d\d)-(\d\d)-(\d\d)(?:/|$)")
_RESPONSE_RE = re.compile(rb'"response"\s*:\s*\{')
_CREATED_RE = re.compile(rb'"created_at"\s*:\s*(\d{9,11}(?:\.\d+)?)[\s,}]')
MIN_EPOCH, MAX_EPOCH = 946_684_800.0, 4_102_444_800.0      # 2000-01-01 .. 2100-01-01
COPY_SPREAD = 2.0        # seconds: all of a run's files within this of each other = copied, not written
ZONE_SLACK = 60.0        # seconds a response may seem to precede the first log line (clock skew)
SCAN_BYTES = 8 << 10     # head and tail of a file looked at by scan_file

_hours: dict[tuple, float] = {}


def _local(y: int, mo: int, d: int, h: int) -> float:
    """Epoch of a local wall-clock hour (cached: a log has few distinct hours)."""
    key = (y, mo, d, h)
    base = _hours.get(key)
    if base is None:
        if len(_hours) > 4096:
            _hours.clear()
        base = _hours[key] = time.mktime((y, mo, d, h, 0, 0, 0, 0, -1))
    return base


def _epoch(y: str, mo: str, d: str, h: str, mi: str, s: str, frac: Optional[str] = None,
           zone: Optional[str] = None) -> Optional[float]:
    Y, M, D, H, MI, S = int(y), int(mo), int(d), int(h), int(mi), int(s)
    if not (1 <= M <= 12 and 1 <= D <= 31 and H <= 23 and MI <= 59 and S <= 60):
        return None
    f = int(frac) / 10 ** len(frac) if frac else 0.0
    if zone:
        if zone == "Z":
            off = 0
        else:
            z = zone.replace(":", "")
            off = (int(z[1:3]) * 3600 + int(z[3:5]) * 60) * (1 if z[0] == "+" else -1)
        try:
            base = _dt.datetime(Y, M, D, H, MI, tzinfo=_dt.timezone.utc).timestamp()
        except ValueError:
            return None
        return base - off + S + f
    try:
        return _local(Y, M, D, H) + MI * 60 + S + f
    except (OverflowError, ValueError):
        return None


def line_stamp(text: str) -> Optional[float]:
    """The epoch time a log line starts with, or None. Local time unless the stamp has a zone."""
    m = _LINE_RE.match(text)
    if m is None:
        return None
    return _epoch(*m.groups())


def hydra_dir_stamp(path: str | os.PathLike) -> Optional[float]:
    """Hydra's default run dir `outputs/2026-12-01/06-31-30` (or multirun's): when it started."""
    last = None
    for m in _HYDRA_DIR_RE.finditer(os.fspath(path).replace(os.sep, "/")):
        last = m
    return _epoch(*last.groups()) if last else None


def iso_stamp(value: object) -> Optional[float]:
    """An ISO 8601 string (a zone makes it exact; none: local time) or an epoch number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if MIN_EPOCH <= value <= MAX_EPOCH else None
    if not isinstance(value, str):
        return None
    return line_stamp(value.strip())


def scan_lines(lines: list[bytes]) -> tuple[Optional[float], Optional[float]]:
    """The stamps of the first and the last stamped lines (a file's lines are written in time order)."""
    first = _first_stamp(lines)
    return first, (_first_stamp(reversed(lines)) if first is not None else None)


def _first_stamp(lines: Iterable[bytes]) -> Optional[float]:
    for raw in lines:
        if raw[:1] in (b"[", b"1", b"2"):
            ts = line_stamp(raw[:48].decode("ascii", "replace"))
            if ts is not None:
                return ts
    return None


def scan_file(path: str | os.PathLike, budget: int = SCAN_BYTES) -> tuple[Optional[float], Optional[float]]:
    """First and last line stamps of a file, from its first and last `budget` bytes (a small file:
    all of it). For files a summary did not read."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size <= 2 * budget:
                return scan_lines(read_fd(fd, size).splitlines())
            head = read_fd(fd, size, budget).splitlines()[:-1]
            tail = os.pread(fd, budget, size - budget).splitlines()[1:]
        finally:
            os.close(fd)
    except OSError:
        return None, None
    a = scan_lines(head)
    b = scan_lines(tail)
    return _min(a[0], b[0]), _max(a[1], b[1])


def rows_span(path: Optional[Path]) -> tuple[Optional[float], Optional[float]]:
    """Response times of the first and last rows of a rows file (completion order)."""
    if path is None:
        return None, None
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                return None, None
            head = read_fd(fd, size, 64 << 10)
            first_line = _first_line(fd, size, head, 4 << 20)
            back = 64 << 10          # a row can be long: look further back until a line start
            while True:
                back = min(size, back)
                tail = (head if back == size == len(head) else os.pread(fd, back, size - back)).rstrip(b"\r\n")
                if b"\n" in tail or back >= size or back >= 4 << 20:
                    break
                back *= 4
        finally:
            os.close(fd)
    except OSError:
        return None, None
    last_line = tail[tail.rfind(b"\n") + 1:] if b"\n" in tail else tail
    first = _created(first_line)
    last = _created(last_line) if last_line.strip() else None
    return first, last if last is not None else first


def _first_line(fd: int, size: int, head: bytes, limit: int) -> bytes:
    """The file's first line, up to `limit` bytes (readline's), given its first bytes `head`."""
    end = head.find(b"\n")
    if end >= 0:
        return head[:end + 1]
    if len(head) >= min(size, limit):
        return head[:limit]
    head = os.pread(fd, min(size, limit), 0)
    end = head.find(b"\n")
    return head[:end + 1] if end >= 0 else head


def _created(line: bytes) -> Optional[float]:
    """`response.created_at` of a row, found without parsing the row (Gym writes `response` as
    one JSON object; the first `created_at` inside it is the response's own: its output items
    have none)."""
    r = _RESPONSE_RE.search(line)
    m = _CREATED_RE.search(line, r.end()) if r else None
    return iso_stamp(float(m.group(1))) if m else None


@dataclass(slots=True)
class RunTimes:
    started: Optional[float] = None
    ended: Optional[float] = None
    started_from: str = ""        # evaluator metadata / manifest / log lines / hydra dir / responses / file times
    ended_from: str = ""

    @property
    def duration(self) -> Optional[float]:
        if self.started is None or self.ended is None or self.ended < self.started:
            return None
        return self.ended - self.started

    def to_json(self) -> dict:
        return {"started": self.started, "ended": self.ended, "duration": self.duration,
                "started_from": self.started_from or None, "ended_from": self.ended_from or None}


def run_times(state, layout, more_stamps: Iterable[tuple[Optional[float], Optional[float]]] = (),
              file_times: Optional[list[float]] = None) -> RunTimes:
    """A run's start and end. `state`: its RunState (`first_stamp`/`last_stamp` of the lines the
    reducer read); `more_stamps`: (first, last) of files not read through the reducer;
    `file_times`: modification times of its files (the last resort)."""
    out = RunTimes()
    _recorded(out, layout, state)
    logs_first, logs_last = getattr(state, "first_stamp", None), getattr(state, "last_stamp", None)
    for a, b in more_stamps:
        logs_first, logs_last = _min(logs_first, a), _max(logs_last, b)
    hydra_first = hydra_last = None
    for d in getattr(layout, "hydra_dirs", ()) or ():
        hydra_first = _min(hydra_first, hydra_dir_stamp(d))
        if not layout.streams:     # Gym's logging lines, also on the captured stderr when there is one
            a, b = scan_file(Path(d) / "global_config.log")
            hydra_first, hydra_last = _min(hydra_first, a), _max(hydra_last, b)
    logs_first, logs_last = _min(logs_first, hydra_first), _max(logs_last, hydra_last)
    rows_first, rows_last = rows_span(layout.rollouts)    # failure rows carry no response
    if rows_first is not None and logs_first is not None and rows_first < logs_first - ZONE_SLACK:
        logs_first = logs_last = None          # log stamps read in the wrong zone: not used
    if out.started is None:
        if logs_first is not None:
            out.started, out.started_from = logs_first, "log lines"
        elif rows_first is not None:
            out.started, out.started_from = rows_first, "responses"
    if out.ended is None:
        ends = [(t, src) for t, src in ((logs_last, "log lines"), (rows_last, "responses")) if t is not None]
        if ends:
            out.ended, out.ended_from = max(ends)
    if file_times and (out.started is None or out.ended is None) and not copied(file_times):
        if out.started is None:
            out.started, out.started_from = min(file_times), "file times"
        if out.ended is None:
            out.ended, out.ended_from = max(file_times), "file times"
    if out.ended is not None and out.started is not None and (
            out.ended < out.started or out.ended == out.started and out.ended_from in ("log lines", "responses")):
        out.ended, out.ended_from = None, ""     # one recorded moment says when, not how long
    return out


def copied(file_times: list[float]) -> bool:
    """Every file of the run written within COPY_SPREAD seconds: a copy's times, not the run's."""
    return len(file_times) >= 3 and max(file_times) - min(file_times) < COPY_SPREAD


def _recorded(out: RunTimes, layout, state) -> None:
    """Times the run records outright: an evaluator bundle's metadata, a launched run's manifest."""
    meta = getattr(layout, "bundle_meta", None)
    if meta is not None:
        try:
            data = json.loads(read_head(meta).decode("utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            data = None
        if isinstance(data, dict):
            start = iso_stamp(data.get("started_at"))
            end = iso_stamp(data.get("finished_at"))
            dur = data.get("duration_sec")
            if end is None and start is not None and isinstance(dur, (int, float)) and not isinstance(dur, bool) \
                    and dur >= 0:
                end = start + float(dur)
            if start is not None:
                out.started, out.started_from = start, "evaluator metadata"
            if end is not None:
                out.ended, out.ended_from = end, "evaluator metadata"
    manifest = getattr(layout, "manifest", None)
    if isinstance(manifest, dict):
        start = iso_stamp(manifest.get("created"))
        if start is not None and out.started is None:
            out.started, out.started_from = start, "manifest"
        ends = []
        for proc in manifest.get("processes") or []:
            status = _status(proc.get("status_file")) if isinstance(proc, dict) else None
            ends.append(iso_stamp(status.get("ended")) if status else None)
        if ends and all(e is not None for e in ends) and out.ended is None:
            out.ended, out.ended_from = max(ends), "manifest"      # type: ignore[type-var]


def _status(path: object) -> Optional[dict]:
    if not isinstance(path, str):
        return None
    try:
        data = json.loads(read_head(path).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _min(*xs: Optional[float]) -> Optional[float]:
    vals = [x for x in xs if x is not None]
    return min(vals) if vals else None


def _max(*xs: Optional[float]) -> Optional[float]:
    vals = [x for x in xs if x is not None]
    return max(vals) if vals else None
