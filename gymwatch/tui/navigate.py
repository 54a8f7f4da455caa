"""Going from a row to its evidence: logs, failure lines, `]`/`[` over failures (a mixin of the app)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from textual.markup import escape
from textual.widgets import DataTable

from ..core import attribution
from ..core.layout import ENV
from ..core.model import FAILED, T_FAILED, T_MISSING, T_NEVER_RAN, Evidence
from ..core.verdict import verdict

PROBLEMS = (T_FAILED, T_NEVER_RAN, T_MISSING)


class EvidenceNav:
    """Needs from the app: live, board, trials, pane, notify, _follow_board, _fail_idx."""

    # --- opening evidence and logs -----------------------------------------------------------
    def open_evidence(self, ev: Optional[Evidence]) -> None:
        if ev is None:
            self.notify("no evidence line for this one yet", severity="warning")
            return
        self.pane.show(self._abs(ev.file), ev.file, ev.line)

    def open_server_log(self, name: str, force: bool = False) -> None:
        """Show a server's log, following. `force`: even if that file is open at an evidence line."""
        st = self.live.state
        s = st.servers.get(name) if st else None
        if s is None:
            return
        own = s.log_file or self.live.server_log(name)
        rel = own or next((e.file for e in (s.last_line_at, s.failure, s.ready_evidence) if e), None)
        if rel is None:
            self.pane.border_title = f"Log: {escape(name)} (no output yet)"
            return
        only = "" if own else f"({name}) "     # a merged log: just this server's lines
        if rel != self.pane.rel or only != self.pane.only or (force and self.pane.line is not None):
            self.pane.show(self._abs(rel), rel, only=only)
        self.pane.border_title = f"Log: {escape(name)}"

    def open_all_logs(self) -> None:
        """Every server's own log merged into one view (label and colour per server); where
        the servers' output is only in Gym's captured output, that output (already merged)."""
        session = self.live.session
        if session is None:
            return
        lay = session.layout
        sources = [(name, path, lay.rel(path)) for name, path in sorted(lay.server_logs().items())]
        if not sources:
            sources = [(s.path.name, s.path, lay.rel(s.path)) for s in session.streams() if s.role == ENV]
        if not sources:
            self.notify("no server output yet", markup=False)
            return
        self.pane.show_merged(sources)

    def _abs(self, rel: str) -> Path:
        p = Path(rel)
        return p if p.is_absolute() else self.live.root / p

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table is self.board and event.row_key.value and self._follow_board:
            self.open_server_log(event.row_key.value)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        st = self.live.state
        if st is None:
            return
        if event.data_table is self.board:
            s = st.servers.get(event.row_key.value)
            if s is not None:
                self._open_server_evidence(s)

    def on_trials_table_chosen(self, event) -> None:
        """Enter or a click on a trial: its own row's line, else the log line of its cause."""
        st = self.live.state
        if st is not None:
            t = event.trial
            self.open_evidence(t.evidence or attribution.trial_cause(st, t))

    def open_trial_cause(self, t) -> None:
        """`l` on a trial: the log line where its cause is (the agent's log for a never-ran)."""
        cause = attribution.trial_cause(self.live.state, t)
        if cause is None:
            self.notify("nothing known beyond its own row" if t.evidence else "no evidence yet")
            return
        self.open_evidence(cause)

    def _open_server_evidence(self, s) -> None:
        ev = s.failure if s.state == FAILED else (s.errors[-1] if s.errors else None)
        if ev is not None:
            self.open_evidence(ev)
            self.pane.border_title = f"Log: {escape(s.name)}"
        else:
            self.open_server_log(s.name)

    # --- failures ----------------------------------------------------------------------------
    def failures(self) -> list[tuple[str, object]]:
        st = self.live.state
        if st is None:
            return []
        out: list[tuple[str, object]] = [("server", s.name) for s in st.servers.values() if s.state == FAILED]
        trials = sorted((t for t in st.trials.values() if t.status in PROBLEMS), key=lambda t: (
            t.task_index, t.rollout_index, -1 if t.attempt_index is None else t.attempt_index))
        out += [("trial", t.key) for t in trials]
        return out

    def _go_failure(self, step: int) -> None:
        items = self.failures()
        if not items:
            self.notify("no failures so far")
            return
        self._fail_idx = (self._fail_idx + step) % len(items)
        kind, ref = items[self._fail_idx]
        st = self.live.state
        if kind == "server":
            self.board.select(ref)
            self.board.focus()
            self._open_server_evidence(st.servers[ref])
        else:
            if not self.trials.select(ref):
                self.trials.set_view("all")
                self.trials.select(ref)
            self.trials.focus()
            t = st.trials[ref]
            self.open_evidence(t.evidence or attribution.trial_cause(st, t))

    def action_next_failure(self) -> None:
        self._go_failure(1)

    def action_prev_failure(self) -> None:
        self._go_failure(-1)

    def action_verdict_evidence(self) -> None:
        st = self.live.state
        if st is not None:
            self.open_evidence(verdict(st).evidence)
