"""`R`: the retry file of `gymwatch report --retry-input FILE`, from the live screen.

A small dialog: for the selected trial or for every trial that did not complete, the file to
write (a new one, outside the run: the run is never written), then what was written and the
`gym eval run` command that collects those trials. What it writes and refuses is `gymwatch.retry`'s,
through `LiveRun.write_retry()`: the same file the report writes. Plain text throughout.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, RadioButton, RadioSet, Static

from ..core.model import TrialKey
from ..core.sanitize import clean
from ..retry import RetryRefused
from .live import LiveRun


def default_file(live: LiveRun) -> Path:
    """`<run>-retry.jsonl` in the current dir, or beside the run when that is inside it; a name
    no file has yet (`-2`, `-3`, ...)."""
    root = live.root
    here = Path.cwd().resolve()
    where = root.parent if here == root or here.is_relative_to(root) else here
    base = where / f"{root.name}-retry.jsonl"
    path, n = base, 1
    while os.path.lexists(path):
        n += 1
        path = base.with_name(f"{root.name}-retry-{n}.jsonl")
    return path


class RetryScreen(ModalScreen[None]):
    """Which trials, which file; enter writes it and shows the command."""

    DEFAULT_CSS = """
    RetryScreen { align: center middle; }
    RetryScreen > VerticalScroll { width: 100; max-width: 96%; height: auto; max-height: 90%;
                             border: thick $accent; background: $surface; padding: 0 1; }
    RetryScreen RadioSet { width: 100%; border: none; padding: 0; }
    RetryScreen #retry-said { height: auto; margin-top: 1; }
    RetryScreen #retry-said.-refused { color: $text-error; }
    """
    BINDINGS = [Binding("escape", "dismiss", "Close", id="retry.close")]

    def __init__(self, live: LiveRun, selected: Optional[TrialKey]) -> None:
        super().__init__()
        self.live = live
        self.all_count = len(live.rerunnable())
        # the selected trial, when a rerun has something to do for it
        self.selected = selected if selected is not None and live.rerunnable([selected]) else None
        self.written: Optional[Path] = None

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text("Retry file: the inputs of trials that did not complete, for gym eval run --input",
                              style="bold"))
            with RadioSet(id="retry-which"):
                if self.selected is not None:
                    task, rollout = self.selected
                    yield RadioButton(f"the selected trial: task {task} rollout {rollout}", value=True)
                yield RadioButton(f"all {self.all_count} trial(s) that did not complete (failed, never ran, missing)",
                                  value=self.selected is None)
            yield Input(str(default_file(self.live)), id="retry-file",
                        placeholder="a new file outside the run")
            yield Static(Text("enter writes the file (a new one, outside the run) · escape closes", style="dim"),
                         id="retry-said")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def which(self) -> Optional[list[TrialKey]]:
        """The trials chosen: the selected one, or None for all."""
        radio = self.query_one(RadioSet)
        return [self.selected] if self.selected is not None and radio.pressed_index == 0 else None

    @on(Input.Submitted, "#retry-file")
    def write(self, event: Input.Submitted) -> None:
        file = event.value.strip()
        if not file:
            self._say("name a file to write", refused=True)
            return
        try:
            written, said = self.live.write_retry(file, self.which())
        except RetryRefused as exc:
            self._say(str(exc), refused=True)
            return
        self.written = written.file if written is not None else None
        self._say(said + "\n\nescape closes", refused=written is None)

    def _say(self, text: str, refused: bool) -> None:
        said = self.query_one("#retry-said", Static)
        said.set_class(refused, "-refused")
        said.update(Text(clean(text)))
