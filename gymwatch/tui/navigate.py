"""Going from a row to its evidence: logs, failure lines, the trial card, `]`/`[` over failures,
`}`/`{` through a trial's cause chain.

A `Navigator` is given what it works on (the run, the three panes) and what it may ask of the
screen (a notice, a screen pushed, which pane has the focus); the screen calls it for its keys
and for what its widgets ask for. It reads the state under the run's lock (a poll may be writing
it in another thread) and never reads a run file itself: the log pane does.
"""

from __future__ import annotations

import json
from typing import Callable, Optional, Union

from rich.text import Text
from textual.dom import DOMNode
from textual.markup import escape
from textual.screen import Screen
from textual.widget import Widget

from ..core import attribution, card
from ..core.model import FAILED, SRC_FAILURE_ROW, T_FAILED, T_MISSING, T_NEVER_RAN, Evidence, Server, Trial, TrialKey
from ..core.verdict import verdict
from .board import ReadinessBoard
from .card import AroundIt, TrialCard
from .live import LiveRun
from .logpane import LogPane
from .logscreens import LineScreen
from .trials import ALL, TrialsTable

PROBLEMS = (T_FAILED, T_NEVER_RAN, T_MISSING)
SERVER, TRIAL = "server", "trial"       # the kinds of failure `]` / `[` step through


class Navigator:
    def __init__(self, live: LiveRun, board: ReadinessBoard, trials: TrialsTable, pane: LogPane, *,
                 notify: Callable[..., None], push_screen: Callable[..., object],
                 focused_pane: Callable[[], Optional[Widget]]) -> None:
        self.live, self.board, self.trials, self.pane = live, board, trials, pane
        self.notify, self.push_screen, self.focused_pane = notify, push_screen, focused_pane
        self.failure_index = -1                  # the failure `]` / `[` went to last
        self.cause_of: Optional[TrialKey] = None  # the trial whose cause chain `}` / `{` step through
        self.cause_index = -1

    # --- opening evidence and logs -----------------------------------------------------------
    def open_evidence(self, ev: Optional[Evidence]) -> None:
        if ev is None:
            self.notify("no evidence line for this one yet", severity="warning")
            return
        if asked_for(ev):       # no file of the run: its line shown whole, over the screen
            self.push_screen(LineScreen(ev.where() + (f" ({ev.note})" if ev.note else ""), ev.text))
            return
        self.pane.show(self.live.path_of(ev.file), ev.file, ev.line)

    def open_server_log(self, name: str, force: bool = False) -> None:
        """Show a server's log, following. `force`: even if that file is open at an evidence line."""
        state = self.live.state
        s = state.servers.get(name) if state else None
        if s is None:
            return
        own = s.log_file or self.live.server_log(name)
        rel = own or next((e.file for e in (s.last_line_at, s.failure, s.ready_evidence) if e), None)
        if rel is None:
            self.pane.border_title = f"Log: {escape(name)} (no output yet)"
            return
        only = "" if own else f"({name}) "     # a merged log: just this server's lines
        streams = [] if own else self.live.gym_streams(rel)
        if len(streams) > 1:                   # its prints on Gym's stdout, its log lines on stderr
            if self.pane.rel != name or self.pane.only != only or force:
                self.pane.show_merged(streams, only=only, title=name)
            return
        if rel != self.pane.rel or only != self.pane.only or (force and self.pane.line is not None):
            self.pane.show(self.live.path_of(rel), rel, only=only)
        self.pane.border_title = f"Log: {escape(name)}"

    def open_all_logs(self) -> None:
        """Every server's own log merged into one view (label and colour per server); where
        the servers' output is only in Gym's captured output, that output (already merged)."""
        sources, hints = self.live.all_logs()
        if not sources:
            self.notify("no server output yet", markup=False)
            return
        self.pane.show_merged(sources, hints=hints)

    def open_around(self, around: AroundIt) -> None:
        """Every server's log merged (in the order Gym received the lines), at the trial's line:
        what each server was doing around it. The highlighted line, else the first of the trial's
        lines among those logs; else the first in Gym's captured output (the collector's), shown
        merged with them."""
        if self.live.session is None:
            return
        sources, hints = self.live.all_logs()
        rels = [rel for _, _, rel in sources]
        lines = [ev for ev in [around.picked, *around.lines] if ev is not None]
        target = next((ev for ev in lines if ev.file in rels), None)
        if target is None:
            streams = self.live.stream_paths()
            target = next((ev for ev in lines if ev.file in streams), None)
            if target is not None:
                sources.append((streams[target.file].name, streams[target.file], target.file))
                rels.append(target.file)
        if target is None:
            self.notify("no line of this trial is in the servers' output: nothing to show around it",
                        markup=False)
            return
        self.pane.show_merged(sources, hints=hints)
        self.pane.view.follow = False          # stay at the trial's line, not the end
        self.pane.view.goto_line(target.line, source=rels.index(target.file))
        self.pane.border_title = Text(f"Logs: all servers, around {target.where()}")

    def open_trial_card(self, t: Trial) -> None:
        """A trial's card; what the card hands back (a line) is opened."""
        state = self.live.state
        if state is None:
            return
        row = card.read_row(state.root, t.evidence) if t.evidence is not None and t.source >= SRC_FAILURE_ROW else None
        with self.live.lock:
            shown = card.build(state, t, row)

        def chosen(ev: Union[Evidence, AroundIt, None]) -> None:
            if ev is None:
                return
            if isinstance(ev, AroundIt):
                self.open_around(ev)
                return
            self.open_evidence(ev)
            if ev is shown.row and row is not None:      # `r`: the row itself, whole and indented
                text = json.dumps(row, indent=2, ensure_ascii=False)
                self.push_screen(LineScreen(f"{ev.where()}: the raw row (escape: the log pane, at it)", text))

        self.push_screen(TrialCard(shown), callback=chosen)

    def open_trial_cause(self, t: Trial) -> None:
        """`l` on a trial: the log line where its cause is (the agent's log for a never-ran)."""
        with self.live.lock:
            state = self.live.state
            cause = attribution.trial_cause(state, t) if state is not None else None
        if cause is None:
            self.notify("nothing known beyond its own row" if t.evidence else "no evidence yet")
            return
        self.open_evidence(cause)

    def open_server_evidence(self, s: Server) -> None:
        """Enter on a server: its failure line, else its last error line, else its log."""
        ev = s.failure if s.state == FAILED else (s.errors[-1] if s.errors else None)
        if ev is not None:
            self.open_evidence(ev)
            self.pane.border_title = f"Log: {escape(s.name)}"
        else:
            self.open_server_log(s.name)

    def verdict_evidence(self) -> None:
        """`!`: the line the verdict rests on."""
        state = self.live.state
        if state is not None:
            with self.live.lock:
                ev = verdict(state).evidence
            self.open_evidence(ev)

    # --- stepping through a trial's cause chain ----------------------------------------------
    def step_cause(self, step: int) -> None:
        """`}` / `{`: the next / previous line that explains the trial under the cursor."""
        state, t = self.live.state, self.trials.trial_at_cursor()
        with self.live.lock:
            chain = attribution.cause_chain(state, t) if state is not None and t is not None else []
        if not chain or t is None:
            self.notify("no lines explain this trial (pick a failed, never-ran or missing one)")
            return
        if self.cause_of != t.key:
            self.cause_of, self.cause_index = t.key, -1 if step > 0 else len(chain)
        self.cause_index = (self.cause_index + step) % len(chain)
        ev = chain[self.cause_index]
        self.open_evidence(ev)
        self.notify(f"line {self.cause_index + 1} of {len(chain)}: {ev.where()}", markup=False, timeout=2)

    # --- failures ----------------------------------------------------------------------------
    def failures(self) -> list[tuple[str, Union[str, TrialKey]]]:
        """Failed servers, then failed, never-ran and missing trials by (task, rollout, attempt)."""
        state = self.live.state
        if state is None:
            return []
        with self.live.lock:
            out: list[tuple[str, Union[str, TrialKey]]] = [(SERVER, s.name) for s in state.servers.values() if s.state == FAILED]
            trials = sorted((t for t in state.trials.values() if t.status in PROBLEMS), key=lambda t: (
                t.task_index, t.rollout_index, -1 if t.attempt_index is None else t.attempt_index))
        out += [(TRIAL, t.key) for t in trials]
        return out

    def _at_failure(self, items: list[tuple[str, Union[str, TrialKey]]]) -> int:
        """Where `]` / `[` go on from: the failure under the focused pane's cursor (a trial the
        screen put the cursor on, one the user moved to), else the last one they went to."""
        pane = self.focused_pane()
        here: Optional[tuple[str, Union[str, TrialKey]]] = None
        at_cursor = self.trials.trial_at_cursor()
        if pane is self.trials and at_cursor is not None:
            here = (TRIAL, at_cursor.key)
        elif pane is self.board and (name := self.board.server_at_cursor()):
            here = (SERVER, name)
        return items.index(here) if here in items else self.failure_index

    def go_failure(self, step: int) -> None:
        """`]` / `[`: the next / previous failure, its row selected and its line in the log pane."""
        items = self.failures()
        if not items:
            self.notify("no failures so far")
            return
        self.failure_index = self._at_failure(items)
        wrapped = not 0 <= self.failure_index + step < len(items) and self.failure_index != -1
        self.failure_index = (self.failure_index + step) % len(items)
        kind, ref = items[self.failure_index]
        where = "wrapped to " if wrapped else ""
        self.notify(f"{where}failure {self.failure_index + 1} of {len(items)}: "
                    f"{ref if kind == SERVER else f'task {ref[0]} rollout {ref[1]}'}", markup=False, timeout=2)
        state = self.live.state
        assert state is not None            # failures() found these in it
        if isinstance(ref, str):            # SERVER: a server's name (a trial's ref is its key)
            self.board.select(ref)
            self.board.focus()
            self.open_server_evidence(state.servers[ref])
        else:
            if not self.trials.select(ref):
                self.trials.set_filter(ALL)
                self.trials.select(ref)
            self.trials.focus()
            t = state.trials[ref]
            with self.live.lock:
                ev = t.evidence or attribution.trial_cause(state, t)
            self.open_evidence(ev)


def asked_for(ev: Evidence) -> bool:
    """Evidence that is no file of the run but an answer gymwatch asked for: its file is the URL
    asked (Ray's dashboard, `--ray`)."""
    return "://" in ev.file


def focused_pane(screen: Screen, panes: tuple[Widget, ...]) -> Optional[Widget]:
    """The one of `panes` holding the focus on `screen` (None while another screen is on top)."""
    node: Optional[DOMNode] = screen.focused if screen.app.screen is screen else None
    while isinstance(node, Widget):
        if node in panes:
            return node
        node = node.parent
    return None
