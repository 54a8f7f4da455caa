"""LogView: a log viewer for files of any size (only visible lines are read and rendered).

Lines come from `gymwatch.core.logset` (one or more `core.logindex` indexes); text is untrusted,
so it is cleaned of escapes and drawn as plain Segments, never parsed as markup. Line numbers in
this API are 1-based. Its questions and the whole-line view are modal screens (`logscreens.py`).
"""

from __future__ import annotations

import bisect
import os
import shlex
import shutil
import subprocess
import time
from collections import OrderedDict
from typing import Optional

from rich.segment import Segment
from rich.style import Style
from textual import work
from textual.app import SuspendNotSupported
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer

from ..core.logset import LogSet
from ..core.matcher import Matcher
from ..core.sanitize import clean
from .fmt import ComponentLooks
from .logscreens import LineScreen, Prompt

BIG_BYTES = 16 << 20     # logs bigger than this are filtered and searched in a thread
# One colour per source of a merged view, so its lines tell apart (not meanings: no theme names).
LABEL_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta")
CAPPED = Style(color="red", bold=True)   # the cut mark of a line longer than CAP (enter shows it)


class LogView(ComponentLooks, ScrollView, can_focus=True):
    """Lines of one log, or several merged with a coloured per-source prefix."""

    COMPONENT_CLASSES = {"logview--gutter", "logview--match", "logview--cursor", "logview--mark"}
    DEFAULT_CSS = """
    LogView { overflow-x: hidden; background: $surface; }
    LogView:focus { background-tint: $foreground 3%; }
    LogView > .logview--gutter { text-style: dim; }
    LogView > .logview--match { color: auto 90%; background: $warning; }
    LogView > .logview--cursor { background: $foreground 15%; }
    LogView > .logview--mark { background: $primary 40%; }
    """
    BINDINGS = [
        Binding("slash", "find", "Find", id="logview.find"),
        Binding("n", "find_next", "Next", show=False, id="logview.find-next"),
        Binding("N", "find_prev", "Prev", show=False, id="logview.find-prev"),
        Binding("F", "filter", "Filter", id="logview.filter"),
        Binding("e", "errors", "Errors", id="logview.errors-only"),
        Binding("f", "toggle_follow", "Follow", id="logview.follow"),
        Binding("colon,ctrl+g", "jump", "Line", id="logview.goto-line"),
        Binding("g,home", "top", "Top", show=False, id="logview.top"),
        Binding("G,end", "bottom", "Bottom", show=False, id="logview.bottom"),
        Binding("w", "toggle_wrap", "Wrap", id="logview.wrap"),
        Binding("up,k", "cursor(-1)", "Up", show=False, id="logview.up"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="logview.down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="logview.page-up"),
        Binding("pagedown,space", "page(1)", "Page down", show=False, id="logview.page-down"),
        # inherited sideways scrolling, with ids (lines are cut or wrapped here: it moves nothing)
        Binding("left", "scroll_left", "Scroll left", show=False, id="logview.scroll-left"),
        Binding("right", "scroll_right", "Scroll right", show=False, id="logview.scroll-right"),
        Binding("ctrl+pageup", "page_left", "Page left", show=False, id="logview.page-left"),
        Binding("ctrl+pagedown", "page_right", "Page right", show=False, id="logview.page-right"),
        Binding("o", "open_external", "Open", id="logview.open-external"),
        Binding("c", "copy_where", "Copy path:line", id="logview.copy-where"),
        Binding("C", "copy_line", "Copy line", show=False, id="logview.copy-line"),
        Binding("enter", "show_line", "Whole line", show=False, id="logview.whole-line"),
    ]

    follow: reactive[bool] = reactive(False)
    wrap: reactive[bool] = reactive(False)   # long lines go on under their text, not cut with …

    class NewLines(Message):
        """Lines arrived while following is paused (the user scrolled up): `count` so far.
        0: caught up with the end (following again)."""

        def __init__(self, count: int) -> None:
            super().__init__()
            self.count = count

    class Paused(Message):
        """Following paused (the user went up: scrolled, `g`, a page up) or went on again (back at
        the end): `paused` says which."""

        def __init__(self, paused: bool) -> None:
            super().__init__()
            self.paused = paused

    class Opened(Message):
        """The first index of the opened file(s) is complete."""

    class Filtered(Message):
        """A filter over a big log made progress: `count` lines match so far; `done` at the end."""

        def __init__(self, count: int, done: bool) -> None:
            super().__init__()
            self.count, self.done = count, done

    def __init__(self, *, name: Optional[str] = None, id: Optional[str] = None, classes: Optional[str] = None):
        super().__init__(name=name, id=id, classes=classes)
        self.logs: Optional[LogSet] = None
        self.paths: list[str] = []
        self._rows: Optional[list[int]] = None          # visible rows when filtered
        self._filter = Matcher()
        self._find = Matcher()
        self.cursor = 0                                  # index into the visible rows
        self._mark: Optional[int] = None                 # highlighted row (goto_line)
        self._pending: Optional[tuple[int, int, bool]] = None  # (src, line, highlight) not indexed yet
        self._paused = False
        self._new_lines = 0
        self._cache: OrderedDict[int, tuple[int, int, str]] = OrderedDict()
        self._timer: Optional[Timer] = None
        self._filter_gen = 0
        self._filtering = False
        self._frame: Optional[list[Strip]] = None        # the wrapped screen, until a refresh
        self._frame_key: tuple = ()

    # --- opening ---------------------------------------------------------------------
    def open(self, path: str, label: str = "", line: Optional[int] = None) -> None:
        """Open one file (indexed in the background); jump to and highlight 1-based `line`."""
        self._load([(label, str(path))])
        if line is not None:
            self.goto_line(line)

    def open_merged(self, sources: list[tuple[str, str]], hints: tuple[str, ...] = ()) -> None:
        """Open several files as one view, each line prefixed with its coloured label, in the
        order they were written where something says so (`hints`: Gym's captured stdout;
        core/logset.py)."""
        self._load([(label, str(p)) for label, p in sources], hints)

    @property
    def order_basis(self) -> str:
        """What the merged view's order comes from (empty: file by file, then arrival)."""
        return self.logs.order_basis if self.logs is not None else ""

    def _load(self, sources: list[tuple[str, str]], hints: tuple[str, ...] = ()) -> None:
        if self.logs is not None:
            self.logs.close()
        self.logs = LogSet(sources, hints=hints)
        self.paths = [p for _, p in sources]
        self._rows, self.cursor, self._mark, self._pending = None, 0, None, None
        self._cache.clear()
        self._apply_filter()
        self._update_size()
        self._scroll_to_row(0)
        self._paused, self._new_lines = False, 0       # that scroll was not the user's
        if self._timer is None:
            self._timer = self.set_interval(0.1, self._poll_index)
        self._timer.resume()
        if self.follow:
            self.call_after_refresh(self._to_end)

    def on_unmount(self) -> None:
        if self.logs is not None:
            self.logs.close()

    def _poll_index(self) -> None:
        """While files are being indexed, take in new lines; then settle a pending jump."""
        logs = self.logs
        if logs is None:
            return
        done = logs.done
        added = logs.sync()
        if added:
            self._grew(True, added)
        if self._pending is not None:
            src, line, hl = self._pending
            if line < logs.indexes[src].line_count or done:
                self._pending = None
                self._goto(src, line, hl)
        if done and self._timer is not None:
            self._timer.pause()
            self.post_message(self.Opened())

    # --- following: the view owns it (the log pane shows it) -----------------------------
    @property
    def paused(self) -> bool:
        """Following, but the user scrolled up: appended lines are counted, not shown."""
        return self._paused

    @property
    def new_lines(self) -> int:
        """Lines appended while paused (NewLines says when this changes; 0 once caught up)."""
        return self._new_lines

    @property
    def filtering(self) -> bool:
        """A big log's filter is still running in a thread."""
        return self._filtering

    @property
    def settled(self) -> bool:
        """Every open file is indexed and no jump waits for its line to be indexed."""
        return self.logs is None or (self.logs.done and self._pending is None)

    # --- rows ------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        if self.logs is None:
            return 0
        return len(self._rows) if self._rows is not None else self.logs.rows

    def _row(self, y: int) -> int:
        return self._rows[y] if self._rows is not None else y

    def _visible_index(self, row: int) -> int:
        """The view index showing `row`, or the nearest one after it."""
        if self._rows is None:
            return row
        return min(bisect.bisect_left(self._rows, row), max(0, len(self._rows) - 1))

    def _update_size(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, self.row_count)
        self.refresh()

    def row_text(self, y: int) -> str:
        """The text view row `y` shows (cleaned; no line number, no label)."""
        return self._line(self._row(y))[2]

    def _line(self, row: int) -> tuple[int, int, str]:
        hit = self._cache.get(row)
        if hit is None:
            src, line, text = self.logs.text(row)  # type: ignore[union-attr]
            hit = self._cache[row] = (src, line, clean(text.expandtabs(4)))
            if len(self._cache) > 2000:
                self._cache.popitem(last=False)
        return hit

    # --- rendering -------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if self.wrap:
            return self._wrapped(y, width)
        vy = int(self.scroll_y) + y
        if self.logs is None or vy >= self.row_count:
            return Strip.blank(width, self.rich_style)
        strip, src, line = self._full_strip(vy)
        if strip.cell_length > width:      # cut: a mark at the edge (red: capped, enter shows it)
            mark = CAPPED if self.logs.indexes[src].is_capped(line) else self.look("logview--gutter")
            strip = Strip([*strip.crop(0, width - 1), Segment("…", mark)])
        return self._styled(strip.adjust_cell_length(width, self.rich_style), vy)

    def _full_strip(self, vy: int) -> tuple[Strip, int, int]:
        """View row `vy` whole: line number, label of a merged view, the text (found spans lit)."""
        assert self.logs is not None            # a row to draw: the logs are open
        row = self._row(vy)
        src, line, text = self._line(row)
        segs = [Segment(f"{line + 1:>{self._gutter()}} ", self.look("logview--gutter"))]
        if len(self.logs.indexes) > 1:
            label = self.logs.labels[src] or os.path.basename(self.paths[src])
            colour = LABEL_COLOURS[src % len(LABEL_COLOURS)]
            segs.append(Segment(f"{clean(label)[:24]:<{self._label_width()}} │ ", Style(color=colour)))
            own = f"({label}) "
            if text.startswith(own):          # the label says it: no `(server) ` prefix again
                text = text[len(own):]
        segs.extend(self._text_segments(text))
        return Strip(segs), src, line

    def _styled(self, strip: Strip, vy: int) -> Strip:
        if self._row(vy) == self._mark:
            strip = strip.apply_style(self.look("logview--mark"))
        if vy == self.cursor and self.has_focus:
            strip = strip.apply_style(self.look("logview--cursor"))
        return strip

    # --- wrapping (w) ----------------------------------------------------------------
    # Scrolling still moves by log line: the screen starts at the line at scroll_y and each line
    # takes as many screen rows as it needs. Following the end, it is drawn upwards from the last
    # line instead, so the newest line is always whole on screen; and a cursor (a jump's line)
    # that the lines above it push off the bottom is drawn last, whole.
    def refresh(self, *regions, **kw):
        self._frame = None
        return super().refresh(*regions, **kw)

    def watch_wrap(self, wrap: bool) -> None:
        self.refresh()
        if self.follow:
            self.call_after_refresh(self._to_end)

    def action_toggle_wrap(self) -> None:
        self.wrap = not self.wrap
        self.notify("long lines wrap" if self.wrap else "long lines cut at the edge (… marks them)",
                    timeout=1.5)

    def _wrapped(self, y: int, width: int) -> Strip:
        height = self.scrollable_content_region.height
        key = (int(self.scroll_y), width, height, self.row_count, self.cursor)
        if self._frame is None or self._frame_key != key:
            self._frame, self._frame_key = self._wrap_frame(width, height), key
        return self._frame[y] if y < len(self._frame) else Strip.blank(width, self.rich_style)

    def _wrap_frame(self, width: int, height: int) -> list[Strip]:
        if self.logs is None or not self.row_count or width <= 0:
            return []
        top = int(self.scroll_y)
        if self.follow and top >= self.max_scroll_y:  # following the end: fill from the last line up
            return self._fill_up(self.row_count - 1, width, height)
        rows: list[Strip] = []
        vy, seen = top, self.cursor < top
        while vy < self.row_count and len(rows) < height:
            rows += self._wrap_row(vy, width)
            seen = seen or (vy == self.cursor and len(rows) <= height)
            vy += 1
        if not seen:          # the cursor (a jump's line) pushed off the bottom: end with it
            return self._fill_up(self.cursor, width, height)
        return rows[:height]

    def _fill_up(self, last: int, width: int, height: int) -> list[Strip]:
        """Screen rows ending with view row `last`, whole, and as many rows above it as fit."""
        rows: list[Strip] = []
        vy = last
        while vy >= 0 and len(rows) < height:
            rows[:0] = self._wrap_row(vy, width)
            vy -= 1
        return rows[-height:]

    def _wrap_row(self, vy: int, width: int) -> list[Strip]:
        """One view row as screen rows: the rest of its text under the text, not the gutter."""
        assert self.logs is not None            # a row to draw: the logs are open
        strip, _, _ = self._full_strip(vy)
        indent = self._gutter() + 1 + (self._label_width() + 3 if len(self.logs.indexes) > 1 else 0)
        indent = indent if indent < width // 2 else 0
        out = [strip.crop(0, width)]
        step = width - indent
        for x in range(width, strip.cell_length, step):
            piece = strip.crop(x, x + step)
            out.append(Strip([Segment(" " * indent, self.look("logview--gutter")), *piece]) if indent else piece)
        return [self._styled(s.adjust_cell_length(width, self.rich_style), vy) for s in out]

    def _text_segments(self, text: str) -> list[Segment]:
        spans = self._find.spans(text) if not self._find.empty else []
        if not spans:
            return [Segment(text)]
        out, pos, lit = [], 0, self.look("logview--match")
        for a, b in spans:
            out += [Segment(text[pos:a]), Segment(text[a:b], lit)]
            pos = b
        out.append(Segment(text[pos:]))
        return out

    def _gutter(self) -> int:
        """Width of the line numbers: from the expected line count while a file is still being
        indexed, so the text does not shift right as the count grows."""
        if not self.logs:
            return 4
        most = max((ix.line_count if ix.done else int(ix.line_count / max(ix.progress, 1e-6))
                    for ix in self.logs.indexes), default=1)
        return max(4, len(str(most)))

    def _label_width(self) -> int:
        return min(24, max((len(x) for x in self.logs.labels), default=0)) if self.logs else 0

    # --- moving ----------------------------------------------------------------------
    def goto_line(self, line: int, highlight: bool = True, source: int = 0) -> None:
        """Move to 1-based `line` of a source (the first by default) and highlight it."""
        if self.logs is None:
            return
        n = max(0, line - 1)
        ix = self.logs.indexes[source]
        if n >= ix.line_count and not self.logs.done:
            self._pending = (source, n, highlight)      # not indexed yet: jump when it is
            return
        self._goto(source, min(n, max(0, ix.line_count - 1)), highlight)

    def _goto(self, src: int, line: int, highlight: bool) -> None:
        self.logs.sync()  # type: ignore[union-attr]
        self._update_size()
        row = self.logs.row_of(src, line)  # type: ignore[union-attr]
        if row is None:
            return
        self._mark = row if highlight else self._mark
        self._move_to(self._visible_index(row), center=True)

    def _move_to(self, y: int, center: bool = False) -> None:
        y = max(0, min(y, self.row_count - 1))
        self.cursor = y
        h = self.scrollable_content_region.height
        if not h:                  # not laid out yet: scroll once it is
            self.call_after_refresh(self._move_to, y, center)
            return
        top = int(self.scroll_y)
        if center and not (top <= y < top + h):
            self._scroll_to_row(max(0, y - h // 2))
        elif y < top:
            self._scroll_to_row(y)
        elif y >= top + h:
            self._scroll_to_row(y - h + 1)
        self.refresh()

    # A scroll made right after the row count changed must not wait for a layout. Textual drops
    # an unforced scroll while `show_vertical_scrollbar` still says the old rows fitted (it is
    # worked out only at the next layout): a file opened at a line, or following its end, stayed
    # at the top. So these scrolls are forced (clamped to the new virtual size all the same), and
    # the scrollbar, when it appears, starts where the view already is.
    def _scroll_to_row(self, y: int) -> None:
        self.scroll_to(y=y, animate=False, immediate=True, force=True)

    def _scroll_to_end(self) -> None:
        self.scroll_end(animate=False, immediate=True, force=True)

    def on_resize(self) -> None:
        """A pane made smaller or bigger (a terminal resized, panes stacked): following stays at
        the end, and a line jumped to stays in view."""
        self._update_size()
        if self.logs is None:
            return
        if self.follow and not self._paused:
            self.call_after_refresh(self._to_end)
        else:
            self.call_after_refresh(lambda: self._move_to(self.cursor))

    def watch_show_vertical_scrollbar(self, shown: bool) -> None:
        if shown:
            self.vertical_scrollbar.position = self.scroll_y

    def action_cursor(self, step: int) -> None:
        self._move_to(self.cursor + step)

    def action_page(self, step: int) -> None:
        h = max(1, self.scrollable_content_region.height - 1)
        self._move_to(self.cursor + step * h)

    def action_top(self) -> None:
        self._move_to(0)
        self._pause(True)              # even where the whole log fits and nothing scrolled

    def action_bottom(self) -> None:
        self._move_to(self.row_count - 1)
        self._scroll_to_end()
        self._pause(False)

    def _pause(self, paused: bool) -> None:
        """Following paused by the user going up, or on again back at the end (Paused says so;
        going on, the lines counted meanwhile are seen)."""
        if not self.follow or paused == self._paused:
            return
        self._paused = paused
        if not paused:
            self._new_lines = 0
            self.post_message(self.NewLines(0))
        self.post_message(self.Paused(paused))

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if not self.follow:
            return
        at_end = new >= self.max_scroll_y
        # While a filter fills the rows from a thread the view shrinks and grows under the
        # cursor: those moves are not the user's, and must not pause following.
        if new < old and not at_end and not self._filtering:
            self._pause(True)
        elif at_end:
            self._pause(False)

    # --- live ------------------------------------------------------------------------
    def refresh_file(self) -> int:
        """Index bytes appended since the last call (on a change hint). Returns the rows added
        by appends (not those a big file's first index is still finding)."""
        if self.logs is None:
            return 0
        result = self.logs.refresh()
        if not self.logs.done and self._timer is not None:
            self._timer.resume()         # a big append is indexed in the background
        if result.reset:
            self._cache.clear()
            self._rows, self._mark = None, None
            self._apply_filter()
            self._update_size()
            self._move_to(min(self.cursor, self.row_count - 1))
            return result.added
        self._cache.clear()          # a partial last line may have grown
        appended = self.logs.appended
        if result.added:
            self._grew(False, result.added)
        else:
            self.refresh()
        return min(result.added, appended)

    def _grew(self, initial: bool, added: int) -> None:
        """`added` rows were taken in (before filtering): extend the filter, follow or count."""
        self._cache.clear()
        if self._rows is not None and self._filtering:
            added = 0                    # the running filter job takes them in when done
        elif self._rows is not None:
            before = len(self._rows)
            if initial and len(self.logs.indexes) > 1:  # type: ignore[union-attr]
                self._apply_filter()     # a merged load moves later files' rows down
            else:
                self._rows.extend(self._match_rows(self._rows[-1] + 1 if self._rows else 0))
            added = len(self._rows) - before
        self._update_size()
        if not self.follow or not added:
            return
        if not self._paused:
            self.call_after_refresh(self._to_end)
            return
        new = min(added, self.logs.appended)     # type: ignore[union-attr]
        if new:                                  # lines found by a first index are not new
            self._new_lines += new
            self.post_message(self.NewLines(self._new_lines))

    def _to_end(self) -> None:
        if not self.follow:
            return        # queued while following, but a jump (an evidence line) came first
        self.cursor = max(0, self.row_count - 1)
        if not self.scrollable_content_region.height:      # not laid out yet
            self.call_after_refresh(self._to_end)
            return
        self._scroll_to_end()

    def watch_follow(self, follow: bool) -> None:
        self._paused, self._new_lines = False, 0
        if follow and self.logs is not None:
            self.call_after_refresh(self._to_end)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self.notify(f"follow {'on' if self.follow else 'off'}", timeout=1.5)

    # --- filter ----------------------------------------------------------------------
    def set_filter(self, text: str, errors_only: bool = False) -> None:
        """Show only lines containing `text` (case-insensitive; `!text` inverts), or error lines."""
        keep = self._row(self.cursor) if self.row_count else 0
        tail = self.follow and not self._paused       # following the end: go on following it
        self._filter = Matcher(text, errors_only)
        self._apply_filter()
        self._update_size()
        if tail:
            self.call_after_refresh(self._to_end)
        else:
            self._move_to(self._visible_index(keep), center=True)

    @property
    def filter_text(self) -> str:
        f = self._filter
        return ("!" if f.invert else "") + f.text

    @property
    def errors_only(self) -> bool:
        return self._filter.errors_only

    def _big(self) -> bool:
        return self.logs is not None and sum(ix.size for ix in self.logs.indexes) > BIG_BYTES

    def _apply_filter(self) -> None:
        self._filter_gen += 1
        self._filtering = False
        if self.logs is None or self._filter.empty:
            self._rows = None
        elif not self._big():
            self._rows = self._match_rows(0)
        else:                                   # big: fill the rows from a thread, in batches
            self._rows, self._filtering = [], True
            self._filter_job(self._filter, self._filter_gen)

    def _match_rows(self, start: int) -> list[int]:
        return self.logs.filter(self._filter, start) if self.logs else []

    @work(thread=True, exclusive=True, group="logview-filter", exit_on_error=False)
    def _filter_job(self, matcher: Matcher, gen: int) -> None:
        batch: list[int] = []
        last = time.monotonic()
        for row in self.logs.iter_filter(matcher):  # type: ignore[union-attr]
            if gen != self._filter_gen:
                return
            batch.append(row)
            if time.monotonic() - last > 0.2:
                self.app.call_from_thread(self._filter_more, gen, batch, False)
                batch, last = [], time.monotonic()
        self.app.call_from_thread(self._filter_more, gen, batch, True)

    def _filter_more(self, gen: int, rows: list[int], done: bool) -> None:
        if gen != self._filter_gen or self._rows is None:
            return
        self._rows.extend(rows)
        if done:
            self._filtering = False
            self._rows.extend(self._match_rows(self._rows[-1] + 1 if self._rows else 0))  # lines since
        self._update_size()
        if self.follow and not self._paused:
            self.call_after_refresh(self._to_end)
        self.post_message(self.Filtered(len(self._rows), done))

    def action_filter(self) -> None:
        def apply(value: Optional[str]) -> None:
            if value is not None:
                self.set_filter(value, self.errors_only)
        self.app.push_screen(Prompt("filter lines (!text inverts, empty clears)", self.filter_text), apply)

    def action_errors(self) -> None:
        self.set_filter(self.filter_text, not self.errors_only)

    # --- find ------------------------------------------------------------------------
    def find(self, text: str) -> Optional[int]:
        """Highlight `text` everywhere and move to its next occurrence. Returns the 1-based line."""
        self._find = Matcher(text)
        if self._find.empty:
            self.refresh()
            return None
        return self._find_step(True, include_current=True)

    def find_next(self) -> Optional[int]:
        return self._find_step(True)

    def find_prev(self) -> Optional[int]:
        return self._find_step(False)

    def _find_step(self, forward: bool, include_current: bool = False) -> Optional[int]:
        if self.logs is None or self._find.empty or not self.row_count:
            return None
        row = self._row(self.cursor)
        if include_current:
            row += -1 if forward else 1
        if self._big():
            self._find_job(self._find, row, forward)
            return None
        return self._show_hit(self._next_match(self._find, row, forward))

    @work(thread=True, exclusive=True, group="logview-find", exit_on_error=False)
    def _find_job(self, matcher: Matcher, row: int, forward: bool) -> None:
        hit = self._next_match(matcher, row, forward)
        self.app.call_from_thread(self._show_hit, hit)

    def _show_hit(self, hit: Optional[int]) -> Optional[int]:
        if hit is None or self.logs is None:
            self.notify(f"not found: {self._find.text}", severity="warning", timeout=2)
            return None
        self._move_to(self._visible_index(hit), center=True)
        return self.logs.locate(hit)[1] + 1

    def _next_match(self, matcher: Matcher, row: int, forward: bool) -> Optional[int]:
        """The next matching row in view (any thread: no widget state is touched)."""
        logs, rows = self.logs, self._rows
        if logs is None:
            return None
        if rows is None:
            return logs.find(matcher, row, forward)
        rows = list(rows)
        n = len(rows)
        start = bisect.bisect_left(rows, row)
        if forward and start < n and rows[start] <= row:
            start += 1
        for k in range(n):
            y = (start + k) % n if forward else (start - 1 - k) % n
            if matcher.line(logs.text(rows[y])[2]):
                return rows[y]
        return None

    def action_find(self) -> None:
        def go(value: Optional[str]) -> None:
            if value is not None:
                self.find(value)
        self.app.push_screen(Prompt("find (n next, N previous)", self._find.text), go)

    def action_find_next(self) -> None:
        self.find_next()

    def action_find_prev(self) -> None:
        self.find_prev()

    def action_jump(self) -> None:
        def go(value: Optional[str]) -> None:
            if value and value.strip().isdigit():
                src = self.logs.locate(self._row(self.cursor))[0] if self.logs is not None and self.row_count else 0
                self.goto_line(int(value.strip()), source=src)
        self.app.push_screen(Prompt("go to line"), go)

    # --- the line under the cursor ---------------------------------------------------
    def current(self) -> Optional[tuple[str, int]]:
        """(path, 1-based line) under the cursor."""
        if self.logs is None or not self.row_count:
            return None
        src, line = self.logs.locate(self._row(self.cursor))
        return self.paths[src], line + 1

    def action_copy_where(self) -> None:
        cur = self.current()
        if cur:
            self.app.copy_to_clipboard(f"{cur[0]}:{cur[1]}")
            self.notify(f"copied {cur[0]}:{cur[1]}", timeout=2)

    def action_copy_line(self) -> None:
        if self.row_count:
            src, line = self.logs.locate(self._row(self.cursor))  # type: ignore[union-attr]
            self.app.copy_to_clipboard(clean(self.logs.indexes[src].full_line(line)))  # type: ignore[union-attr]
            self.notify("copied the line", timeout=2)

    def action_show_line(self) -> None:
        cur = self.current()
        if cur:
            src, line = self.logs.locate(self._row(self.cursor))  # type: ignore[union-attr]
            text = self.logs.indexes[src].full_line(line)  # type: ignore[union-attr]
            self.app.push_screen(LineScreen(f"{os.path.basename(cur[0])}:{cur[1]}", text))

    def action_open_external(self) -> None:
        cur = self.current()
        if not cur:
            return
        cmd = external_command(*cur)
        if cmd is None:
            self.notify("set $PAGER or $EDITOR to open logs", severity="warning")
            return
        try:
            with self.app.suspend():
                subprocess.call(cmd)
        except (SuspendNotSupported, OSError) as exc:
            self.notify(f"cannot open {cmd[0]}: {exc or 'not supported here'}", severity="warning")
        self.refresh()


def external_command(path: str, line: int) -> Optional[list[str]]:
    """`$PAGER +LINE path` (less by default), else `$EDITOR +LINE path`: both read `+N`."""
    for tool in (os.environ.get("PAGER"), "less" if shutil.which("less") else None,
                 os.environ.get("EDITOR"), "vi" if shutil.which("vi") else None):
        if tool:
            return [*shlex.split(tool), f"+{line}", path]
    return None

