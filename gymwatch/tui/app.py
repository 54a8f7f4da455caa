"""`gymwatch attach PATH`: the live screen of one run.

Files -> RunSession.poll() (on every watcher hint and on a 1 s tick) -> Changes ->
widgets updated by key. Widgets never read run files; only the log pane reads the log
it shows. Closing the screen never touches the run's processes.
"""

from __future__ import annotations

import os

import time
from pathlib import Path
from typing import Callable, Optional

from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.widgets import DataTable
from textual.worker import Worker, WorkerState

from ..core.layout import discover
from ..core.model import FAILED, V_COLLECTING, V_QUEUED, V_STARTING
from ..core.reducer import Changes
from ..core.verdict import verdict
from . import head as headprobe
from .board import BoardPane, ReadinessBoard, waited_on
from .commands import GymwatchCommands
from .footer import WholeLabels
from .helpscreen import HelpScreen
from .layout import ResponsiveLayout
from .live import LiveRun
from .logpane import LogPane
from .navigate import EvidenceNav
from .notify import StageNotifier
from .summary import Summary, reason_text, summary_text
from .trials import TrialsTable
from .watch import ChangeSource, describe, watchfiles_source

HEAD_EVERY = 5.0


class GymwatchApp(EvidenceNav, ResponsiveLayout, App):
    """Bindings carry ids (gymwatch.*) so App.set_keymap (and the keymap file) can remap them.
    The footer shows few of these: the focused pane's own keys are what matter there."""
    CSS_PATH = "app.tcss"
    TITLE = "gymwatch"
    COMMANDS = App.COMMANDS | {GymwatchCommands}
    BINDINGS = [
        Binding("q", "quit", "Quit", id="gymwatch.quit"),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True, id="gymwatch.quit-anywhere"),
        Binding("question_mark", "help", "Help", id="gymwatch.help"),
        Binding("ctrl+c", "help_quit", "Say how to quit", show=False, id="gymwatch.ctrl-c"),
        Binding("ctrl+p", "command_palette", "palette", show=False, priority=True,
                id="gymwatch.palette"),
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
    ]

    def __init__(self, run: LiveRun | str, logs: Optional[str] = None, *,
                 change_source: Optional[ChangeSource] = None, clock: Callable[[], float] = time.time,
                 head: Optional[str] = None, tick: float = 1.0, animations: bool = True,
                 notify: bool = True) -> None:
        super().__init__()
        self.live = run if isinstance(run, LiveRun) else LiveRun(run, logs, clock=clock)
        self.clock = self.live.clock            # the run's own time (a replay's runs at its speed)
        self.change_source = change_source or watchfiles_source()
        self.head = head
        self.tick = tick
        self._watched: list[Path] = []
        self.watch_mode = ""
        self._fail_idx = -1
        self._cause_of, self._cause_idx = None, -1     # the trial whose cause chain `}`/`{` step through
        self.head_error = ""
        self.polls = 0                # refresh_run calls (tests wait on it)
        self._last_verdict: Optional[str] = None
        self._first_log_queued = False
        self._follow_board = False    # board highlights open logs (once the first log is chosen)
        self.hands_on = False         # the user pressed a key or clicked: the board's cursor is theirs
        self._catch_up_pending = False
        self.notifier = StageNotifier(self, enabled=notify)   # bell + desktop notification per stage
        if not animations:
            self.animation_level = "none"

    def compose(self) -> ComposeResult:
        yield Summary(id="summary")
        yield BoardPane(id="board-pane")       # the board, and the selected server whole under it
        with Container(id="main"):      # side by side, or stacked when narrow (app.tcss)
            yield TrialsTable(id="trials")
            yield LogPane(id="log-pane")
        yield WholeLabels()

    @property
    def started(self) -> bool:
        """Has the screen started: the first poll is shown and the log pane has its first file
        (tests wait for this). As in the model, `started` is a yes or no; times are `*_at`."""
        return self._follow_board

    def on_mount(self) -> None:
        # Kept, not queried: a modal screen (help, palette) may be on top when a poll lands.
        self.board = self.query_one(ReadinessBoard)
        self.trials = self.query_one(TrialsTable)
        self.pane = self.query_one(LogPane)
        self.summary = self.query_one(Summary)
        self.sub_title = str(self.live.root)
        self.layout_mount()
        changes = self.live.poll()
        changes.reset = True
        self.apply(changes)
        self._catch_up()
        self._start_watch()
        self.set_interval(self.tick, self.refresh_run)
        if self.head:
            self._start_head()
        self.board.focus()

    # --- reading ---------------------------------------------------------------------------
    def refresh_run(self) -> None:
        """Poll the session (cheap: a stat and a read per file) and update what changed."""
        if not self.is_running or self._exit:
            return
        self.polls += 1
        self.apply(self.live.poll())
        self._catch_up()
        if self.live.watch_paths() != self._watched:
            self._start_watch()

    def _catch_up(self) -> None:
        """A poll that left part of a big file for later: poll again as soon as the screen has
        had its turn, not a tick later (one such poll pending at a time)."""
        if self.live.catching_up() and not self._catch_up_pending:
            self._catch_up_pending = True
            self.set_timer(0.02, self._catch_up_poll)

    def _catch_up_poll(self) -> None:
        self._catch_up_pending = False
        self.refresh_run()

    def apply(self, changes: Changes) -> None:
        state, now = self.live.state, self.clock()
        with self.batch_update():
            if changes.reset:
                self.board.rebuild(state, now)
                self.trials.rebuild(state)
            elif state is not None:
                self.board.update(state, changes.servers, now)
                if changes.trials or changes.removed_trials:
                    self.trials.update(state, changes.trials, changes.removed_trials)
            self._summary()
            if changes.files:
                self.pane.files_changed(changes.files)
            if state is not None and not self._first_log_queued:
                self._first_log_queued = True
                self.call_after_refresh(self._first_log)   # after the tables' own first highlight
            elif self._follow_board and not self.pane.rel and changes.files:
                name = self.board.server_at_cursor()   # its server had no output when chosen
                if name:
                    self.open_server_log(name)
            if self._follow_board and not self.hands_on and state is not None:
                self._select_waited_on()
        self.call_after_refresh(self.fit_panes)        # the summary's and the board's heights may have moved

    def _summary(self) -> None:
        state = self.live.state
        v = verdict(state) if state is not None else None
        self._verdict_changed(v)
        self.notifier.observe(state, v)
        live = v is not None and v.name in (V_STARTING, V_COLLECTING)
        elapsed = self.clock() - self.live.started_at() if live else None
        rate, eta = self.live.rate_eta() if v is not None and v.name == V_COLLECTING else (None, None)
        polling = "polling" if self.watch_mode == "polling" else ""
        mode = " · ".join(x for x in ("replay" if self.live.replay else "", polling, self.head_error,
                                      self.live.catching_up()) if x)
        line1 = summary_text(self.live.root.name, state, v, elapsed, self.live.done_total(), rate, eta)
        self.summary.show(line1, reason_text(state, v, self.live.waiting, mode))
        self.board.tell(v.reason if v is not None else "")

    def _verdict_changed(self, v) -> None:
        """A live run that turns bad says so once (the summary line stays)."""
        name = v.name if v is not None else None
        before, self._last_verdict = self._last_verdict, name
        if before in (V_QUEUED, V_STARTING, V_COLLECTING) and name != before and v.exit_code:
            self.notify(f"{name.replace('_', ' ')}: press ! to see the evidence", severity="error",
                        timeout=8, markup=False)

    def _first_log(self) -> None:
        if not self.is_running:
            return
        self._follow_board = True
        state = self.live.state
        v = verdict(state)
        if v.exit_code and v.evidence is not None:
            failed = [s.name for s in state.servers.values() if s.state == FAILED]
            if failed:
                self.board.select(failed[0])
            self.open_evidence(v.evidence)
        else:
            self._select_waited_on()
            name = self.board.server_at_cursor()
            if name:
                self.open_server_log(name)

    def _select_waited_on(self) -> None:
        """Until the user takes over, the board's cursor (and the log pane) is on the server the
        run waits on (at 80x24 the demo showed a ready one while mcqa was still installing)."""
        name = waited_on(self.live.state, self.clock())
        if name and name != self.board.server_at_cursor():
            self.board.select(name)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseDown)):
            self.hands_on = True
        await super().on_event(event)

    # --- what the widgets ask for (they post messages; the app acts) ---------------------------
    @on(DataTable.RowHighlighted, "#board")
    def _server_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The board's cursor moved: its server's log (once the first log is chosen)."""
        if event.row_key.value and self._follow_board:
            self.open_server_log(event.row_key.value)

    @on(DataTable.RowSelected, "#board")
    def _server_chosen(self, event: DataTable.RowSelected) -> None:
        state = self.live.state
        server = state.servers.get(event.row_key.value) if state is not None else None
        if server is not None:
            self.open_server_evidence(server)

    @on(ReadinessBoard.LogRequested)
    def _server_log_requested(self, event: ReadinessBoard.LogRequested) -> None:
        self.open_server_log(event.server, force=True)

    @on(TrialsTable.Chosen)
    def _trial_chosen(self, event: TrialsTable.Chosen) -> None:
        self.open_trial_card(event.trial)

    @on(TrialsTable.CauseRequested)
    def _trial_cause_requested(self, event: TrialsTable.CauseRequested) -> None:
        self.open_trial_cause(event.trial)

    # --- watching --------------------------------------------------------------------------
    def _start_watch(self) -> None:
        self._watched = self.live.watch_paths()
        self.watch_mode = describe(self.change_source, self._watched)   # inotify / polling / injected
        self.run_worker(self._watch(self._watched), name="watch", group="watch",
                        exclusive=True, exit_on_error=False)

    async def _watch(self, paths: list[Path]) -> None:
        first = True
        async for hint in self.change_source(paths):
            if hint or first:       # an empty batch is a timeout wake-up: the tick covers it
                first = False       # (the first one is the catch-up read once the watcher is armed)
                self.refresh_run()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        w = event.worker
        if w.name == "watch" and event.state == WorkerState.ERROR:
            self.notify(f"file watcher stopped ({w.error}); polling every {self.tick:g}s instead",
                        severity="warning", markup=False)
            if not getattr(self.change_source, "polling", True):
                self.change_source = watchfiles_source(force_polling=True)
                self._start_watch()
        elif w.name == "head" and event.state == WorkerState.SUCCESS:
            self._head_result(w.result)

    def _head_result(self, probe: headprobe.Probe) -> None:
        self.board.probe = probe
        self.head_error = probe.error
        session = self.live.session
        if session is not None and not probe.error:
            self.apply(session.apply_probe(probe.instances, probe.answers))
        else:
            self._summary()

    def _start_head(self) -> None:
        if not headprobe.is_loopback(self.head):
            self.notify(f"--head {self.head}: not a loopback address; not probing", severity="error",
                        markup=False)
            return
        self._probe_head()
        self.set_interval(HEAD_EVERY, self._probe_head)

    def _probe_head(self) -> None:
        url, at = self.head, self.clock()
        run_id = self.live.state.info.run_id if self.live.state is not None else ""
        self.run_worker(lambda: headprobe.probe(url, run_id, at), name="head", group="head", thread=True,
                        exclusive=True, exit_on_error=False)

    # --- other actions -----------------------------------------------------------------------
    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_find(self) -> None:
        self.pane.find()

    def action_toggle_follow(self) -> None:
        self.pane.toggle_follow()

    def action_errors_only(self) -> None:
        self.pane.toggle_errors_only()

    def action_all_logs(self) -> None:
        self.open_all_logs()

    def set_trial_filter(self, by: str) -> None:
        self.trials.set_filter(by)

    def set_trial_sort(self, by: str) -> None:
        self.trials.set_sort(by)


def run_app(args) -> int:
    """Entry point of `gymwatch attach` (and plain `gymwatch PATH`)."""
    if not os.path.isdir(args.path):
        discover(args.path, getattr(args, "logs", None))   # a missing path or a non-run file: one line, exit 3
    source = watchfiles_source(force_polling=bool(getattr(args, "poll", False)))
    app = GymwatchApp(args.path, getattr(args, "logs", None), change_source=source,
                      head=getattr(args, "head", None), notify=not getattr(args, "no_notify", False))
    app.run()
    return app.return_code or 0
