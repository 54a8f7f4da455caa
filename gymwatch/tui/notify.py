"""Telling a person in another window that the run changed stage.

A 20-minute cold start is watched from elsewhere: when the run reaches a stage that matters (all
servers ready, startup failed, the first never-ran trial, the collection stalled or its results
came again, the collection aborted, the run finished) the screen rings the terminal bell, asks the terminal for a desktop notification
(OSC 9, understood by iTerm2, WezTerm, kitty, ghostty, Windows Terminal; OSC 777, by foot,
rxvt-unicode, VTE terminals, WezTerm, ghostty; inside tmux both are wrapped for passthrough) and
shows a Textual toast. Only stages reached while watching ring: attaching to a finished run is
silent. `--no-notify` turns it off.

The notification text comes from the run (server names, reasons quoting log lines): it is
stripped of every control character before it goes into an escape sequence, so a log line can
never end the sequence early or start one of its own.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable, Optional

from ..core import pace
from ..core.model import (
    FAILED,
    STALL_RECOVERED,
    T_NEVER_RAN,
    V_COLLECTING,
    V_COLLECTION_ABORTED,
    V_INCOMPLETE,
    V_NO_AGENT_RAN,
    V_OK,
    V_QUEUED,
    V_SOME_FAILED,
    V_SOME_NEVER_RAN,
    V_STARTING,
    V_STARTUP_FAILED,
    RunState,
    ongoing_stall,
)
from ..core.sanitize import clean
from ..core.verdict import Verdict

LIVE = (V_QUEUED, V_STARTING, V_COLLECTING)
FINAL = (V_OK, V_SOME_FAILED, V_SOME_NEVER_RAN, V_NO_AGENT_RAN, V_INCOMPLETE)
TEXT_MAX = 180                 # characters of a desktop notification's body
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
EACH_TIME = ("stalled", "recovered")    # stages a run can reach again: each stall rings
HEADLINES = {V_OK: "finished OK", V_SOME_FAILED: "finished: some trials failed",
             V_SOME_NEVER_RAN: "finished: some trials never ran", V_NO_AGENT_RAN: "finished: no agent ran",
             V_INCOMPLETE: "finished incomplete"}


@dataclass(frozen=True)
class Snapshot:
    """What of a run's state the stages are judged from."""

    verdict: str
    servers: int
    ready: int
    failed: int
    never_ran: int
    stalls: int = 0         # stalls the run has had
    stalled: bool = False   # ... and it is in one now


@dataclass(frozen=True)
class Event:
    stage: str          # all_ready / startup_failed / first_never_ran / stalled / recovered /
                        # collection_aborted / finished
    text: str           # one line, from the run: sanitize before it goes anywhere
    bad: bool           # a failure (an error toast), or good news


def snapshot(state: Optional[RunState], v: Optional[Verdict]) -> Optional[Snapshot]:
    if state is None or v is None:
        return None
    servers = state.servers.values()
    return Snapshot(v.name, len(state.servers), sum(1 for s in servers if s.became_ready),
                    sum(1 for s in servers if s.state == FAILED),
                    sum(1 for t in state.trials.values() if t.status == T_NEVER_RAN),
                    len(state.stalls), ongoing_stall(state) is not None)


def all_ready(s: Snapshot) -> bool:
    return s.servers > 0 and s.ready == s.servers


def stage_events(before: Snapshot, after: Snapshot, state: RunState, v: Verdict) -> list[Event]:
    """The stages reached between two looks at a run, in the order they happened."""
    out: list[Event] = []
    if all_ready(after) and not all_ready(before):
        out.append(Event("all_ready", f"all {after.servers} servers ready", False))
    if after.never_ran and not before.never_ran:
        first = min(t.key for t in state.trials.values() if t.status == T_NEVER_RAN)
        out.append(Event("first_never_ran", f"first never-ran trial: task {first[0]} rollout {first[1]}"
                         " (the model was never called)", True))
    if after.stalled and (not before.stalled or after.stalls > before.stalls):
        out.append(Event("stalled", v.reason, True))
    elif before.stalled and not after.stalled and state.stalls and state.stalls[-1].how == STALL_RECOVERED:
        out.append(Event("recovered", f"results again: {pace.note(state.stalls[-1])}", False))
    if after.verdict != before.verdict:
        if after.verdict == V_STARTUP_FAILED:
            out.append(Event("startup_failed", f"startup failed: {v.reason}", True))
        elif after.verdict == V_COLLECTION_ABORTED:
            out.append(Event("collection_aborted", f"collection aborted: {v.reason}", True))
        elif after.verdict in FINAL and before.verdict in LIVE:
            out.append(Event("finished", f"{HEADLINES[after.verdict]}: {v.reason}", after.verdict != V_OK))
    return out


def osc_text(text: str, limit: int = TEXT_MAX) -> str:
    """Text safe inside an OSC sequence: escapes and every control character gone (BEL and ST
    would end the sequence), one line, bounded."""
    s = " ".join(_CONTROLS.sub(" ", clean(text)).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def sequences(title: str, text: str, tmux: bool = False) -> str:
    """The bell, OSC 9 and OSC 777 for one notification (wrapped for tmux's passthrough)."""
    body = osc_text(text)
    head = osc_text(title, 60).replace(";", ",")
    seqs = [f"\x1b]9;{head}: {body}\x07", f"\x1b]777;notify;{head};{body.replace(';', ',')}\x07"]
    if tmux:     # tmux >= 3.3 passes these on with `set -g allow-passthrough on`
        seqs = ["\x1bPtmux;" + s.replace("\x1b", "\x1b\x1b") + "\x1b\\" for s in seqs]
    return "\a" + "".join(seqs)


class StageNotifier:
    """Watches the run through the app's summary updates; rings on each new stage.

    `emit` writes raw escape sequences to the terminal (the app's driver by default; tests pass
    a list's append). The app's own toast for a verdict turning bad stays the app's: this one
    toasts the good news and the first never-ran trial, and rings for all of them."""

    TOASTS = ("all_ready", "first_never_ran", "finished", "stalled", "recovered")

    def __init__(self, app, enabled: bool = True, emit: Optional[Callable[[str], None]] = None) -> None:
        self.app = app
        self.enabled = enabled
        self._emit = emit
        self._last: Optional[Snapshot] = None
        self.fired: list[Event] = []
        self.reached: set[str] = set()     # stages reached this session, rung or not

    def observe(self, state: Optional[RunState], v: Optional[Verdict]) -> list[Event]:
        now = snapshot(state, v)
        if now is None:
            return []
        before, self._last = self._last, now
        if before is None or before == now or state is None or v is None:
            return []
        events = [ev for ev in stage_events(before, now, state, v)
                  if ev.stage not in self.reached or ev.stage in EACH_TIME]
        self.reached.update(ev.stage for ev in events)      # each stage rings once a session
        if self.enabled:
            for ev in events:
                self.fire(ev)
        return events

    def fire(self, ev: Event) -> None:
        self.fired.append(ev)
        name = os.path.basename(str(self.app.live.root)) or "run"
        self.write(sequences(f"gymwatch {name}", ev.text, tmux=bool(os.environ.get("TMUX"))))
        if ev.stage in self.TOASTS and not (ev.stage == "finished" and ev.bad):
            self.app.notify(osc_text(ev.text, 300), title=f"gymwatch: {ev.stage.replace('_', ' ')}",
                            severity="warning" if ev.bad else "information", timeout=10, markup=False)

    def write(self, data: str) -> None:
        if self._emit is not None:
            self._emit(data)
            return
        driver = getattr(self.app, "_driver", None)
        if driver is not None and not self.app.is_headless:
            driver.write(data)
