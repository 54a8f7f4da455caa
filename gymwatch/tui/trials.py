"""The trials table: a virtual list over the run state, drawing only the rows on screen.

A Textual DataTable keeps a styled copy of every cell and measures each one it is given: a
100k-trial run cost ~300 MB and 50 s to fill, and a poll touching 200 rows ~0.4 s to repaint.
Here a row is just its trial's key in a sorted list; its cells are made when it is drawn.
"""

from __future__ import annotations

import bisect
from typing import Optional

from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.markup import escape
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..core.model import RunState, Trial, TrialKey
from ..core.sanitize import clean
from .fmt import STATUS_LOOK, plain, reward

COLUMNS = (("task", "Task"), ("rollout", "Roll"), ("attempt", "Att"), ("status", "Status"),
           ("reward", "Reward"), ("tokens", "Tokens in/out"), ("why", "Failure"))
FILTERS = ("all", "failed", "never_ran", "missing", "pending")
SORTS = ("key", "status", "reward", "tokens")
SEVERITY = {"never_ran": 0, "failed": 1, "missing": 2, "pending": 3, "completed": 4}
WHY_MAX = 100           # characters of a failure shown in its cell
RESORT_SHARE = 16       # more changed trials than rows / this: sort the whole list again
HEADER_STYLE = Style(bold=True)
CURSOR_STYLE = Style(bgcolor="#264f78")          # under the cells' own colours
BLUR_CURSOR_STYLE = Style(bgcolor="grey23")


def sort_value(t: Trial, by: str) -> tuple:
    k = (t.task_index, t.rollout_index, -1 if t.attempt_index is None else t.attempt_index)
    if by == "status":
        return (SEVERITY.get(t.status, 9),) + k
    if by == "reward":
        return (t.reward is None, -(t.reward or 0.0)) + k
    if by == "tokens":
        return (-((t.input_tokens or 0) + (t.output_tokens or 0)),) + k
    return k


def _reward(t: Trial) -> str:
    if t.status == "never_ran":
        return "withheld" + (f" ({t.withheld_reward:g})" if t.withheld_reward is not None else "")
    return reward(t.reward)


def _tokens(t: Trial) -> str:
    if t.input_tokens is None and t.output_tokens is None:
        return ""
    return f"{t.input_tokens if t.input_tokens is not None else '-'}/" \
           f"{t.output_tokens if t.output_tokens is not None else '-'}"


def _why(t: Trial) -> str:
    why = t.failure_class + (": " if t.failure_class and t.message else "") + t.message
    if t.status == "never_ran" and not why:
        why = "model never called (empty output, zero usage)"
    if t.status == "missing" and not why:
        why = "no row: the collector ended without it"
    return why


def cells(t: Trial) -> tuple[Text, ...]:
    """A trial's row, one Text a column (untrusted text through `plain`: never markup)."""
    label, style, row_style = STATUS_LOOK.get(t.status, (t.status, "", ""))
    att = "" if t.attempt_index is None else str(t.attempt_index)
    return (Text(str(t.task_index), style=row_style), Text(str(t.rollout_index), style=row_style),
            Text(att, style=row_style), Text(label, style=style), Text(_reward(t), style=row_style),
            Text(_tokens(t), style=row_style), plain(_why(t), WHY_MAX, row_style))


class TrialsTable(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    TrialsTable { background: $surface; }
    TrialsTable:focus { background-tint: $foreground 3%; }
    """
    BINDINGS = [
        Binding("v", "cycle_filter", "Filter"), Binding("s", "cycle_sort", "Sort"),
        Binding("l", "open_cause", "Cause log"),
        Binding("up", "cursor(-1)", show=False), Binding("down", "cursor(1)", show=False),
        Binding("k", "cursor(-1)", show=False), Binding("j", "cursor(1)", show=False),
        Binding("pageup", "page(-1)", show=False), Binding("pagedown", "page(1)", show=False),
        Binding("home", "edge(0)", show=False), Binding("end", "edge(1)", show=False),
        Binding("enter", "choose", show=False),
    ]

    class Chosen(Message):
        """Enter (or a click) on a trial: show what is behind it."""

        def __init__(self, table: "TrialsTable", trial: Trial) -> None:
            super().__init__()
            self.table, self.trial = table, trial

    def __init__(self, **kw):
        super().__init__(**kw)
        self.state: Optional[RunState] = None
        self.view = "all"
        self.sort_by = "key"
        self.cursor = 0
        self._order: list[tuple[tuple, TrialKey]] = []     # (sort value, key) of the rows, sorted
        self._sv: dict[TrialKey, tuple] = {}               # key -> its sort value in _order
        self._widths = [len(label) for _, label in COLUMNS]   # grow with the widest cell seen

    def on_mount(self) -> None:
        self._title()

    # --- the rows -----------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self._order)

    def rebuild(self, state: Optional[RunState]) -> None:
        """All rows again: on a reset, or a filter or sort change."""
        here = self._key_at(self.cursor)
        if state is not self.state and state is not None:      # a new model: size the columns
            self._widths = [len(label) for _, label in COLUMNS]
            for t in state.trials.values():
                self._widen(t)
        self.state = state
        trials = [t for t in state.trials.values() if self._in_view(t)] if state is not None else []
        self._sv = {t.key: sort_value(t, self.sort_by) for t in trials}
        self._order = sorted((v, k) for k, v in self._sv.items())
        self._after_change(here, scroll=True)        # a user's sort or filter: show the cursor

    def update(self, state: RunState, changed: set[TrialKey], removed: set[TrialKey]) -> None:
        """A poll's changes: rows move, appear and go; nothing else is touched."""
        here = self._key_at(self.cursor)
        self.state = state
        for key in removed:
            self._drop(key)
        if len(changed) > max(64, len(self._order) // RESORT_SHARE):
            for key in changed:
                self._place(key, state.trials.get(key), resort=False)
            self._order = sorted((v, k) for k, v in self._sv.items())
        else:
            for key in changed:
                self._place(key, state.trials.get(key), resort=True)
        self._after_change(here)

    def _place(self, key: TrialKey, t: Optional[Trial], resort: bool) -> None:
        if t is None or not self._in_view(t):
            self._drop(key)
            return
        self._widen(t)
        new = sort_value(t, self.sort_by)
        old = self._sv.get(key)
        if old == new:
            return
        if resort:
            if old is not None:
                self._remove_entry(old, key)
            bisect.insort(self._order, (new, key))
        self._sv[key] = new

    def _drop(self, key: TrialKey) -> None:
        old = self._sv.pop(key, None)
        if old is not None:
            self._remove_entry(old, key)

    def _remove_entry(self, value: tuple, key: TrialKey) -> None:
        i = bisect.bisect_left(self._order, (value, key))
        if i < len(self._order) and self._order[i][1] == key:
            del self._order[i]

    def _after_change(self, here: Optional[TrialKey], scroll: bool = False) -> None:
        """Keep the cursor on its trial (rows above it may have come or gone) and redraw."""
        self.virtual_size = Size(sum(self._widths) + 2 * len(COLUMNS), len(self._order) + 1)
        if here is not None and here in self._sv:
            self._move(self._index_of(here), scroll=scroll)
        else:
            self.cursor = max(0, min(self.cursor, len(self._order) - 1))
        self.refresh()
        self._title()

    def _widen(self, t: Trial) -> None:
        w = self._widths
        att = len(str(t.attempt_index)) if t.attempt_index is not None else 0
        label = STATUS_LOOK.get(t.status, (t.status,))[0]
        why = min(len(_why(t)), WHY_MAX)
        for i, n in enumerate((len(str(t.task_index)), len(str(t.rollout_index)), att, len(label),
                               len(_reward(t)), len(_tokens(t)), why)):
            if n > w[i]:
                w[i] = n

    def _key_at(self, i: int) -> Optional[TrialKey]:
        return self._order[i][1] if 0 <= i < len(self._order) else None

    def _index_of(self, key: TrialKey) -> int:
        return bisect.bisect_left(self._order, (self._sv[key], key))

    def _in_view(self, t: Trial) -> bool:
        return self.view == "all" or t.status == self.view

    def _title(self) -> None:
        n = len(self.state.trials) if self.state else 0
        shown = "" if self.view == "all" else f" · showing {self.view.replace('_', '-')} ({self.row_count})"
        self.border_title = f"Trials {n}{shown} · sort: {self.sort_by}"
        self._subtitle()

    def _subtitle(self) -> None:
        """The selected trial's failure in full under the table (its column is narrow)."""
        t = self.trial_at_cursor()
        why = " ".join(clean(_why(t)).split()) if t is not None else ""
        self.border_subtitle = escape(why[:200]) if why else ""     # border text is markup: escape

    # --- drawing ------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            return self._strip([Text(label) for _, label in COLUMNS], width, HEADER_STYLE)
        i = int(self.scroll_y) + y - 1
        key = self._key_at(i)
        t = self.state.trials.get(key) if key is not None and self.state is not None else None
        if t is None:
            return Strip.blank(width, self.rich_style)
        strip = self._strip(cells(t), width)
        if i == self.cursor:
            strip = strip.apply_style(CURSOR_STYLE if self.has_focus else BLUR_CURSOR_STYLE)
        return strip

    def _strip(self, row, width: int, style: Optional[Style] = None) -> Strip:
        """Cells padded to their column's width (one space each side), cut to the view."""
        segs: list[Segment] = []
        console = self.app.console
        for text, w in zip(row, self._widths):
            t = text.copy()
            t.truncate(w, overflow="ellipsis", pad=True)
            if t.style:               # render() leaves a Text's own style out: make it a span
                t.spans.insert(0, Span(0, len(t), t.style))
                t.style = ""
            segs.append(Segment(" "))
            segs.extend(t.render(console))
            segs.append(Segment(" "))
        x = int(self.scroll_x)
        strip = Strip(segs).crop(x, x + width).adjust_cell_length(width, self.rich_style)
        return strip.apply_style(style) if style else strip

    def _column_at(self, x: int) -> Optional[str]:
        edge = -int(self.scroll_x)
        for (key, _), w in zip(COLUMNS, self._widths):
            edge += w + 2
            if x < edge:
                return key
        return COLUMNS[-1][0]

    # --- moving -------------------------------------------------------------------------
    def _move(self, i: int, scroll: bool = True) -> None:
        self.cursor = max(0, min(i, len(self._order) - 1))
        self._subtitle()
        if not scroll:
            self.refresh()
            return
        rows = max(1, self.scrollable_content_region.height - 1)      # the header takes a line
        top = int(self.scroll_y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + rows:
            self.scroll_to(y=self.cursor - rows + 1, animate=False, immediate=True)
        self.refresh()

    def action_cursor(self, step: int) -> None:
        self._move(self.cursor + step)

    def action_page(self, step: int) -> None:
        self._move(self.cursor + step * max(1, self.scrollable_content_region.height - 2))

    def action_edge(self, end: int) -> None:
        self._move(len(self._order) - 1 if end else 0)

    def action_choose(self) -> None:
        t = self.trial_at_cursor()
        if t is not None:
            self.post_message(self.Chosen(self, t))

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return                               # on the border
        x, y = offset
        if y == 0:                               # the header: sort by that column
            by = {"status": "status", "reward": "reward", "tokens": "tokens"}.get(self._column_at(x) or "", "key")
            self.set_sort(by)
            return
        i = int(self.scroll_y) + y - 1
        if i < len(self._order):
            self._move(i)
            self.action_choose()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    # --- user actions -------------------------------------------------------------------
    def set_view(self, view: str) -> None:
        self.view = view
        self.rebuild(self.state)

    def set_sort(self, by: str) -> None:
        self.sort_by = by
        self.rebuild(self.state)

    def action_open_cause(self) -> None:
        t = self.trial_at_cursor()
        if t is not None:
            self.app.open_trial_cause(t)   # type: ignore[attr-defined]

    def action_cycle_filter(self) -> None:
        self.set_view(FILTERS[(FILTERS.index(self.view) + 1) % len(FILTERS)])

    def action_cycle_sort(self) -> None:
        self.set_sort(SORTS[(SORTS.index(self.sort_by) + 1) % len(SORTS)])

    def trial_at_cursor(self) -> Optional[Trial]:
        key = self._key_at(self.cursor)
        return self.state.trials.get(key) if key is not None and self.state is not None else None

    def row_cells(self, i: int) -> tuple[Text, ...]:
        """The cells row `i` shows (tests and screenshots read the table through this)."""
        key = self._key_at(i)
        if key is None or self.state is None:
            raise IndexError(i)
        return cells(self.state.trials[key])

    def cell(self, key: TrialKey, column: str) -> Text:
        """What trial `key`'s row shows in `column` (a key of COLUMNS)."""
        assert self.state is not None
        return cells(self.state.trials[key])[[c for c, _ in COLUMNS].index(column)]

    def index_of(self, key: TrialKey) -> Optional[int]:
        return self._index_of(key) if key in self._sv else None

    def select(self, key: TrialKey) -> bool:
        if key not in self._sv:
            return False
        self._move(self._index_of(key))
        return True
