"""The trials table: a virtual list over the run state, drawing only the rows on screen.

A Textual DataTable keeps a styled copy of every cell and measures each one it is given: a big
run took a lot of memory and long to fill, and a poll touching many rows long to repaint
(benchmarks/README.md, screen).
Here a row is just its trial's key in a sorted list; its cells are made when it is drawn.
"""

from __future__ import annotations

import bisect
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Optional

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

from ..core.health import disagreement
from ..core.model import T_COMPLETED, T_FAILED, T_MISSING, T_NEVER_RAN, T_PENDING, GymHealth, RunState, Trial, TrialKey
from ..core.sanitize import clean
from .fmt import GYM_HEALTH_LOOK, STATUS_LOOK, ComponentLooks, plain, reward
from .geometry import KEEP, fit_columns

COLUMNS = (("task", "Task"), ("rollout", "Roll"), ("attempt", "Att"), ("status", "Status"),
           ("gym", "Gym"), ("reward", "Reward"), ("tokens", "Tokens in/out"), ("why", "Failure"))
ALL, BY_KEY = "all", "key"      # the filter that keeps every trial; the sort by (task, rollout)
REWARD_0, WRONG = "reward_0", "wrong"
FILTERS = (ALL, T_FAILED, T_NEVER_RAN, T_MISSING, T_PENDING, REWARD_0, WRONG)   # "all", a status, or one of two
# "Why did 30 trials score 0?": reward_0 lists every trial with a 0 reward (recorded, or withheld
# because it never ran) so their statuses tell them apart; wrong: completed, answered, scored 0.
FILTER_WORDS = {REWARD_0: "reward 0", WRONG: "completed but 0", T_NEVER_RAN: "never-ran"}
SORTS = (BY_KEY, "status", "reward", "tokens")
SEVERITY = {T_NEVER_RAN: 0, T_FAILED: 1, T_MISSING: 2, T_PENDING: 3, T_COMPLETED: 4}
NEEDS_A_LOOK = (T_FAILED, T_NEVER_RAN, T_MISSING)    # the trials `]` goes through, in key order
WHY_MAX = 100           # characters of a failure shown in its cell
FAILURE_LINES = 4       # lines under the rows for the selected failure when the border cannot hold it
BORDER_TEXT = 6         # cells of the bottom border round its text: corners, a line and a space each side
RESORT_SHARE = 16       # more changed trials than rows / this: sort the whole list again


def sort_value(t: Trial, by: str) -> tuple:
    k = (t.task_index, t.rollout_index)
    if by == "status":
        return (SEVERITY.get(t.status, 9),) + k
    if by == "reward":
        return (t.reward is None, -(t.reward or 0.0)) + k
    if by == "tokens":
        return (-((t.input_tokens or 0) + (t.output_tokens or 0)),) + k
    return k


class Desc(tuple):
    """A sort value that sorts the other way (bisect and sorted only use `<`)."""

    def __lt__(self, other):
        return tuple.__gt__(self, other)


def _reward(t: Trial) -> str:
    if t.status == T_NEVER_RAN:
        return "withheld" + (f" ({t.withheld_reward:g})" if t.withheld_reward is not None else "")
    return reward(t.reward)


def _tokens(t: Trial) -> str:
    if t.input_tokens is None and t.output_tokens is None:
        return ""
    return f"{t.input_tokens if t.input_tokens is not None else '-'}/" \
           f"{t.output_tokens if t.output_tokens is not None else '-'}"


def _why(t: Trial) -> str:
    head = " ".join(x for x in (t.failure_class, f"HTTP {t.http_status}" if t.http_status else "") if x)
    why = head + (": " if head and t.message else "") + t.message
    if t.status == T_NEVER_RAN and not why:
        why = "model never called (empty output, zero usage)"
    if t.status == T_MISSING and not why:
        why = "no row: the collector ended without it"
    return why


def _attempt(t: Trial) -> str:
    """The attempt the status comes from, and how many were seen when more than one."""
    att = "" if t.attempt_index is None else str(t.attempt_index)
    if t.earlier:
        att += f" ×{len(t.earlier) + 1}"
    return att.strip()


def _gym(t: Trial, gym: Optional[GymHealth]) -> Text:
    """Gym's own health verdict on the trial; `≠` where it disagrees with gymwatch's status."""
    if gym is None:
        return Text("")
    label, style = GYM_HEALTH_LOOK.get(gym.verdict, (gym.verdict, ""))
    if disagreement(t.status, gym):
        return Text(f"≠ {label}", style="bold yellow")
    return Text(label, style=style)


def cells(t: Trial, gym: Optional[GymHealth] = None) -> tuple[Text, ...]:
    """A trial's row, one Text a column (untrusted text through `plain`: never markup)."""
    label, style, row_style = STATUS_LOOK.get(t.status, (t.status, "", ""))
    return (Text(str(t.task_index), style=row_style), Text(str(t.rollout_index), style=row_style),
            Text(_attempt(t), style=row_style), Text(label, style=style), _gym(t, gym),
            Text(_reward(t), style=row_style), Text(_tokens(t), style=row_style),
            plain(_why(t), WHY_MAX, row_style))


class TrialsTable(ComponentLooks, ScrollView, can_focus=True):
    """A virtual list of the run's trials. Enter or a click posts Chosen, `l` CauseRequested; the
    app acts on them and hands the state down in `rebuild()` / `update()`.

    What needs a look comes first: until the user moves the cursor it sits on the first failed,
    never-ran or missing trial (the first `]` goes to), that row at the top of the view, and the
    title says how many there are and which keys reach them. The selected trial's failure is
    shown whole: in the bottom border when it fits there, else wrapped under the rows."""

    COMPONENT_CLASSES = {"trials--header", "trials--cursor", "trials--cursor-blurred", "trials--failure"}
    DEFAULT_CSS = """
    TrialsTable { background: $surface; }
    TrialsTable:focus { background-tint: $foreground 3%; }
    TrialsTable > .trials--header { text-style: bold; }
    TrialsTable > .trials--cursor { background: $primary 50%; }
    TrialsTable > .trials--cursor-blurred { background: $block-cursor-blurred-background; }
    TrialsTable > .trials--failure { background: $boost; }
    """
    BINDINGS = [
        Binding("v", "cycle_filter", "Filter", id="trials.filter"),
        Binding("s", "cycle_sort", "Sort", id="trials.sort"),
        Binding("S", "reverse_sort", "Reverse sort", show=False, id="trials.reverse-sort"),
        Binding("l", "open_cause", "Cause log", id="trials.cause-log"),
        Binding("up,k", "cursor(-1)", "Up", show=False, id="trials.up"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="trials.down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="trials.page-up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="trials.page-down"),
        Binding("home,g", "edge(0)", "First trial", show=False, id="trials.first"),
        Binding("end,G", "edge(1)", "Last trial", show=False, id="trials.last"),
        Binding("enter", "choose", "Open trial", show=False, id="trials.open"),
        Binding("left", "scroll_left", "Scroll left", show=False, id="trials.scroll-left"),
        Binding("right", "scroll_right", "Scroll right", show=False, id="trials.scroll-right"),
        Binding("ctrl+pageup", "page_left", "Page left", show=False, id="trials.page-left"),
        Binding("ctrl+pagedown", "page_right", "Page right", show=False, id="trials.page-right"),
    ]

    @dataclass
    class Chosen(Message):
        """Enter (or a click) on a trial: show what is behind it (its card)."""

        table: TrialsTable
        trial: Trial

        @property
        def control(self) -> TrialsTable:
            return self.table

    @dataclass
    class CauseRequested(Message):
        """`l` on a trial: show the log line where its cause is."""

        table: TrialsTable
        trial: Trial

        @property
        def control(self) -> TrialsTable:
            return self.table

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.state: Optional[RunState] = None
        self.filter_by = ALL        # a FILTERS name
        self.sort_by = BY_KEY
        self.descending = False
        self.cursor = 0
        self.picked = False         # the user moved the cursor: it is theirs, no longer put on a problem
        self.keys_told = ("]", "v")  # the keys the title names: next failure, filter (the keymap's)
        # Held while a rebuild walks the state (the screen's: a poll may be writing it in a thread).
        # Not `lock`: that is Textual's own, an asyncio lock its batch() and recompose() take.
        self.state_lock: AbstractContextManager = nullcontext()
        self._problems: set[TrialKey] = set()              # failed, never-ran and missing trials, filtered or not
        self._first: Optional[TrialKey] = None             # the least of them (None: to be found again)
        self._failure: list[Text] = []                     # the selected failure's lines under the rows
        self._order: list[tuple[tuple, TrialKey]] = []     # (sort value, key) of the rows, sorted
        self._sv: dict[TrialKey, tuple] = {}               # key -> its sort value in _order
        self._widths = [len(label) for _, label in COLUMNS]   # grow with the widest cell seen
        self._filled = [False] * len(COLUMNS)                 # columns some row has text in
        self._shown, self._fit = list(range(len(COLUMNS))), list(self._widths)   # geometry.fit_columns

    def on_mount(self) -> None:
        self._title()

    # --- the rows -----------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self._order)

    def rebuild(self, state: Optional[RunState]) -> None:
        """All rows again: on a reset, or a filter or sort change."""
        here = self.key_at(self.cursor)
        new_model = state is not self.state and state is not None
        self.state = state           # before sizing: a cell's width reads the model (Gym's verdicts)
        with self.state_lock:
            if new_model:                # a new model: size the columns
                assert state is not None     # new_model says so
                self._widths = [len(label) for _, label in COLUMNS]
                self._filled = [False] * len(COLUMNS)
                for t in state.trials.values():
                    self._widen(t)
            every = state.trials.values() if state is not None else ()
            self._problems = {t.key for t in every if t.status in NEEDS_A_LOOK}
            trials = [t for t in every if self._kept(t)]
            self._sv = {t.key: self._value(t) for t in trials}
        self._first = None
        self._order = sorted((v, k) for k, v in self._sv.items())
        self._after_change(here, scroll=True)        # a user's sort or filter: show the cursor

    def update(self, state: RunState, changed: set[TrialKey], removed: set[TrialKey]) -> None:
        """A poll's changes: rows move, appear and go; nothing else is touched."""
        here = self.key_at(self.cursor)
        self.state = state
        for key in removed:
            self._drop(key)
            self._not_a_problem(key)
        if len(changed) > max(64, len(self._order) // RESORT_SHARE):
            for key in changed:
                self._place(key, state.trials.get(key), resort=False)
            self._order = sorted((v, k) for k, v in self._sv.items())
        else:
            for key in changed:
                self._place(key, state.trials.get(key), resort=True)
        self._after_change(here)

    def _place(self, key: TrialKey, t: Optional[Trial], resort: bool) -> None:
        if t is not None and t.status in NEEDS_A_LOOK:
            self._problems.add(key)
            if self._first is not None and key < self._first:
                self._first = key
        else:
            self._not_a_problem(key)
        if t is None or not self._kept(t):
            self._drop(key)
            return
        self._widen(t)
        new = self._value(t)
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
        """Keep the cursor on its trial (rows above it may have come or gone), or on the first
        trial that needs a look while the user has not moved it; redraw."""
        self._fit_columns()
        self._set_virtual_size()
        first = self._first_problem()
        if first is not None and first != self.cursor:
            self._move(first)
            self._scroll_to_row(first)            # at the top: the rows after it show too
        else:
            i = self.index_of(here) if here is not None else None
            if i is not None:
                self._move(i, scroll=scroll)
            else:
                self.cursor = max(0, min(self.cursor, len(self._order) - 1))
                self._show_failure()
        self.refresh()
        self._title()

    def _set_virtual_size(self) -> None:
        """The rows, their header and the selected failure's lines under them."""
        self.virtual_size = Size(sum(self._fit) + 2 * len(self._fit), len(self._order) + 1 + len(self._failure))

    def _not_a_problem(self, key: TrialKey) -> None:
        self._problems.discard(key)
        if key == self._first:
            self._first = None

    def _first_problem(self) -> Optional[int]:
        """The row of the first trial that needs a look, while the cursor is not the user's."""
        if self.picked or not self._problems:
            return None
        if self._first is None:
            self._first = min(self._problems)
        return self.index_of(self._first)

    def _scroll_to_row(self, i: int) -> None:
        # forced: before the first layout the view's height is 0 and Textual would drop it
        self.scroll_to(y=i, animate=False, immediate=True, force=True)

    def _widen(self, t: Trial) -> None:
        w = self._widths
        label = STATUS_LOOK.get(t.status, (t.status,))[0]
        why = min(len(_why(t)), WHY_MAX)
        gym = len(_gym(t, self.state.health.get(t.key)).plain) if self.state is not None else 0
        for i, n in enumerate((len(str(t.task_index)), len(str(t.rollout_index)), len(_attempt(t)), len(label),
                               gym, len(_reward(t)), len(_tokens(t)), why)):
            if n > w[i]:
                w[i] = n
            if n:
                self._filled[i] = True

    def key_at(self, i: int) -> Optional[TrialKey]:
        """The trial row `i` shows (None past the last row)."""
        return self._order[i][1] if 0 <= i < len(self._order) else None

    def _kept(self, t: Trial) -> bool:
        """Does the filter keep `t`?"""
        if self.filter_by == REWARD_0:
            return t.reward == 0 or (t.reward is None and t.withheld_reward == 0)
        if self.filter_by == WRONG:
            return t.status == T_COMPLETED and t.reward == 0
        return self.filter_by == ALL or t.status == self.filter_by

    def _value(self, t: Trial) -> tuple:
        v = sort_value(t, self.sort_by)
        return Desc(v) if self.descending else v

    def _title(self) -> None:
        n = len(self.state.trials) if self.state else 0
        if self.filter_by != ALL:
            shown = f" · showing {FILTER_WORDS.get(self.filter_by, self.filter_by)} ({self.row_count})"
        elif self._problems:
            following, only = self.keys_told
            shown = f" · {len(self._problems)} need a look: {following} next, {only} filter"
        else:
            shown = ""
        self.border_title = escape(f"Trials {n}{shown} · sort: {self.sort_by}{' (reversed)' if self.descending else ''}")

    def _show_failure(self) -> None:
        """The selected trial's failure whole (its column is narrow): in the bottom border when it
        fits there, else in lines under the rows (FAILURE_LINES at most; the card has the rest)."""
        t = self.trial_at_cursor()
        why = " ".join(clean(_why(t)).split()) if t is not None else ""
        width = self.scrollable_content_region.width
        lines: list[Text] = []
        if len(why) <= max(0, self.outer_size.width - BORDER_TEXT) or width <= 0:
            self.border_subtitle = escape(why)       # border text is markup: escape
        else:
            self.border_subtitle = ""
            room = max(1, width - 2)                 # a space each side, as the cells have
            lines = list(Text(why).wrap(self.app.console, room))
            cap = self._failure_room()
            if len(lines) > cap:
                lines = lines[:cap]
                lines[-1].truncate(room - 1)
                lines[-1].append("…")
        if [x.plain for x in lines] != [x.plain for x in self._failure]:
            self._failure = lines
            self._set_virtual_size()
            self.refresh()

    def _failure_room(self) -> int:
        """Lines the failure may take under the rows: FAILURE_LINES, but never the selected row's
        own line (the header and that row stay; on a short pane the card has the rest)."""
        height = self.scrollable_content_region.height
        return FAILURE_LINES if height <= 0 else max(1, min(FAILURE_LINES, height - 2))

    # --- drawing ------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            return self._strip([Text(label) for _, label in COLUMNS], width, self.look("trials--header"))
        under = y - (self.scrollable_content_region.height - len(self._failure))
        if 0 <= under < len(self._failure):
            line = Text.assemble(" ", self._failure[under])
            line.pad_right(width - line.cell_len)
            return Strip(line.render(self.app.console), width).apply_style(self.look("trials--failure"))
        i = int(self.scroll_y) + y - 1
        key = self.key_at(i)
        if key is None or self.state is None or (t := self.state.trials.get(key)) is None:
            return Strip.blank(width, self.rich_style)
        strip = self._strip(cells(t, self.state.health.get(t.key)), width)
        if i == self.cursor:
            strip = strip.apply_style(self.look("trials--cursor" if self.has_focus else "trials--cursor-blurred"))  # under the cells' colours
        return strip

    def _strip(self, row, width: int, style: Optional[Style] = None) -> Strip:
        """Cells padded to their column's width (one space each side), cut to the view."""
        segs: list[Segment] = []
        console = self.app.console
        for i, w in zip(self._shown, self._fit, strict=True):
            t = row[i].copy()
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
        for i, w in zip(self._shown, self._fit, strict=True):
            edge += w + 2
            if x < edge:
                return COLUMNS[i][0]
        return COLUMNS[-1][0]

    # --- fitting the pane (geometry.py decides) ---------------------------------------------
    def _fit_columns(self) -> None:
        self._shown, self._fit = fit_columns([k for k, _ in COLUMNS], self._widths, self._filled,
                                             self.scrollable_content_region.width)

    def natural_width(self) -> int:
        """Columns this pane needs to show every column some row fills, whole (borders and the
        scrollbar in): what geometry.fit_trials sizes it to, room allowing."""
        cols = [w + 2 for (key, _), w, f in zip(COLUMNS, self._widths, self._filled, strict=True) if f or key in KEEP]
        bar = self.styles.scrollbar_size_vertical if self.row_count + 1 > self.scrollable_content_region.height else 0
        return sum(cols) + 2 + bar

    def on_resize(self) -> None:
        self._after_change(self.key_at(self.cursor), scroll=True)
        if self._first_problem() == self.cursor:
            self._scroll_to_row(self.cursor)      # still the screen's choice: at the top, now it has a height

    # --- moving -------------------------------------------------------------------------
    @property
    def rows_shown(self) -> int:
        """Rows of trials the view has room for (the header and the failure's lines take theirs)."""
        return max(1, self.scrollable_content_region.height - 1 - len(self._failure))

    def _move(self, i: int, scroll: bool = True) -> None:
        self.cursor = max(0, min(i, len(self._order) - 1))
        self._show_failure()
        if not scroll:
            self.refresh()
            return
        rows = self.rows_shown
        top = int(self.scroll_y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + rows:
            self.scroll_to(y=self.cursor - rows + 1, animate=False, immediate=True)
        self.refresh()

    def _pick(self, i: int) -> None:
        """The user moves the cursor: from now on it is theirs."""
        self.picked = True
        self._move(i)

    def action_cursor(self, step: int) -> None:
        self._pick(self.cursor + step)

    def action_page(self, step: int) -> None:
        self._pick(self.cursor + step * max(1, self.rows_shown - 1))

    def action_edge(self, end: int) -> None:
        self._pick(len(self._order) - 1 if end else 0)

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
            by = {"status": "status", "reward": "reward", "tokens": "tokens"}.get(self._column_at(x) or "", BY_KEY)
            self.set_sort(by)
            return
        if y > self.rows_shown:                  # the failure under the rows: the card has it all
            self.action_choose()
            return
        i = int(self.scroll_y) + y - 1
        if i < len(self._order):
            self._pick(i)
            self.action_choose()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    # --- user actions -------------------------------------------------------------------
    def set_filter(self, by: str) -> None:
        self.filter_by = by
        self.rebuild(self.state)

    def set_sort(self, by: str) -> None:
        self.sort_by = by
        self.rebuild(self.state)

    def action_open_cause(self) -> None:
        t = self.trial_at_cursor()
        if t is not None:
            self.post_message(self.CauseRequested(self, t))

    def action_cycle_filter(self) -> None:
        self.set_filter(FILTERS[(FILTERS.index(self.filter_by) + 1) % len(FILTERS)])

    def action_cycle_sort(self) -> None:
        self.set_sort(SORTS[(SORTS.index(self.sort_by) + 1) % len(SORTS)])

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self.rebuild(self.state)

    def trial_at_cursor(self) -> Optional[Trial]:
        key = self.key_at(self.cursor)
        return self.state.trials.get(key) if key is not None and self.state is not None else None

    def row_cells(self, i: int) -> tuple[Text, ...]:
        """The cells row `i` shows (tests and screenshots read the table through this)."""
        key = self.key_at(i)
        if key is None or self.state is None:
            raise IndexError(i)
        return cells(self.state.trials[key], self.state.health.get(key))

    def cell(self, key: TrialKey, column: str) -> Text:
        """What trial `key`'s row shows in `column` (a key of COLUMNS)."""
        assert self.state is not None
        return cells(self.state.trials[key], self.state.health.get(key))[[c for c, _ in COLUMNS].index(column)]

    def index_of(self, key: TrialKey) -> Optional[int]:
        """The row showing trial `key`; None when the filter leaves it out."""
        if key not in self._sv:
            return None
        return bisect.bisect_left(self._order, (self._sv[key], key))

    def select(self, key: TrialKey) -> bool:
        """Put the cursor on trial `key` for the user (`]`, a trial chosen elsewhere)."""
        i = self.index_of(key)
        if i is None:
            return False
        self._pick(i)
        return True
