"""The startup timeline: each server's startup steps on one time axis (a shared venv's setup-lock
wait, the venv's creation, uv's install, its own start, ready; or failed / stopped where it ended),
and the critical path: the server everything waited for.

A step's time is when gymwatch saw the line that began it (`Server.steps`, the run's clock): a run
watched while it started has them; one read after the fact does not (Gym's server lines carry no
timestamps), and its timeline is untimed: the steps are known, not when.

The critical server: when every server became ready, the last one to (Gym waited for it to say
`All N / N servers ready`); else the first one that failed (Gym gives up on its startup then); while
servers are still starting, none yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .model import S_FAILED, S_INSTALL, S_LOCK, S_READY, S_STOPPED, RunState, Server
from .servers import same_venv

ENDS = (S_READY, S_FAILED, S_STOPPED)     # a step that ends a server's startup
INSTANT = 1.0       # seconds: a step shorter than this was seen in one read with the next (uv's output
                    # comes in bursts, a poll reads a second's lines at once): it joins the step before


@dataclass(slots=True)
class Span:
    step: str
    start: float
    end: Optional[float]          # None: the server is in it still
    label: str = ""               # what the views show: the step, with uv's package count, and the
                                  # steps no time passed in (seen in one read) joined on: `venv create
                                  # + install 161 packages` (uv's output comes in bursts)

    def length(self, now: float) -> float:
        return (self.end if self.end is not None else now) - self.start


@dataclass(slots=True)
class Lane:
    """One server's row of the timeline."""

    name: str
    spans: list[Span] = field(default_factory=list)
    outcome: str = ""             # S_READY / S_FAILED / S_STOPPED, or '' (still starting)
    ended: Optional[float] = None     # when it reached that outcome
    untimed: list[str] = field(default_factory=list)   # steps it took before its first timed one
    critical: bool = False
    waited_for: list[str] = field(default_factory=list)   # the servers its setup-lock wait was on


@dataclass(slots=True)
class Startup:
    lanes: list[Lane]
    start: Optional[float]        # the first timed step (None: untimed)
    end: Optional[float]          # when the critical server ended its startup, or `now`
    critical: Optional[str]

    @property
    def timed(self) -> bool:
        return self.start is not None

    @property
    def took(self) -> Optional[float]:
        return self.end - self.start if self.start is not None and self.end is not None else None


def startup(state: RunState, now: Optional[float] = None) -> Startup:
    """Every server's startup lane; `now`: the end of the steps still going (default: the last
    time seen)."""
    lanes = [_lane(s) for s in state.servers.values()]
    times = [t for ln in lanes for t in [*(sp.start for sp in ln.spans), ln.ended] if t is not None]
    start = min(times, default=None)
    last = max(times, default=None)
    now = now if now is not None else (state.now if state.now is not None else last)
    for ln in lanes:
        if ln.spans and ln.spans[-1].end is None and now is not None and now < ln.spans[-1].start:
            now = ln.spans[-1].start
    critical = _critical(lanes)
    end = now
    if critical is not None:
        end = critical.ended
        critical.critical = True
        critical.waited_for = _lock_holders(state, state.servers[critical.name])
    return Startup(lanes, start, end if start is not None else None, critical.name if critical else None)


def _lane(s: Server) -> Lane:
    lane = Lane(s.name)
    spans: list[Span] = []
    for mark in s.steps:
        if spans and spans[-1].end is None:
            spans[-1].end = mark.at
        if mark.step in ENDS:
            lane.outcome, lane.ended = mark.step, mark.at
            break
        if mark.at is None:
            if not spans:
                lane.untimed.append(mark.step)
            continue
        spans.append(Span(mark.step, mark.at, None, _words(mark.step, s)))
    lane.spans = _joined(spans)
    return lane


def _joined(spans: list[Span]) -> list[Span]:
    """Spans shorter than INSTANT joined to the one before (`venv create + install 161 packages`);
    a first one dropped, the next starting where it did."""
    out: list[Span] = []
    start = None
    for sp in spans:
        if sp.end is not None and sp.end - sp.start < INSTANT:
            if out and out[-1].end == sp.start:
                out[-1].label += f" + {sp.label}"
                out[-1].end = sp.end
            elif not out and start is None:
                start = sp.start
            continue
        if start is not None and not out:
            sp.start = start
        out.append(sp)
    return out


def _words(step: str, s: Server) -> str:
    return f"install {s.packages} packages" if step == S_INSTALL and s.packages else step


def _critical(lanes: list[Lane]) -> Optional[Lane]:
    if not lanes:
        return None
    failed = [ln for ln in lanes if ln.outcome == S_FAILED and ln.ended is not None]
    if failed:
        return min(failed, key=lambda ln: ln.ended or 0.0)
    if all(ln.outcome == S_READY and ln.ended is not None for ln in lanes):
        return max(lanes, key=lambda ln: ln.ended or 0.0)
    return None


def _lock_holders(state: RunState, s: Server) -> list[str]:
    """The servers that set up the venv `s` waited on (Gym 0.7's shared venvs): those of its venv
    that did not wait on the lock themselves."""
    if not any(m.step == S_LOCK for m in s.steps):
        return []
    return sorted(o.name for o in state.servers.values() if o is not s and same_venv(o.venv, s.venv)
                  and not any(m.step == S_LOCK for m in o.steps))
