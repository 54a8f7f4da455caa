"""A stand-in for logview.LogView built on textual's Log, with the same small interface.

Used only while `gymwatch/tui/logview.py` is absent. Reads whole files (fine for the
moderate logs of a Gym run); the real LogView indexes lines and reads on demand.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from rich.style import Style
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widgets import Log

from ..core.sanitize import clean

MAX_LINE = 2000
HIGHLIGHT = Style(bgcolor="dark_goldenrod", color="black", bold=True)
ERROR_RE = re.compile(r"error|traceback|exception|failed|killed|\b5\d\d\b", re.I)


class SimpleLogView(Log):
    follow: reactive[bool] = reactive(True)

    class NewLines(Message):
        def __init__(self, count: int) -> None:
            super().__init__()
            self.count = count

    def __init__(self, **kw) -> None:
        super().__init__(highlight=False, **kw)
        self.path: Optional[str] = None
        self.label = ""
        self._all: list[str] = []          # every line of the file (1-based = index + 1)
        self._shown: list[int] = []        # indexes of _all in view (filter)
        self._offset = 0
        self._hl: Optional[int] = None     # index into _all
        self._filter: tuple[str, bool] = ("", False)
        self._find = ""
        self._unseen = 0                   # lines appended while paused

    # --- files ---------------------------------------------------------------------------
    def open(self, path: str, label: str = "", line: Optional[int] = None) -> None:
        self.path, self.label = str(path), label or os.path.basename(str(path))
        self._all, self._offset, self._hl, self._unseen = [], 0, None, 0
        self._read_new()
        self._render_all()
        if line:
            self.goto_line(line)
        else:
            self.follow = True
            self.scroll_end(animate=False, immediate=True)

    def refresh_file(self) -> int:
        """Read appended lines; returns how many."""
        if self.path is None:
            return 0
        try:
            if os.path.getsize(self.path) < self._offset:
                self.open(self.path, self.label)
                return 0
        except OSError:
            return 0
        start = len(self._all)
        self._read_new()
        fresh = [i for i in range(start, len(self._all)) if self._matches(self._all[i])]
        if fresh:
            self._shown.extend(fresh)
            paused = self.follow and not self.is_vertical_scroll_end
            self.write_lines([self._all[i] for i in fresh], scroll_end=self.follow and not paused)
            if paused:
                self._unseen += len(fresh)
                self.post_message(self.NewLines(self._unseen))
        return len(fresh)

    def _read_new(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1          # hold back a partial last line
        self._offset += end
        for raw in data[:end].splitlines():
            text = clean(raw.decode("utf-8", "replace").expandtabs())
            self._all.append(text[:MAX_LINE] + ("…" if len(text) > MAX_LINE else ""))

    # --- view ----------------------------------------------------------------------------
    def _matches(self, line: str) -> bool:
        text, errors = self._filter
        if errors and not ERROR_RE.search(line):
            return False
        return not text or text.lower() in line.lower()

    def _render_all(self) -> None:
        self.clear()
        self._shown = [i for i, ln in enumerate(self._all) if self._matches(ln)]
        self.write_lines([self._all[i] for i in self._shown], scroll_end=False)

    def set_filter(self, text: str, errors_only: bool = False) -> None:
        self._filter = (text, errors_only)
        self._render_all()
        if self.follow:
            self.scroll_end(animate=False, immediate=True)

    def goto_line(self, line: int, highlight: bool = True) -> None:
        idx = max(0, min(line - 1, len(self._all) - 1))
        if highlight:
            self._hl = idx
        y = self._shown.index(idx) if idx in self._shown else 0
        self.follow = False
        self.scroll_to(y=max(0, y - self.size.height // 2), animate=False, immediate=True)
        self._render_line_cache.clear()
        self.refresh()

    def current(self) -> Optional[tuple[str, int]]:
        """(path, 1-based line) of the highlighted line, else of the top line."""
        if self.path is None or not self._all:
            return None
        return self.path, (self._hl if self._hl is not None else self._top_line()) + 1

    def find(self, text: str) -> bool:
        self._find = text
        return self._search(1, start=self._top_line() - 1)

    def find_next(self) -> bool:
        return self._search(1)

    def find_prev(self) -> bool:
        return self._search(-1)

    def _top_line(self) -> int:
        y = int(self.scroll_y)
        return self._shown[y] if y < len(self._shown) else 0

    def _search(self, step: int, start: Optional[int] = None) -> bool:
        if not self._find or not self._shown:
            return False
        pos = start if start is not None else (self._hl if self._hl is not None else self._top_line())
        order = self._shown if step > 0 else list(reversed(self._shown))
        needle = self._find.lower()
        for i in order:
            if (i > pos if step > 0 else i < pos) and needle in self._all[i].lower():
                self.goto_line(i + 1)
                return True
        return False

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        idx = int(self.scroll_y) + y
        if self._hl is not None and idx < len(self._shown) and self._shown[idx] == self._hl:
            strip = strip.apply_style(HIGHLIGHT)
        return strip

    # --- follow --------------------------------------------------------------------------
    def watch_follow(self, follow: bool) -> None:
        self._unseen = 0
        if follow:
            self.scroll_end(animate=False, immediate=True)

    def action_scroll_end(self) -> None:
        super().action_scroll_end()
        if self._unseen:
            self._unseen = 0
            self.post_message(self.NewLines(0))
