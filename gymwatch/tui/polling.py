"""Reading the run off the UI thread: polls in a worker thread, their changes posted to the screen.

What asks for a poll: the watcher's hints (watchfiles events, or the queue of tests), the tick
(a periodic re-read: events are only hints), a poll that left part of a big file for later
(catching up), and `read_now()`. Requests are coalesced: one poll at a time, and requests made
while it runs make one more poll after it, not one each.

The handover: a poll runs `LiveRun.poll()` in a thread (the reducer writes the state there,
under the run's lock) and posts `RunChanged(changes)`; the screen applies it on the UI thread,
then calls `applied()`, which starts the next poll if one was asked for. So a poll never runs
while its changes are applied, and the widgets always draw the state of a finished poll. What
else reads the state on the UI thread (the keys, the card) takes the lock for the walk.

Every worker's result comes back as a message of its own type (`RunChanged`, `HeadProbed`,
`WatcherStopped`), never told apart by the worker's name.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Callable

from textual.message import Message
from textual.widget import Widget

from . import head as headprobe
from .live import Changes, LiveRun
from .livesub import LiveSubmission
from .watch import ChangeSource, describe

HEAD_EVERY = 5.0     # seconds between `--head` probes


class RunChanged(Message):
    """A poll finished: what it changed (`changes`), and the paths to watch after it."""

    def __init__(self, changes: Changes, watch_paths: list[Path]) -> None:
        super().__init__()
        self.changes = changes
        self.watch_paths = watch_paths


class HeadProbed(Message):
    """A `--head` probe's answer."""

    def __init__(self, probe: headprobe.Probe) -> None:
        super().__init__()
        self.probe = probe


class WatcherStopped(Message):
    """The file watcher failed (`error`): the tick goes on polling."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error


class SubmissionChanged(Message):
    """A poll of every benchmark of a submission finished: what it changed in each (`changes`, by
    benchmark), and the paths to watch after it."""

    def __init__(self, changes: dict[str, Changes], watch_paths: list[Path]) -> None:
        super().__init__()
        self.changes = changes
        self.watch_paths = watch_paths


class Poller:
    """Polls `live` for `node` (the screen: it runs the workers and gets their messages): a
    `LiveRun`, whose polls come back as RunChanged, or a `LiveSubmission`, as SubmissionChanged."""

    def __init__(self, node: Widget, live: LiveRun | LiveSubmission, source: ChangeSource, tick: float) -> None:
        self.node, self.live, self.source, self.tick = node, live, source, tick
        self.paused = False          # the screen is hidden under another: no polls, no watcher
        self.polls = 0               # polls applied (tests wait on it)
        self.watch_mode = ""         # what the summary says of the watcher: inotify / polling / injected
        self._watched: list[Path] = []
        self._running = False        # a poll is being read or its changes applied
        self._again = False          # asked for while one ran: one more after it

    def start(self) -> None:
        """Watch the run's files and re-read it every `tick` (after the first read)."""
        self.watch(self.live.watch_paths())
        self.node.set_interval(self.tick, self.request)
        self.catch_up()

    # --- polls ------------------------------------------------------------------------------
    def request(self) -> None:
        """A poll as soon as none is running."""
        if self.paused:
            return
        if self._running:
            self._again = True
            return
        self._running = True
        self.node.run_worker(self._read, thread=True, group="poll", exclusive=False)

    def _read(self) -> None:
        live = self.live
        if isinstance(live, LiveRun):
            self.node.post_message(RunChanged(live.poll(), live.watch_paths()))
        else:
            self.node.post_message(SubmissionChanged(live.poll(), live.watch_paths()))

    def read_now(self, apply: Callable[[Any], None]) -> None:
        """A poll on the caller's thread (waiting for one running in the worker), applied with
        `apply` before this returns: for a caller that shows its result at once. `apply` gets what
        the poll changed: the run's Changes, or a submission's by benchmark."""
        apply(self.live.poll())
        self.polls += 1
        self.catch_up()

    def applied(self, done: RunChanged | SubmissionChanged) -> None:
        """A worker's poll is on screen: watch new paths, and poll again if asked meanwhile or
        if it left part of a big file for later (the screen has had its turn)."""
        self.polls += 1
        self._running = False
        if done.watch_paths != self._watched:
            self.watch(done.watch_paths)
        if self._again:
            self._again = False
            self.request()
        else:
            self.catch_up()

    def pause(self) -> None:
        """The screen is covered (a benchmark's own screen over the submission's): the screen on
        top polls what it shows; this one neither polls nor takes the watcher's hints."""
        self.paused = True
        self.node.workers.cancel_group(self.node, "watch")

    def resume(self) -> None:
        """Shown again: watch, and read what changed meanwhile."""
        self.paused = False
        self.watch(self._watched)
        self.request()

    def catch_up(self) -> None:
        if self.live.catching_up():
            self.request()

    # --- the watcher ------------------------------------------------------------------------
    def watch(self, paths: list[Path]) -> None:
        """(Re)start the watcher over `paths`; its hints ask for polls."""
        self._watched = paths
        self.watch_mode = describe(self.source, paths)
        self.node.run_worker(self._watch(paths), group="watch", exclusive=True, exit_on_error=False)

    async def _watch(self, paths: list[Path]) -> None:
        first = True
        try:
            async for hint in self.source(paths):
                if hint or first:       # an empty batch is a timeout wake-up: the tick covers it
                    first = False       # (the first one is the catch-up read once the watcher is armed)
                    self.request()
        except Exception as exc:    # noqa: BLE001 - told on screen; the tick goes on polling
            self.node.post_message(WatcherStopped(exc))

    def replace_source(self, source: ChangeSource) -> None:
        self.source = source
        self.watch(self._watched)

    # --- the head server (--head) -------------------------------------------------------------
    def probe_head(self, url: str, clock: Callable[[], float]) -> None:
        """Probe now and every HEAD_EVERY seconds; each answer comes as HeadProbed."""
        def probe(run_id: str, at: float) -> None:
            self.node.post_message(HeadProbed(headprobe.probe(url, run_id, at)))

        def start() -> None:
            state = self.live.state if isinstance(self.live, LiveRun) else None
            run_id = state.info.run_id if state is not None else ""
            self.node.run_worker(partial(probe, run_id, clock()), group="head", thread=True, exclusive=True,
                                 exit_on_error=False)

        start()
        self.node.set_interval(HEAD_EVERY, start)
