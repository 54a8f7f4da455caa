"""The log pane: a header (file, follow state, "+N new lines") over a `logview.LogView`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from .fmt import plain
from .logview import LogView as View


class LogPane(Vertical):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.path: Optional[Path] = None
        self.rel = ""
        self.new_lines = 0
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

    def on_mount(self) -> None:
        self.border_title = "Log"
        self.watch(self.view, "follow", self._follow_changed, init=False)
        self.watch(self.view, "scroll_y", self._scrolled, init=False)
        self._header()

    # --- what to show --------------------------------------------------------------------
    def show(self, path: Path, rel: str, line: Optional[int] = None, only: str = "") -> None:
        """Open a file: at `line` (highlighted, not following) or at its end, following.
        `only`: show just the lines containing it (one server's lines of a merged log)."""
        self.path, self.rel, self.line, self.new_lines = path, rel, line, 0
        self.merged = []
        self.border_title = "Evidence" if line else "Log"
        if only != self.only:
            self.only = only
            self.view.set_filter(only, errors_only=self.errors_only)   # before open: it applies there
        self.view.follow = line is None
        self.view.open(str(path), label=rel, line=line)
        if line is None:
            self.call_after_refresh(self._to_end, 3)
        else:
            self.call_after_refresh(self._reveal, 3)
        self._header()

    def show_merged(self, sources: list[tuple[str, Path, str]]) -> None:
        """Every server's log as one view, following: (label, path, rel) each, lines prefixed
        with their coloured label, appended lines in the order they arrive."""
        self.path, self.line, self.new_lines = None, None, 0
        self.rel = f"all servers ({len(sources)} logs)"
        self.merged = [rel for _, _, rel in sources]
        self.border_title = "Logs: all servers"
        if self.only:
            self.only = ""
            self.view.set_filter("", errors_only=self.errors_only)
        self.view.follow = True
        self.view.open_merged([(label, str(path)) for label, path, _ in sources])
        self.call_after_refresh(self._to_end, 3)
        self._header()

    def _reveal(self, tries: int) -> None:
        """Make sure the evidence line is on screen once the view's size is laid out.

        Works around LogView sometimes leaving the view at the top after a jump."""
        view, line = self.view, self.line
        cur = view.cursor
        if line and not view.scroll_y <= cur < view.scroll_y + view.size.height:
            view.goto_line(line)
        if tries > 1 and line:
            self.set_timer(0.1, lambda: self._reveal(tries - 1))

    def _to_end(self, tries: int) -> None:
        """Following: make sure the view starts at its end once its size is laid out.

        Works around LogView sometimes leaving a freshly opened file at the top."""
        view = self.view
        if view.follow and not self.new_lines and view.scroll_y < view.max_scroll_y:
            view.action_bottom()
        if tries > 1:
            self.set_timer(0.1, lambda: self._to_end(tries - 1))

    def files_changed(self, files: dict[str, int]) -> None:
        if not (self.rel and (self.rel in files or any(r in files for r in self.merged))):
            return
        view = self.view
        behind = view.follow and view.scroll_y < view.max_scroll_y   # following, but scrolled up
        added = view.refresh_file() or 0
        if behind and added:
            self.new_lines += added
            self._header()

    def _scrolled(self, y: float) -> None:
        if self.new_lines and y >= self.view.max_scroll_y:
            self.new_lines = 0          # caught up with the end
            self._header()

    def _follow_changed(self, follow: bool) -> None:
        if follow:
            self.new_lines = 0
        self._header()

    @on(View.NewLines)
    def _new_lines(self, event) -> None:
        """Following but scrolled up: `count` lines not seen yet (0: back at the end)."""
        event.stop()
        self.new_lines = max(event.count, self.new_lines) if event.count else 0
        self._header()

    def _header(self) -> None:
        t = Text(no_wrap=True, end="")
        if not self.rel:
            t.append("select a server or trial to see its log", style="dim")
        else:
            t.append_text(plain(self.rel, 60, "bold"))
            if self.line:
                t.append(f":{self.line}", style="bold")
            follow, paused = self.view.follow, bool(self.new_lines)
            if follow and not paused:
                t.append("  ● following", style="green")
            else:
                t.append("  ‖ paused" if follow else "  ‖ not following (f)", style="yellow")
            if self.new_lines:
                t.append(f"  +{self.new_lines} new lines (End to catch up)", style="bold black on yellow")
            if self.only:
                t.append("  ")
                t.append_text(plain(f"only lines with {self.only.strip()}", 40, "cyan"))
            if self.errors_only:
                t.append("  errors only", style="red")
        self.query_one("#log-header", Static).update(t)

    # --- keys ----------------------------------------------------------------------------
    def action_toggle_follow(self) -> None:
        self.view.follow = not self.view.follow

    def action_follow_on(self) -> None:
        self.view.follow = True

    def action_errors_only(self) -> None:
        self.errors_only = not self.errors_only
        self.view.set_filter(self.only, errors_only=self.errors_only)
        self._header()

    def action_find(self) -> None:
        self.view.focus()
        self.view.action_find()
