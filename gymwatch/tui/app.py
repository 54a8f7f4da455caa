"""`gymwatch attach PATH`: the live screen of one run.

Files -> RunSession.poll() (in a worker thread, on every watcher hint and on a 1 s tick) ->
RunChanged -> MainScreen.apply() -> widgets updated by key. Widgets never read run files; only
the log pane reads the log it shows. Closing the screen never touches the run's processes.

The app is a shell around the `MainScreen` (screen.py), which owns the panes and their keys:
here are the global keys (quit, help, the palette), the keymap file, the notifications and the
entry point.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Mapping, Optional

from textual import events
from textual.app import App
from textual.binding import Binding
from textual.notifications import Notify
from textual.screen import Screen

from ..core import target
from ..core.cluster.record import Submission
from ..core.model import Evidence, Trial
from ..core.reducer import Changes
from . import geometry, keymap
from .board import ReadinessBoard
from .commands import GymwatchCommands
from .helpscreen import HelpScreen
from .live import LiveRun
from .livesub import LiveSubmission
from .logpane import LogPane
from .notify import StageNotifier
from .screen import MainScreen
from .subscreen import BenchmarksTable, SubmissionScreen
from .summary import Summary
from .trials import TrialsTable
from .watch import ChangeSource, watchfiles_source


class GymwatchApp(App):
    """Bindings carry ids (gymwatch.*) so App.set_keymap (and the keymap file) can remap them.
    The footer shows few of these: the focused pane's own keys are what matter there."""
    CSS_PATH = "app.tcss"
    TITLE = "gymwatch"
    COMMANDS = App.COMMANDS | {GymwatchCommands}
    HORIZONTAL_BREAKPOINTS = geometry.HORIZONTAL_BREAKPOINTS
    VERTICAL_BREAKPOINTS = geometry.VERTICAL_BREAKPOINTS
    BINDINGS = [
        Binding("q", "quit", "Quit", id="gymwatch.quit"),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True, id="gymwatch.quit-anywhere"),
        Binding("question_mark", "help", "Help", id="gymwatch.help"),
        Binding("ctrl+c", "help_quit", "Say how to quit", show=False, id="gymwatch.ctrl-c"),
        Binding("ctrl+p", "command_palette", "palette", show=False, priority=True,
                id="gymwatch.palette"),
    ]

    def __init__(self, run: LiveRun | LiveSubmission | str, logs: Optional[str] = None, *,
                 change_source: Optional[ChangeSource] = None, clock: Callable[[], float] = time.time,
                 head: Optional[str] = None, tick: float = 1.0, animations: bool = True,
                 notify: bool = True, ray: Optional[str] = None) -> None:
        """`run`: a run (its path, or a LiveRun), or a submission of several benchmarks (a
        LiveSubmission, or a path naming one: its screen comes first, each benchmark's run
        opens over it). `ray`: the Ray dashboard's URL for a run named by its path (`--ray`)."""
        super().__init__()
        if isinstance(run, str):
            run = open_live(run, logs, clock, ray)
        self.change_source = change_source or watchfiles_source()
        self.head = head
        self.tick = tick
        self.notifier = StageNotifier(self, enabled=notify)   # bell + desktop notification per stage
        if not animations:
            self.animation_level = "none"
        self.submission: Optional[LiveSubmission] = None
        self.sub_screen: Optional[SubmissionScreen] = None
        self.main: Optional[MainScreen] = None     # the run's screen (a submission's: the benchmark open last)
        if isinstance(run, LiveSubmission):
            self.submission = run
            self.sub_screen = SubmissionScreen(run, source=self.change_source, tick=tick, open_run=self.open_benchmark)
            self.live: Optional[LiveRun] = None
        else:
            self.live = run
            self.main = MainScreen(run, source=self.change_source, tick=tick, head=head)
        self.load_keymap()         # before the panes mount: what they say names the keys as mapped

    def get_default_screen(self) -> Screen:
        return self._first_screen()

    def _first_screen(self) -> SubmissionScreen | MainScreen:
        first = self.sub_screen if self.sub_screen is not None else self.main
        assert first is not None, "made with a run or a submission, one of the two screens exists"
        return first

    async def on_mount(self) -> None:
        first = self._first_screen()
        if self.submission is not None:
            self.sub_title = str(self.submission.root)
        elif self.live is not None:
            self.sub_title = str(self.live.root)
        if self.keymap_problems:       # together: a small screen shows one toast at a time
            self.notify("\n".join(self.keymap_problems), title="keymap", severity="warning", markup=False,
                        timeout=10)
        await first.mounted.wait()     # ready (for a driver too) once the run is on screen

    def open_benchmark(self, name: str) -> None:
        """A benchmark of the submission in its own screen, over the submission's (escape: back)."""
        assert self.submission is not None
        self.live = self.submission.run(name)
        self.main = MainScreen(self.live, source=self.change_source, tick=self.tick, head=None, back=True)
        self.push_screen(self.main)

    # --- the main screen, for callers that drive it (tests, the screenshot script) ---------------
    @property
    def run_shown(self) -> bool:
        """The screen has shown its first poll and the log pane has its first file."""
        return self.main is not None and self.main.run_shown

    @property
    def started(self) -> bool:
        """The earlier name of `run_shown`, kept for scripts and tests written against it."""
        return self.run_shown

    def _run_screen(self) -> MainScreen:
        assert self.main is not None, "no benchmark's screen is open yet"
        return self.main

    def apply(self, changes: Changes) -> None:
        """Show what a poll changed (the main screen's `apply`)."""
        self._run_screen().apply(changes)

    def open_evidence(self, ev: Optional[Evidence]) -> None:
        self._run_screen().navigator.open_evidence(ev)

    def open_server_log(self, name: str, force: bool = False) -> None:
        self._run_screen().navigator.open_server_log(name, force)

    def open_trial_card(self, t: Trial) -> None:
        self._run_screen().navigator.open_trial_card(t)

    @property
    def polls(self) -> int:
        """Polls shown since the first read."""
        return self._run_screen().poller.polls

    def refresh_run(self) -> None:
        """Poll the run now and show what changed before returning."""
        self._run_screen().read_now()

    @property
    def summary(self) -> Summary:
        return self._run_screen().summary

    @property
    def board(self) -> ReadinessBoard:
        return self._run_screen().board

    @property
    def trials(self) -> TrialsTable:
        return self._run_screen().trials

    @property
    def pane(self) -> LogPane:
        return self._run_screen().pane

    # --- keys, the keymap file, notifications ---------------------------------------------------
    def load_keymap(self) -> None:
        """The user's keymap file over the bindings' ids; each problem a warning of one line (shown
        once the app is up)."""
        known = {b.id for _, b in keymap.all_bindings(self) if b.id}
        known |= {b.id for b in BenchmarksTable.BINDINGS if isinstance(b, Binding) and b.id}    # one file for runs and submissions
        self.keymap_path, mapping, self.keymap_problems = keymap.load(known)
        if mapping:
            self.set_keymap(mapping)

    def set_keymap(self, keymap_: Mapping[str, str]) -> None:
        """Textual's, an old binding id (keymap.ALIASES) taken as the id its binding has now."""
        super().set_keymap(keymap.current_ids(dict(keymap_)))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def on_notify(self, event: Notify) -> None:
        """A small screen shows one toast at a time: the new one replaces the others (App's own
        handler adds it after this one)."""
        if geometry.is_small(self.size):
            for holder in self.screen.query("ToastRack > *"):    # Textual would leave them, a line each
                holder.remove()
            self.clear_notifications()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseDown)) and self.main is not None:
            self.main.hands_on = True      # the user took over: the board's cursor is theirs
        await super().on_event(event)


def open_live(path: str, logs: Optional[str] = None, clock: Callable[[], float] = time.time,
              ray: Optional[str] = None) -> LiveRun | LiveSubmission:
    """What `path` names, to watch: a run (a submission's lone or named benchmark too), or a
    submission of several benchmarks. `ray`: the Ray dashboard's URL (`--ray`)."""
    if target.is_submission(path):
        got = target.resolve(path, logs)
        if isinstance(got, Submission):
            return LiveSubmission(got, clock=clock, ray=ray)
    return LiveRun(path, logs, clock=clock, ray=ray)


def run_app(args) -> int:
    """Entry point of `gymwatch attach` (and plain `gymwatch PATH`)."""
    if not os.path.isdir(args.path):    # a missing path or a non-run file: one line, exit 3
        target.resolve(args.path, getattr(args, "logs", None))
    source = watchfiles_source(force_polling=bool(getattr(args, "poll", False)))
    app = GymwatchApp(args.path, getattr(args, "logs", None), change_source=source,
                      head=getattr(args, "head", None), notify=not getattr(args, "no_notify", False),
                      ray=getattr(args, "ray", None))
    app.run()
    return app.return_code or 0
