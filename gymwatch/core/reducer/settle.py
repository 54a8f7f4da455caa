"""What the whole state means, after every poll (idempotent): what Gym's parent said applied to
the servers (a death it named, its spin-up limit, its give-up, its shutdown), trials missing once
the collector has ended; and a re-read run's times kept (`carry_times`)."""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Optional

from .. import gymlines as gl, pace
from ..model import (
    EXITED,
    FAILED,
    K_RESOURCES,
    K_SERVICE,
    K_UNKNOWN,
    READY,
    STALL_ENDED,
    STALL_RECOVERED,
    T_MISSING,
    T_PENDING,
    Arrivals,
    Evidence,
    RunState,
    Server,
    Stall,
    StepMark,
    TrialKey,
    collector_ended,
    exited_with_run,
    ongoing_stall,
    parent_gave_up,
)
from ..servers import fail, hold, lift, set_state
from .writer import Part

LEFT_STARTING = "not up when gym env start ended: nothing waits for it any more"
STOPPED_STARTING = "stopped by Gym before it was ready"
EXITED_WITH_RUN = "exited with the run (Ctrl-C, or a signal)"


class Settle(Part):
    def settle(self, now: Optional[float] = None) -> None:
        """Apply what Gym's parent says about servers (a death it named, its spin-up timeout, its
        give-up, its shutdown), and mark trials missing once the collector has ended (pending
        again if it turns out not to have). Every change is reported like any other.

        What settle concludes of a server is held apart from what its lines made of it: each
        settle first takes the last one's conclusions back, and so does the server's next line
        (core/servers.py, `hold()` / `lift()`). The files are tailed separately, so Gym's words
        may be read before the server's own: the conclusions are always drawn from every line
        read so far, as one whole read would draw them."""
        st, p = self.state, self.state.parent
        before = {name: (s.state, s.phase, s.kind, s.state_since, s.steps[-1] if s.steps else None)
                  for name, s in st.servers.items()}
        for name, s in st.servers.items():
            lift(s, self.trackers[name])
        gyms = [s for s in st.servers.values() if s.kind != K_SERVICE]   # a job's service steps are the job's (jobs.py)
        env = st.servers.get(st.info.environment)
        if env is not None and env.kind == K_UNKNOWN:
            env.kind = K_RESOURCES
        if p.died_server and p.died_server in st.servers:
            s = st.servers[p.died_server]
            if exited_with_run(st, s):
                self._conclude(s, now, phase=EXITED_WITH_RUN, state=EXITED)
            else:
                self._conclude(s, now, f"Gym: {p.died.text.strip() if p.died else 'process died'}", told=p.died)
        if p.timeout is not None:
            for s in gyms:
                if not s.became_ready and s.state != FAILED:
                    self._conclude(s, now, timed_out_reason(st, s), timed_out=True)
        if parent_gave_up(st):
            for s in gyms:
                # Output ending at the install step is a death of its own (the 0.4-0.6 pipefail bug)
                # unless Gym stopped its servers, or was stopped itself: then that is where it was.
                if not (s.became_ready or s.state == FAILED) and (
                        s.failure is not None or self.trackers[s.name].ended_at_install and p.stopping is None
                        and p.interrupt is None):
                    self._conclude(s, now, "died during startup")
                elif not (s.became_ready or s.state in (FAILED, EXITED)):
                    if p.stopping is not None:
                        self._conclude(s, now, phase=STOPPED_STARTING, state=EXITED)
                    else:   # no death of its own: its process may still run, with nothing waiting for it
                        self._conclude(s, now, phase=LEFT_STARTING)
        if p.finished is not None:
            for s in gyms:
                if s.state == READY:
                    self._conclude(s, now, phase="stopped by Gym", state=EXITED)
        for name, s in st.servers.items():
            old = before.get(name)
            if old is not None and old[0] == s.state:
                s.state_since = old[3]      # the same conclusion drawn again: its time stays
                if old[4] is not None and s.steps and s.steps[-1].step == old[4].step:
                    s.steps[-1] = old[4]    # ... and so does its step's
        moved = {name for name, s in st.servers.items() if before.get(name, ())[:3] != (s.state, s.phase, s.kind)}
        self.changes.servers |= moved
        self.changes.trials |= self._settle_trials(collector_ended(st))
        self.changes.run |= bool(moved)
        self._stalls(now)

    def _stalls(self, now: Optional[float]) -> None:
        """When the collection was first seen started; a stall core/pace.py judges, kept while it
        lasts (its silence, what is in flight, where it waits), ended when results come again or
        the collection ends. A collection read only after it ended: the stall it ended in."""
        st, a = self.state, self.state.arrivals
        if st.collector.started and not a.start_seen:
            a.start_seen, a.started_at = True, now      # (None: it started before the first read)
        stall = ongoing_stall(st)
        if stall is not None and a.last is not None and a.last > stall.since:
            stall.end = stall.until = a.last
            stall.how = STALL_RECOVERED
            self.changes.run = True
            stall = None
        judged = pace.judge(st, now)
        if stall is not None:
            if judged is not None:
                stall.until, stall.in_flight = judged.now, judged.in_flight
                stall.waits = pace.waits(st, None if judged.files else judged.now)
            elif st.collector.started and not pace.collecting(st) and not st.reading:
                stall.until = now if now is not None and not stall.files else st.activity.checked_at
                stall.how = STALL_ENDED
                self.changes.run = True
        elif judged is not None and judged.stalled:
            st.stalls.append(Stall(judged.since, judged.limit, judged.scale, judged.in_flight,
                                   pace.waits(st, None if judged.files else judged.now),
                                   until=judged.now, files=judged.files))
            self.changes.run = True
        elif judged is None and not st.stalls:
            ended = pace.ended_stall(st)
            if ended is not None:
                ended.how = STALL_ENDED
                st.stalls.append(ended)
                self.changes.run = True

    def _conclude(self, s: Server, now: Optional[float], why: str = "", timed_out: bool = False,
                  phase: str = "", state: str = "", told: Optional[Evidence] = None) -> None:
        """One of settle's conclusions about a server: failed for `why`, else the new `phase` (and
        `state`). Held, so that it can be taken back."""
        tracker = self.trackers[s.name]
        hold(s, tracker)
        if why:
            fail(s, tracker, now, why, timed_out=timed_out, told=told)
        else:
            set_state(s, state or s.state, now, phase)

    def _settle_trials(self, ended: bool) -> set[TrialKey]:
        """Expected trials without a row are missing once the collector has ended; not while a file
        of rows could not be read (their rows may be in it)."""
        moved = set()
        ended = ended and not any(u.rows for u in self.state.unreadable.values())
        for t in self.state.trials.values():
            if t.status == T_PENDING and ended and t.expected:
                t.status = T_MISSING
                moved.add(t.key)
            elif t.status == T_MISSING and not ended:
                t.status = T_PENDING
                moved.add(t.key)
        return moved

    def carry_times(self, old: RunState) -> None:
        """The run's files were read again from the start into this reducer's new state: keep when
        each server was first seen, became ready and entered its state, and when Gym's waits began,
        as `old` had them (a re-read stamps those with the time of the re-read)."""
        new = self.state
        for name, s in new.servers.items():
            o = old.servers.get(name)
            if o is None:
                continue
            if o.first_seen is not None and (s.first_seen is None or o.first_seen < s.first_seen):
                s.first_seen = o.first_seen
            if o.ready_at is not None and s.ready_at is not None and o.ready_at < s.ready_at:
                s.ready_at = o.ready_at
            if o.last_line_at is not None and s.last_line_at is not None and \
                    (o.last_line_at.file, o.last_line_at.line) == (s.last_line_at.file, s.last_line_at.line):
                s.last_seen = o.last_seen       # the same last line: seen when it was, not at the re-read
            if o.state == s.state and o.state_since is not None and (s.state_since is None
                                                                    or o.state_since < s.state_since):
                s.state_since = o.state_since
            s.steps = _carried_steps(o.steps, s.steps)
        _carry_trial_arrivals(old, new)
        _carry_earliest(old.parent, new.parent, "spinup_at")
        _carry_earliest(old.parent.endpoints, new.parent.endpoints, "waiting_at")
        self._carry_pace(old)

    def _carry_pace(self, old: RunState) -> None:
        """When results came, and the stalls, as `old` saw them: the re-read brought every result
        again at once, and only those beyond what `old` had are new (arrived at the re-read)."""
        new = self.state
        if not old.arrivals.start_seen and not old.stalls:
            return
        o, n = old.arrivals, new.arrivals
        more, at = n.results - o.results, n.last
        new.arrivals = Arrivals(o.start_seen, o.started_at, o.first, deque(o.times, maxlen=o.times.maxlen),
                                o.results, o.untimed)
        if more > 0:
            new.arrivals.add(at, more)
        if not new.stalls:
            new.stalls = [replace(s, waits=list(s.waits)) for s in old.stalls]




def _carried_steps(old: list[StepMark], new: list[StepMark]) -> list[StepMark]:
    """A re-read server's steps: those it had, with the times it had (a whole read may miss one a
    live read saw, e.g. a lock wait named before its own lines), then the new ones after the last
    step both have."""
    j, last = 0, None
    for i, mark in enumerate(new):
        k = next((k for k in range(j, len(old)) if old[k].step == mark.step), None)
        if k is not None:
            j, last = k + 1, i
    return new if last is None else old[:j] + new[last + 1:]


def _carry_trial_arrivals(old: RunState, new: RunState) -> None:
    """A re-read trial's arrival: when its result was first seen, not the re-read."""
    olds = old.trials
    for key, t in new.trials.items():
        o = olds.get(key)
        if o is not None and o.arrived is not None and (t.arrived is None or o.arrived < t.arrived):
            t.arrived = o.arrived


def _carry_earliest(old: object, new: object, attr: str) -> None:
    o, n = getattr(old, attr), getattr(new, attr)
    if o is not None and (n is None or o < n):
        setattr(new, attr, o)



def timed_out_reason(state: RunState, s: Server) -> str:
    """A server Gym's spin-up limit ran out on: the limit, and what the server was doing."""
    m = gl.TIMEOUT_RE.search(state.parent.timeout.text) if state.parent.timeout else None
    limit = f"Gym's {m.group(1)}s spin-up limit" if m else "Gym's spin-up limit"
    doing = s.phase if s.phase and s.phase not in ("failed", "ready") else (
        "starting" if s.last_line else "silent: no output of its own")
    last = f"; its last line: {s.last_line.strip()}" if s.last_line.strip() else ""
    return f"not ready within {limit}; it was {doing}{last}"
