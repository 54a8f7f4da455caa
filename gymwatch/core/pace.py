"""A collection's pace and its stalls, judged from the model: when results arrived (rows, failure
rows, lines naming a failed trial, progress that moved: `RunState.arrivals`, recorded by the
reducer), the run's settings and its servers' last lines. Read-only: the reducer's settle records
what this judges (a stall, its end) in `RunState.stalls`.

The rule. A collection has stalled when no result came for FACTOR times the longest ordinary wait
for one so far (the first result's wait from the collection's start counts: it is one trial's
time), and for at least FLOOR seconds. Before the first result the scale is the time startup took
and Gym's own limits (its waits for servers and model endpoints). A wait longer than the rule
allowed at the time was a stall, not the run's pace: it does not raise the scale. Never a stall: a
collection not started, or ended (finished, stopped, dead, or its error printed), nothing in
flight, a screen still catching up with the files.

Times are the clock the results were seen by (the live screen's). Results already there at the
first read have no time: then the files' own times stand in (their last writes, on the wall
clock), so a one-shot read (`gymwatch report`) judges a live or a killed run from its files alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from . import gymversion
from .model import (
    EXITED,
    FAILED,
    K_AGENT,
    K_ENVIRONMENT,
    K_MODEL,
    K_RESOURCES,
    STALL_ENDED,
    STALL_RECOVERED,
    T_COMPLETED,
    T_FAILED,
    T_NEVER_RAN,
    RunState,
    ServerWait,
    Stall,
    collector_ended,
)

FLOOR = 60.0            # seconds: a shorter silence is never a stall
FACTOR = 3.0            # a stall is this many times the run's longest ordinary wait for a result
GYM_WAIT = 600.0        # Gym's default for its own waits (servers' spin-up, model endpoints)
WAITS_SHOWN = 2         # servers a stall's words name, nearest first (the report lists every one)
KIND_ORDER = {K_MODEL: 0, K_AGENT: 1, K_ENVIRONMENT: 2, K_RESOURCES: 3}   # where a trial waits, nearest first


@dataclass(frozen=True, slots=True)
class Pace:
    """The collection's pace at one moment."""

    since: float             # the last result (or the collection's start)
    now: float               # the moment judged
    limit: float             # silence longer than this is a stall
    scale: Optional[float]   # the longest ordinary wait for a result (None: no result yet)
    in_flight: Optional[int]
    files: bool              # judged from the files' times (no result was seen arriving)

    @property
    def silent(self) -> float:
        return max(0.0, self.now - self.since)

    @property
    def stalled(self) -> bool:
        return self.silent > self.limit


def judge(state: RunState, now: Optional[float]) -> Optional[Pace]:
    """The pace of a running collection at `now` (the clock results are seen by; None: a read of
    files already there, judged by their times); None when there is none to judge."""
    if not collecting(state):
        return None
    flying = in_flight(state)
    if flying == 0:
        return None
    a = state.arrivals
    since = a.last if a.last is not None else a.started_at
    if since is not None and now is not None:
        scale = usual_wait(state)
        return Pace(since, now, limit(state, scale), scale, flying, False)
    return _from_files(state, flying)


def collecting(state: RunState) -> bool:
    """The collector runs (as far as anything shows), and every file has been read to its end."""
    c = state.collector
    return (c.started and not state.reading and not collector_ended(state)
            and c.traceback is None and c.error is None)


def in_flight(state: RunState) -> Optional[int]:
    """Trials dispatched and not finished: Gym keeps its concurrency's worth in flight while any
    are left (all of them without a limit); None when neither is known."""
    left = None
    if state.expected_total is not None:
        done = sum(1 for t in state.trials.values() if t.status in (T_COMPLETED, T_FAILED, T_NEVER_RAN))
        left = max(0, state.expected_total - done)
    c = concurrency(state)
    if c is None:
        return left
    return c if left is None else min(c, left)


def concurrency(state: RunState) -> Optional[int]:
    """Gym's limit on trials in flight: the run's settings, else the collector's own line."""
    c = state.info.concurrency or state.collector.concurrency
    return c if c and c > 0 else None


def limit(state: RunState, scale: Optional[float]) -> float:
    """The silence after which a collection with this usual wait has stalled."""
    if scale is None:
        return first_limit(state)
    return max(FLOOR, FACTOR * scale)


def first_limit(state: RunState) -> float:
    """Before the first result: the time startup took, and Gym's own limits."""
    startup = startup_took(state)
    return max(FLOOR, FACTOR * startup if startup is not None else 0.0, gym_wait(state))


def startup_took(state: RunState) -> Optional[float]:
    """Seconds from the first server seen to the collection's start, when both were seen live."""
    start = state.arrivals.started_at
    seen = [s.first_seen for s in state.servers.values() if s.first_seen is not None]
    return start - min(seen) if start is not None and seen and start >= min(seen) else None


def gym_wait(state: RunState) -> float:
    """The longest of Gym's own waits this run has (its spin-up limit, its wait for the model
    endpoints), else Gym's default for them."""
    e = state.parent.endpoints
    known = [x for x in (e.limit, state.info.endpoint_limit, gymversion.spinup_limit(state)) if x and x > 0]
    return max(known, default=GYM_WAIT)


def usual_wait(state: RunState) -> Optional[float]:
    """The longest ordinary wait for a result among those seen arriving: the first result's from
    the collection's start, then between results, a wait that was a stall left out. With results
    from before the first read, their files' pace starts it."""
    a = state.arrivals
    longest = None
    if a.first is not None and a.started_at is not None:
        longest = a.first - a.started_at
    elif a.untimed:
        longest = history_wait(state)
    prev = None
    for t in a.times:
        if prev is not None:
            gap = t - prev
            if gap <= limit(state, longest):
                longest = gap if longest is None else max(longest, gap)
        prev = t
    return longest


def history_wait(state: RunState) -> Optional[float]:
    """A trial's time as the files tell it: from the collection's start (its inputs' write) to its
    last result, over the results; with a concurrency C, C such shares (at most the whole span)."""
    a = state.activity
    n = sum(1 for t in state.trials.values() if t.status in (T_COMPLETED, T_FAILED, T_NEVER_RAN))
    if not n or a.results_write is None or a.inputs_write is None or a.results_write <= a.inputs_write:
        return None
    span = a.results_write - a.inputs_write
    c = concurrency(state)
    return span if c is None else min(span, c * span / n)


def _from_files(state: RunState, flying: Optional[int]) -> Optional[Pace]:
    """A collection none of whose results was seen arriving: its files' last writes."""
    a = state.activity
    done = any(t.status in (T_COMPLETED, T_FAILED, T_NEVER_RAN) for t in state.trials.values())
    since = a.results_write if done else a.inputs_write
    if since is None or a.checked_at is None:
        return None
    scale = history_wait(state) if done else None
    return Pace(since, a.checked_at, limit(state, scale), scale, flying, True)


def ended_stall(state: RunState) -> Optional[Stall]:
    """A collection that ended without finishing (stopped, killed, dead), read after the fact: the
    stall it was in when it ended, as its files tell it (the silence from its last result to its
    own output's last write), if that silence was one."""
    c, a = state.collector, state.activity
    if not c.started or state.reading or c.finished or state.aggregate_written or not collector_ended(state):
        return None
    flying = in_flight(state)
    done = any(t.status in (T_COMPLETED, T_FAILED, T_NEVER_RAN) for t in state.trials.values())
    since = a.results_write if done else a.inputs_write
    if flying == 0 or since is None or a.collector_write is None:
        return None
    scale = history_wait(state) if done else None
    lim = limit(state, scale)
    if a.collector_write - since <= lim:
        return None
    return Stall(since, lim, scale, flying, waits(state, None, stopped=True), until=a.collector_write, files=True)


def waits(state: RunState, now: Optional[float], stopped: bool = False) -> list[ServerWait]:
    """Each running server's last line and its age at `now` (the clock lines are seen by; None:
    from its file's last write, on the wall clock), the model server first. `stopped`: after the
    collection ended, a server's last line before its own shutdown is not known: it is left out."""
    out = []
    writes, wall = state.activity.writes, state.activity.checked_at
    for s in sorted(state.servers.values(), key=lambda s: (KIND_ORDER.get(s.kind, 9), s.name)):
        if s.state in (FAILED, EXITED) and not stopped or stopped and s.shut_down is not None:
            continue
        line, age = s.last_line_at, None
        if now is not None and s.last_seen is not None:
            age = max(0.0, now - s.last_seen)
        elif not stopped and line is not None and wall is not None and line.file in writes:
            age = max(0.0, wall - writes[line.file])
        out.append(ServerWait(s.name, s.kind, line, s.last_line, age))
    return out


# --- words ----------------------------------------------------------------------------------------
def duration(seconds: Optional[float]) -> str:
    """`45s`, `1m15s`, `2h03m`."""
    s = max(0, int(round(seconds or 0)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def clock(t: float, seconds: bool = True) -> str:
    """A time of day on this machine's clock: `12:03:10` (`12:03`)."""
    return time.strftime("%H:%M:%S" if seconds else "%H:%M", time.localtime(t))


def note(stall: Stall) -> str:
    """`stalled 1m15s at 12:03, recovered`: a stall as the run keeps it. One read after the
    collection ended lasted at least until its output's last write."""
    how = {STALL_RECOVERED: "recovered", STALL_ENDED: "then the collection ended"}.get(stall.how, "still stalled")
    least = "at least " if stall.files and stall.how == STALL_ENDED else ""
    return f"stalled {least}{duration(stall.seconds)} at {clock(stall.since, seconds=False)}, {how}"


def wait_words(w: ServerWait, width: int = 100) -> str:
    """`policy_model (last line 1m10s ago: ...)`."""
    if w.line is None:
        return f"{w.name} (no line of its own yet)"
    text = " ".join(w.text.split())
    text = text if len(text) <= width else text[: width - 1] + "…"
    ago = f" {duration(w.age)} ago" if w.age is not None else ""
    return f"{w.name} (last line{ago}: {text})"


def stall_words(stall: Stall, records: str = "") -> str:
    """A stall that lasts, in one line: since when, against what pace, what is in flight and where
    it waits."""
    if stall.scale is None:
        basis = (f"before a first result a stall is {duration(stall.limit)} without one: the time "
                 "startup took, Gym's own limits")
    else:
        pace = (f"by its files a trial takes about {duration(stall.scale)}" if stall.files else
                f"this run's results came at most {duration(stall.scale)} apart")
        basis = f"{pace}; a stall is {duration(stall.limit)} without one"
    out = [f"stalled: no result for {duration(stall.seconds)}, since {clock(stall.since)} ({basis})"]
    if stall.in_flight is not None:
        out.append(f"{stall.in_flight} trial{'s' if stall.in_flight != 1 else ''} in flight")
    if stall.waits:        # names and ages: their lines are the board's (and the report's) to show
        shown = [w.name + (f" (last line {duration(w.age)} ago)" if w.age is not None else "")
                 for w in stall.waits[:WAITS_SHOWN]]
        more = len(stall.waits) - WAITS_SHOWN
        out.append("waiting on " + ", ".join(shown) + (f" (+{more} more)" if more > 0 else ""))
    if records:
        out.append(records)
    return "; ".join(out)
