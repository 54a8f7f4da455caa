"""The log pane: a header (file, follow state, "+N new lines") over a `logview.LogView`.

The view owns following and the count of lines not seen yet (`follow`, `paused`, `new_lines`);
the pane only shows them, redrawing its header when `follow` changes or a NewLines or Paused comes up."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.widgets import Static

from .fmt import ComponentLooks, plain
from .logview import LogView as View


class LogPane(ComponentLooks, Vertical):
    COMPONENT_CLASSES = {"logpane--following", "logpane--paused", "logpane--new-lines", "logpane--only",
                         "logpane--errors-only"}
    DEFAULT_CSS = """
    LogPane > .logpane--following { color: $text-success; }
    LogPane > .logpane--paused { color: $text-warning; }
    LogPane > .logpane--new-lines { color: auto 90%; background: $warning; text-style: bold; }
    LogPane > .logpane--only { color: $text-primary; }
    LogPane > .logpane--errors-only { color: $text-error; }
    """

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.path: Optional[Path] = None
        self.rel = ""
        self.errors_only = False
        self.line: Optional[int] = None
        self.only = ""
        self.merged: list[str] = []      # rel paths shown together (the merged view), else []

    def compose(self) -> ComposeResult:
        yield Static(id="log-header")
        yield View(id="log-view")

    @property
    def view(self) -> View:
        return self.query_one("#log-view", View)

    @property
    def new_lines(self) -> int:
        """Lines appended while following was paused, not seen yet (the view counts them)."""
        return self.view.new_lines

    def on_mount(self) -> None:
        self.border_title = "Log"
        self.watch(self.view, "follow", self._follow_changed, init=False)
        self._header()

    # --- what to show --------------------------------------------------------------------
    def show(self, path: Path, rel: str, line: Optional[int] = None, only: str = "") -> None:
        """Open a file: at `line` (highlighted, not following) or at its end, following.
        `only`: show just the lines containing it (one server's lines of a merged log)."""
        self.path, self.rel, self.line = path, rel, line
        self.merged = []
        self.border_title = "Evidence" if line else "Log"
        if only != self.only:
            self.only = only
            self.view.set_filter(only, errors_only=self.errors_only)   # before open: it applies there
        self.view.follow = line is None
        self.view.open(str(path), label=rel, line=line)
        self._header()

    def show_merged(self, sources: list[tuple[str, Path, str]], only: str = "", title: str = "",
                    hints: tuple[str, ...] = ()) -> None:
        """Several files as one view, following: (label, path, rel) each, lines prefixed with
        their coloured label, appended lines in the order they arrive. `only`: just the lines
        containing it (one server's lines in Gym's captured stdout and stderr)."""
        self.path, self.line = None, None
        self.rel = title or f"all servers ({len(sources)} logs)"
        self.merged = [rel for _, _, rel in sources]
        self.border_title = f"Log: {escape(title)}" if title else "Logs: all servers"
        if only != self.only:
            self.only = only
            self.view.set_filter(only, errors_only=self.errors_only)
        self.view.follow = True
        self.view.open_merged([(label, str(path)) for label, path, _ in sources], hints)
        self._header()

    def files_changed(self, files: dict[str, int]) -> None:
        if not (self.rel and (self.rel in files or any(r in files for r in self.merged))):
            return
        self.view.refresh_file()      # the view follows, or counts what is new (NewLines)

    def _follow_changed(self, follow: bool) -> None:
        self._header()

    @on(View.NewLines)
    def _new_lines(self, event: View.NewLines) -> None:
        """Following but scrolled up: lines not seen yet (0: back at the end)."""
        event.stop()
        self._header()

    @on(View.Paused)
    def _paused(self, event: View.Paused) -> None:
        event.stop()
        self._header()

    def _header(self) -> None:
        t = Text(no_wrap=True, end="")
        if not self.rel:
            t.append("select a server or trial to see its log", style="dim")
        else:
            t.append_text(plain(self.rel, 60, "bold"))
            if self.line:
                t.append(f":{self.line}", style="bold")
            follow, paused = self.view.follow, self.view.paused
            if follow and not paused:
                t.append("  ● following", style=self.look("logpane--following"))
            else:
                t.append("  ‖ paused" if follow else "  ‖ not following (f)", style=self.look("logpane--paused"))
            if self.new_lines:
                t.append(f"  +{self.new_lines} new lines (End to catch up)", style=self.look("logpane--new-lines"))
            if self.only:
                t.append("  ")
                t.append_text(plain(f"only lines with {self.only.strip()}", 40, self.look("logpane--only")))
            if self.errors_only:
                t.append("  errors only", style=self.look("logpane--errors-only"))
            if len(self.merged) > 1:
                basis = self.view.order_basis
                t.append(f"  in the order of {basis}" if basis else "  file by file, then as lines arrive",
                         style="dim")
        self.query_one("#log-header", Static).update(t)

    # --- what the app's keys ask of the pane (it has no bindings of its own) ---------------
    def toggle_follow(self) -> None:
        self.view.follow = not self.view.follow

    def toggle_errors_only(self) -> None:
        self.errors_only = not self.errors_only
        self.view.set_filter(self.only, errors_only=self.errors_only)
        self._header()

    def find(self) -> None:
        """Ask what to find in the log (the view takes the focus)."""
        self.view.focus()
        self.view.action_find()
