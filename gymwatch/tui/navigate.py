"""Going from a row to its evidence: logs, failure lines, the trial card, `]`/`[` over failures,
`}`/`{` through a trial's cause chain (a mixin of the app)."""

from __future__ import annotations

import json

from pathlib import Path
from typing import Optional, Union

from rich.text import Text
from textual.markup import escape

from ..core import attribution, card
from ..core.layout import BOTH, ENV
from ..core.model import FAILED, SRC_FAILURE_ROW, T_FAILED, T_MISSING, T_NEVER_RAN, Evidence, Server, Trial
from ..core.verdict import verdict
from .card import AroundIt, TrialCard
from .logscreens import LineScreen

PROBLEMS = (T_FAILED, T_NEVER_RAN, T_MISSING)


class EvidenceNav:
    """Needs from the app: live, board, trials, pane, notify, push_screen, focused_pane, _follow_board,
    _fail_idx, _cause_of, _cause_idx."""

    # --- opening evidence and logs -----------------------------------------------------------
    def open_evidence(self, ev: Optional[Evidence]) -> None:
        if ev is None:
            self.notify("no evidence line for this one yet", severity="warning")
            return
        self.pane.show(self._abs(ev.file), ev.file, ev.line)

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
        streams = [] if own else self._gym_streams(rel)
        if len(streams) > 1:                   # its prints on Gym's stdout, its log lines on stderr
            if self.pane.rel != name or self.pane.only != only or force:
                self.pane.show_merged(streams, only=only, title=name)
            return
        if rel != self.pane.rel or only != self.pane.only or (force and self.pane.line is not None):
            self.pane.show(self._abs(rel), rel, only=only)
        self.pane.border_title = f"Log: {escape(name)}"

    def _gym_streams(self, rel: str) -> list[tuple[str, Path, str]]:
        """Gym's captured stdout and stderr that `rel` is one of, as merged-view sources."""
        session = self.live.session
        if session is None:
            return []
        lay = session.layout
        mine = lay.gym_output()
        if rel not in {lay.rel(s.path) for s in mine}:
            return []
        return [(s.path.name.rsplit(".", 2)[-2] if s.path.name.count(".") >= 2 else s.path.name,
                 s.path, lay.rel(s.path)) for s in mine]

    def open_all_logs(self) -> None:
        """Every server's own log merged into one view (label and colour per server); where
        the servers' output is only in Gym's captured output, that output (already merged)."""
        sources, hints = self._all_logs()
        if not sources:
            self.notify("no server output yet", markup=False)
            return
        self.pane.show_merged(sources, hints=hints)

    def _all_logs(self) -> tuple[list[tuple[str, Path, str]], tuple[str, ...]]:
        """What the merged view of every server shows: (label, path, rel) each, and the order hint."""
        session = self.live.session
        if session is None:
            return [], ()
        lay = session.layout
        sources = [(name, path, lay.rel(path)) for name, path in sorted(lay.server_logs().items())]
        # every server also prints to Gym's stdout, in the order Gym got the lines: the order hint
        out = sorted(lay.gym_output((ENV, BOTH)), key=lambda s: s.stderr)
        if sources:
            return sources, (str(out[0].path),) if out else ()
        return [(s.path.name, s.path, lay.rel(s.path)) for s in lay.gym_output()], ()

    def open_around(self, around: AroundIt) -> None:
        """Every server's log merged (in the order Gym received the lines), at the trial's line:
        what each server was doing around it. The highlighted line, else the first of the trial's
        lines among those logs; else the first in Gym's captured output (the collector's), shown
        merged with them."""
        session = self.live.session
        if session is None:
            return
        sources, hints = self._all_logs()
        rels = [rel for _, _, rel in sources]
        lines = [ev for ev in [around.picked, *around.lines] if ev is not None]
        target = next((ev for ev in lines if ev.file in rels), None)
        if target is None:
            streams = {session.layout.rel(s.path): s.path for s in session.streams()}
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

    def _abs(self, rel: str) -> Path:
        p = Path(rel)
        return p if p.is_absolute() else self.live.root / p

    def open_trial_card(self, t: Trial) -> None:
        """A trial's card; what the card hands back (a line) is opened."""
        state = self.live.state
        if state is None:
            return
        row = card.read_row(state.root, t.evidence) if t.evidence is not None and t.source >= SRC_FAILURE_ROW else None
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

    # --- stepping through a trial's cause chain ----------------------------------------------
    def _step_cause(self, step: int) -> None:
        """`}` / `{`: the next / previous line that explains the trial under the cursor."""
        state, t = self.live.state, self.trials.trial_at_cursor()
        chain = attribution.cause_chain(state, t) if state is not None and t is not None else []
        if not chain:
            self.notify("no lines explain this trial (pick a failed, never-ran or missing one)")
            return
        if self._cause_of != t.key:
            self._cause_of, self._cause_idx = t.key, -1 if step > 0 else len(chain)
        self._cause_idx = (self._cause_idx + step) % len(chain)
        ev = chain[self._cause_idx]
        self.open_evidence(ev)
        self.notify(f"line {self._cause_idx + 1} of {len(chain)}: {ev.where()}", markup=False, timeout=2)

    def action_next_cause(self) -> None:
        self._step_cause(1)

    def action_prev_cause(self) -> None:
        self._step_cause(-1)

    def open_trial_cause(self, t: Trial) -> None:
        """`l` on a trial: the log line where its cause is (the agent's log for a never-ran)."""
        cause = attribution.trial_cause(self.live.state, t)
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

    # --- failures ----------------------------------------------------------------------------
    def failures(self) -> list[tuple[str, object]]:
        state = self.live.state
        if state is None:
            return []
        out: list[tuple[str, object]] = [("server", s.name) for s in state.servers.values() if s.state == FAILED]
        trials = sorted((t for t in state.trials.values() if t.status in PROBLEMS), key=lambda t: (
            t.task_index, t.rollout_index, -1 if t.attempt_index is None else t.attempt_index))
        out += [("trial", t.key) for t in trials]
        return out

    def _at_failure(self, items: list[tuple[str, object]]) -> int:
        """Where `]` / `[` go on from: the failure under the focused pane's cursor (a trial the
        screen put the cursor on, one the user moved to), else the last one they went to."""
        pane = self.focused_pane()
        here: Optional[tuple[str, object]] = None
        if pane is self.trials and self.trials.trial_at_cursor() is not None:
            here = ("trial", self.trials.trial_at_cursor().key)
        elif pane is self.board and self.board.server_at_cursor():
            here = ("server", self.board.server_at_cursor())
        return items.index(here) if here in items else self._fail_idx

    def _go_failure(self, step: int) -> None:
        items = self.failures()
        if not items:
            self.notify("no failures so far")
            return
        self._fail_idx = self._at_failure(items)
        wrapped = not 0 <= self._fail_idx + step < len(items) and self._fail_idx != -1
        self._fail_idx = (self._fail_idx + step) % len(items)
        kind, ref = items[self._fail_idx]
        where = "wrapped to " if wrapped else ""
        self.notify(f"{where}failure {self._fail_idx + 1} of {len(items)}: "
                    f"{ref if kind == 'server' else f'task {ref[0]} rollout {ref[1]}'}", markup=False, timeout=2)
        state = self.live.state
        if kind == "server":
            self.board.select(ref)
            self.board.focus()
            self.open_server_evidence(state.servers[ref])
        else:
            if not self.trials.select(ref):
                self.trials.set_filter("all")
                self.trials.select(ref)
            self.trials.focus()
            t = state.trials[ref]
            self.open_evidence(t.evidence or attribution.trial_cause(state, t))

    def action_next_failure(self) -> None:
        self._go_failure(1)

    def action_prev_failure(self) -> None:
        self._go_failure(-1)

    def action_verdict_evidence(self) -> None:
        state = self.live.state
        if state is not None:
            self.open_evidence(verdict(state).evidence)
