"""The live screen of one run: the panes, what they show and what their keys do.

`MainScreen` owns the panes (summary, board, trials, log) and their behaviour: it applies each
poll's changes to them (`apply()`), answers what the widgets ask for (their messages), and runs
the keys of the main screen, going from a row to its evidence through its `Navigator`. The polls
run off the UI thread (`polling.Poller`); each comes back as a `RunChanged`. Sizes are
`geometry.py`'s. The app around it is a thin shell: global keys, the keymap, notifications, the
command palette.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Optional, cast

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer

from ..core.model import FAILED, V_COLLECTING, V_QUEUED, V_STARTING
from ..core.verdict import Verdict, verdict
from . import geometry, head as headprobe
from .board import BoardPane, ReadinessBoard, waited_on
from .charts import ChartsScreen
from .footer import WholeLabels
from .keymap import key_shown
from .live import Changes, LiveRun
from .logpane import LogPane
from .navigate import Navigator, asked_for, focused_pane
from .polling import HeadProbed, Poller, RunChanged, WatcherStopped
from .retryscreen import RetryScreen
from .summary import Summary, reason_text, summary_text
from .trials import TrialsTable
from .watch import POLLING, ChangeSource, watchfiles_source

if TYPE_CHECKING:               # the app imports this module
    from .app import GymwatchApp


class MainScreen(Screen):
    """The default screen, its keys given ids (the keymap file can move them). The app's few
    global keys (quit, help, the palette) are the app's."""

    BINDINGS = [
        Binding("tab", "app.focus_next", "Next pane", show=False, id="gymwatch.next-pane"),
        Binding("shift+tab", "app.focus_previous", "Previous pane", show=False, id="gymwatch.prev-pane"),
        Binding("ctrl+c,super+c", "screen.copy_text", "Copy selected text", show=False, id="gymwatch.copy"),
        Binding("z", "toggle_maximize", "Maximize", id="gymwatch.maximize"),
        Binding("escape", "restore", "Restore the maximized pane", show=False, id="gymwatch.restore"),
        Binding("w", "toggle_wrap", "Wrap log lines", show=False, id="gymwatch.wrap"),
        Binding("right_square_bracket", "next_failure", "Next failure", id="gymwatch.next-failure"),
        Binding("left_square_bracket", "prev_failure", "Prev failure", show=False, id="gymwatch.prev-failure"),
        Binding("exclamation_mark", "verdict_evidence", "Evidence", id="gymwatch.evidence"),
        Binding("slash", "find", "Find in the log", show=False, id="gymwatch.find"),
        Binding("f", "toggle_follow", "Follow the log", show=False, id="gymwatch.follow"),
        Binding("e", "errors_only", "Errors", show=False, id="gymwatch.errors"),
        Binding("m", "all_logs", "All logs", show=False, id="gymwatch.all-logs"),
        Binding("right_curly_bracket", "next_cause", "Next cause line", show=False,
                id="gymwatch.next-cause"),
        Binding("left_curly_bracket", "prev_cause", "Prev cause line", show=False,
                id="gymwatch.prev-cause"),
        Binding("R", "retry_input", "Retry file", show=False, id="gymwatch.retry-input"),
        Binding("t", "charts('timeline')", "Startup timeline", show=False, id="gymwatch.timeline"),
        Binding("p", "charts('throughput')", "Charts", show=False, id="gymwatch.charts"),
    ]

    def __init__(self, live: LiveRun, *, source: ChangeSource, tick: float, head: Optional[str],
                 back: bool = False) -> None:
        """`back`: the screen of one benchmark of a submission, over the submission's screen:
        escape (when no pane is maximized) goes back to it."""
        super().__init__(id=None if back else "_default")
        self.live = live
        self.back = back
        self.clock = live.clock                 # the run's own time (a replay's runs at its speed)
        self.poller = Poller(self, live, source, tick)
        self.head = head
        self.head_error = ""
        self.run_shown = False        # the first poll is shown and the log pane has its first file
        self.hands_on = False         # the user pressed a key or clicked: the board's cursor is theirs
        self._last_verdict: Optional[str] = None
        self._first_log_queued = False
        self.mounted = asyncio.Event()   # the panes are up and the first read shown (the app waits for it)

    def compose(self) -> ComposeResult:
        # The panes are kept, not queried: a modal screen may be on top when a poll lands.
        self.summary = Summary(id="summary")
        self.board_pane = BoardPane(id="board-pane")   # the board, and the selected server whole under it
        self.board = self.board_pane.board
        self.trials = TrialsTable(id="trials")
        self.pane = LogPane(id="log-pane")
        yield self.summary
        yield self.board_pane
        with Container(id="main"):      # side by side, or stacked when narrow (app.tcss)
            yield self.trials
            yield self.pane
        yield WholeLabels()

    def on_mount(self) -> None:
        try:
            self._start()
        finally:
            self.mounted.set()

    def _start(self) -> None:
        self.trials.state_lock = self.live.lock
        self.trials.keys_told = (key_shown(self.app, "gymwatch.next-failure", "]"),
                                 key_shown(self.app, "trials.filter", "v"))
        self.navigator = Navigator(self.live, self.board, self.trials, self.pane, notify=self.notify,
                                   push_screen=self.app.push_screen, focused_pane=self.focused_pane)
        self.watch(self.trials, "virtual_size", lambda _: self.fit_panes(), init=False)
        self.watch(self.board, "virtual_size", lambda _: self.fit_soon(), init=False)
        self.watch(self, "maximized", self._maximized_changed, init=False)
        self.fit_soon()
        changes = self.live.poll()             # the first frame shows the run, not an empty screen
        changes.reset = True
        self.apply(changes)
        self.poller.start()
        if self.head:
            self._start_head(self.head)
        self.board.focus()

    @property
    def active_bindings(self):
        return geometry.global_keys_first(super().active_bindings)

    # --- reading ---------------------------------------------------------------------------
    def read_now(self) -> None:
        """Poll the run and show what changed before returning (the live path polls in a thread)."""
        if self.is_attached and not self.app._exit:
            self.poller.read_now(self.apply)

    @on(RunChanged)
    def _run_changed(self, event: RunChanged) -> None:
        if not self.app.is_running or self.app._exit:
            return
        self.apply(event.changes)
        self.poller.applied(event)

    def apply(self, changes: Changes) -> None:
        """Hand what a poll changed down to the panes (every row on a reset)."""
        with self.live.lock, self.app.batch_update():
            state, now = self.live.state, self.clock()
            if changes.reset:
                self.board.rebuild(state, now)
                self.trials.rebuild(state)
            elif state is not None:
                self.board.update(state, changes.servers, now)
                if changes.trials or changes.removed_trials:
                    self.trials.update(state, changes.trials, changes.removed_trials)
            self.show_summary()
            if changes.files:
                self.pane.files_changed(changes.files)
            if state is not None and not self._first_log_queued:
                self._first_log_queued = True
                self.app.call_after_refresh(self._first_log)   # after the tables' own first highlight
            elif self.run_shown and not self.pane.rel and changes.files:
                name = self.board.server_at_cursor()   # its server had no output when chosen
                if name:
                    self.navigator.open_server_log(name)
            if self.run_shown and not self.hands_on and state is not None:
                self._select_waited_on()
        if isinstance(self.app.screen, ChartsScreen) and (changes.reset or changes.trials or changes.removed_trials
                                                          or changes.servers):
            self.app.screen.run_changed()     # (not for log lines: they change no chart)
        self.fit_soon()        # the summary's and the board's heights may have moved

    def show_summary(self) -> None:
        """The summary lines and what the board says under its title, from the state now."""
        state = self.live.state
        v = verdict(state) if state is not None else None
        self._verdict_changed(v)
        # Textual types a screen's app as App whatever the app's class: this screen's is gymwatch's
        cast("GymwatchApp", self.app).notifier.observe(state, v)   # a bell, a desktop notice per stage
        live = v is not None and v.name in (V_STARTING, V_COLLECTING)
        elapsed = self.clock() - self.live.started_at() if live else None
        rate, eta = self.live.rate_eta() if v is not None and v.name == V_COLLECTING else (None, None)
        polling = POLLING if self.poller.watch_mode == POLLING else ""
        back = "esc: back to the submission" if self.back else ""
        mode = " · ".join(x for x in (back, "replay" if self.live.replay else "", polling, self.head_error,
                                      self.live.catching_up()) if x)
        line1 = summary_text(self.live.name, state, v, elapsed, self.live.done_total(), rate, eta)
        self.summary.show(line1, reason_text(state, v, self.live.waiting, mode))
        self.board.tell(v.reason if v is not None else "")

    def _verdict_changed(self, v: Optional[Verdict]) -> None:
        """A live run that turns bad says so once (the summary line stays)."""
        name = v.name if v is not None else None
        before, self._last_verdict = self._last_verdict, name
        if v is not None and before in (V_QUEUED, V_STARTING, V_COLLECTING) and name != before and v.exit_code:
            self.notify(f"{v.name.replace('_', ' ')}: press ! to see the evidence", severity="error",
                        timeout=8, markup=False)

    def _first_log(self) -> None:
        if not self.app.is_running:
            return
        self.run_shown = True
        state = self.live.state
        assert state is not None        # queued once there was a run to show; it stays one
        with self.live.lock:
            v = verdict(state)
            failed = [s.name for s in state.servers.values() if s.state == FAILED]
        if v.exit_code and v.evidence is not None and not asked_for(v.evidence):
            if failed:
                self.board.select(failed[0])
            self.navigator.open_evidence(v.evidence)
        elif v.exit_code and failed:    # it rests on Ray's answer: shown on `!` / enter, never over the screen at once
            self.board.select(failed[0])
            self.navigator.open_server_log(failed[0])
        else:
            self._select_waited_on()
            name = self.board.server_at_cursor()
            if name:
                self.navigator.open_server_log(name)

    def _select_waited_on(self) -> None:
        """Until the user takes over, the board's cursor (and the log pane) is on the server the
        run waits on (at 80x24 the demo showed a ready one while mcqa was still installing)."""
        with self.live.lock:
            state = self.live.state
            name = waited_on(state, self.clock()) if state is not None else None
        if name and name != self.board.server_at_cursor():
            self.board.select(name)

    # --- the watcher and the head server ------------------------------------------------------
    @on(WatcherStopped)
    def _watcher_stopped(self, event: WatcherStopped) -> None:
        self.notify(f"file watcher stopped ({event.error}); polling every {self.poller.tick:g}s instead",
                    severity="warning", markup=False)
        if not getattr(self.poller.source, "polling", True):
            self.poller.replace_source(watchfiles_source(force_polling=True))

    def _start_head(self, head: str) -> None:
        if not headprobe.is_loopback(head):
            self.notify(f"--head {head}: not a loopback address; not probing", severity="error",
                        markup=False)
            return
        self.poller.probe_head(head, self.clock)

    @on(HeadProbed)
    def head_probed(self, event: HeadProbed) -> None:
        """A probe's answer: the board shows it, the reducer takes what it says of the servers."""
        probe = event.probe
        self.board.probe = probe
        self.head_error = probe.error
        if self.live.session is not None and not probe.error:
            self.apply(self.live.apply_probe(probe.instances, probe.answers))
        else:
            self.show_summary()

    # --- what the widgets ask for (they post messages; the screen acts) ------------------------
    @on(DataTable.RowHighlighted, "#board")
    def _server_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The board's cursor moved: its server's log (once the first log is chosen)."""
        if event.row_key.value and self.run_shown:
            self.navigator.open_server_log(event.row_key.value)

    @on(DataTable.RowSelected, "#board")
    def _server_chosen(self, event: DataTable.RowSelected) -> None:
        state, name = self.live.state, event.row_key.value
        server = state.servers.get(name) if state is not None and name is not None else None
        if server is not None:
            self.navigator.open_server_evidence(server)

    @on(ReadinessBoard.LogRequested)
    def _server_log_requested(self, event: ReadinessBoard.LogRequested) -> None:
        self.navigator.open_server_log(event.server, force=True)

    @on(TrialsTable.Chosen)
    def _trial_chosen(self, event: TrialsTable.Chosen) -> None:
        self.navigator.open_trial_card(event.trial)

    @on(TrialsTable.CauseRequested)
    def _trial_cause_requested(self, event: TrialsTable.CauseRequested) -> None:
        self.navigator.open_trial_cause(event.trial)

    # --- geometry -------------------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self.fit_soon()

    def fit_soon(self) -> None:
        """fit_panes() once the screen is drawn. The app's after-refresh, not the screen's: a style
        set from the screen's own queue just after its update was left unlaid-out (`z` on the
        trials kept their width) until something else moved."""
        self.app.call_after_refresh(self.fit_panes)

    def fit_panes(self) -> None:
        """Size the trials pane to its content (or hide it when the run has no trials), the board
        to its rows, the footer to the width, and put the toasts under the summary. Called after
        every poll: each only sets a style that changes."""
        trials = getattr(self, "trials", None)
        if trials is None or not trials.is_attached:
            return
        empty = trials.state is None or not trials.state.trials
        trials.set_class(empty, "-empty")
        if empty and trials.has_focus:
            self.board.focus()
        footers = self.query(Footer)
        below = footers.first().outer_size.height if footers else 0
        room = self.size.height - self.summary.outer_size.height - below
        geometry.fit_board_height(self.board, self.board_pane, room, not empty)
        geometry.place_toasts(self, self.summary.items_height())
        narrow = geometry.is_narrow(self.size)
        for footer in footers:
            footer.compact = narrow
        geometry.fit_trials(trials, trials.natural_width(), self.size, narrow or empty or trials.is_maximized)

    def focused_pane(self) -> Optional[Widget]:
        """The pane (board, trials, log pane) holding the focus (None under another screen)."""
        return focused_pane(self, (self.board, self.trials, self.pane))

    def _maximized_changed(self, maximized: Optional[Widget]) -> None:
        """The board maximized wraps its phases whole in their rows; back, one line each."""
        self.board.wrap = maximized is not None and maximized is self.board_pane
        self.fit_soon()

    # --- keys -----------------------------------------------------------------------------------
    def action_toggle_maximize(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        pane = geometry.maximizable(self.focused_pane(), self.board)
        if pane is self.trials:      # the stylesheet's width before the layout (after it, Textual kept theirs)
            geometry.fit_trials(self.trials, 0, self.size, stacked=True)
        if pane is not None:
            self.maximized = pane

    def action_restore(self) -> None:
        if self.maximized is not None:
            self.minimize()
        elif self.back:
            self.app.pop_screen()

    def action_toggle_wrap(self) -> None:
        self.pane.view.action_toggle_wrap()

    def action_next_failure(self) -> None:
        self.navigator.go_failure(1)

    def action_prev_failure(self) -> None:
        self.navigator.go_failure(-1)

    def action_next_cause(self) -> None:
        self.navigator.step_cause(1)

    def action_prev_cause(self) -> None:
        self.navigator.step_cause(-1)

    def action_verdict_evidence(self) -> None:
        self.navigator.verdict_evidence()

    def action_find(self) -> None:
        self.pane.find()

    def action_toggle_follow(self) -> None:
        self.pane.toggle_follow()

    def action_errors_only(self) -> None:
        self.pane.toggle_errors_only()

    def action_all_logs(self) -> None:
        self.navigator.open_all_logs()

    def action_retry_input(self) -> None:
        """`R`: the retry file for the selected trial (the trials pane focused) or for all."""
        if self.live.session is None:
            self.notify("no run to read yet", markup=False)
            return
        if not self.live.rerunnable():
            self.notify("nothing to rerun: every trial completed or is still pending", markup=False)
            return
        t = self.trials.trial_at_cursor() if self.focused_pane() is self.trials else None
        self.app.push_screen(RetryScreen(self.live, t.key if t is not None else None))

    def action_charts(self, page: str) -> None:
        """`t` / `p`: the startup timeline, or throughput, rewards, tokens and cost, over the screen."""
        self.app.push_screen(ChartsScreen(self.live, page))

    def set_trial_filter(self, by: str) -> None:
        self.trials.set_filter(by)

    def set_trial_sort(self, by: str) -> None:
        self.trials.set_sort(by)
