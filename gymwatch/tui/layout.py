"""The live screen on any terminal, 80x24 to 250 columns: breakpoints, pane sizes, maximize, wrap.

- Below NARROW columns the trials and log panes stack (CSS on the screen's `-narrow` class, set by
  Textual's breakpoints); from NARROW on they sit side by side.
- Panes are sized to their content: the trials pane is as wide as its columns need, up to what
  leaves the log pane LOG_MIN columns (or LOG_SHARE of the screen); a run without trials has no
  trials pane at all; stacked, it is as tall as its rows, up to half the room.
- The trials table drops columns by priority when its pane is narrow (empty ones always), and its
  Failure column takes the width that is left (see `fit_columns`).
- The readiness board does the same (`fit_board`): its Server column as wide as the longest name
  (capped when room is short), the phase next, then the columns that help least go; it is as tall
  as its rows where the screen allows (`board_rows`), and the selected server's name and phase are
  shown whole under it when its row cuts them (unless the summary above already says them whole).
- `z` maximizes the focused pane (again, or escape, restores): the board then fills the screen
  with its phases wrapped whole in their rows; `w` wraps long log lines.
- The footer shows the few global keys first, then the focused pane's own (`MainScreen`).
- Toasts show top right, under the verdict and the counts (never over them); on a small screen
  (below SHORT rows or NARROW columns) one at a time, the newest replacing the others.
- The keymap file (keymap.py) is applied once the screen is up; its problems are warnings.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from textual.app import App
from textual.binding import Binding, BindingsMap
from textual.notifications import Notify
from textual.css.scalar import Scalar
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer

from . import keymap
from .card import TrialCard

NARROW = 100            # columns: below this the panes stack
SHORT = 30              # rows: below this the board shows fewer rows
LOG_MIN, LOG_SHARE = 48, 0.42
WHY_MIN = 24            # the trials' Failure column is never squeezed below this while others can go
# Trials columns, least needed first: dropped in this order when the pane is too narrow.
DROP_ORDER = ("tokens", "attempt", "gym", "reward")
KEEP = ("task", "rollout", "status", "why")
# The readiness board's columns (board.py), least needed first: dropped in this order when the
# board is narrow. The others always stay: Err too (a count is what says a server has errors).
BOARD_DROP = ("last", "ttr", "limit", "in", "kind")
BOARD_KEEP = ("server", "state", "why", "err")
WHOLE_DROP = 3          # ... of which only these go to show a phase whole (the title has the spin-up clock)
SERVER_CAP = 24         # the Server column when room is short (the line under the board names it whole)
PHASE_MIN, PHASE_SHARE = 24, 0.3    # the phase is not squeezed below this, or this share of the board
LAST_MIN = 24           # the last log line is shown only with this much room beside a whole phase
LOG_ROOM = 6            # rows a board without trials beside it leaves the log pane (3 lines of log)
BOARD_SHARE = 0.4       # share of the rows the board may take when there are trials too


def fit_columns(keys: Sequence[str], widths: Sequence[int], filled: Sequence[bool],
                avail: int) -> tuple[list[int], list[int]]:
    """Which trials columns to show in `avail` cells, and the width each gets (one space of
    padding each side is added by the table). Columns no row has text in go first, as soon as
    the failure column would be cut; then DROP_ORDER's, while it would get less than WHY_MIN.
    The last column (the failure) takes what is left."""
    shown = list(range(len(keys)))
    last = len(keys) - 1

    def need(cols: list[int]) -> int:
        return sum(widths[i] + 2 for i in cols if i != last) + 2

    if avail > 0:
        for i in [i for i, k in enumerate(keys) if not filled[i] and k not in KEEP]:
            if avail - need(shown) < widths[last]:
                shown.remove(i)
        for key in DROP_ORDER:
            i = keys.index(key)
            if avail - need(shown) >= min(WHY_MIN, widths[last]):
                break
            if i in shown:
                shown.remove(i)
    out = [widths[i] for i in shown]
    if avail > 0 and last in shown:
        room = avail - need(shown)
        out[-1] = max(min(widths[last], room), min(WHY_MIN, widths[last]), len("Failure"))
    return shown, out


def fit_board(keys: Sequence[str], widths: Mapping[str, int], filled: Mapping[str, bool],
              avail: int) -> tuple[list[str], dict[str, int]]:
    """Which board columns to show in `avail` cells, and each one's width (one space of padding
    each side is added by the table); their widths and paddings add up to `avail`, so the board
    never scrolls sideways. `widths` are what each column's cells and label need whole.

    The phase ("why") comes first: whole if dropping the last line and the time to ready (or
    capping the Server column at SERVER_CAP) is enough, else at least PHASE_MIN (or PHASE_SHARE
    of the board) while BOARD_DROP's columns can go. It takes the width the others leave; the
    last line is shown only beside a whole phase, with LAST_MIN cells or more. Columns no row
    fills go first."""
    cols = [k for k in keys if filled.get(k) or k in BOARD_KEEP]
    why = max(1, widths.get("why", 0))
    full = widths.get("server", 0)
    capped = min(full, SERVER_CAP)
    if avail <= 0:
        return cols, {k: widths.get(k, 0) for k in cols}

    def plan(shown: list[str], server: int) -> Optional[dict[str, int]]:
        out = {k: server if k == "server" else widths.get(k, 0) for k in shown}
        room = avail - sum(w + 2 for k, w in out.items() if k not in ("why", "last")) - 2
        if "last" in shown:
            out["why"], out["last"] = why, room - why - 2
            return out if out["last"] >= LAST_MIN else None
        out["why"] = room
        return out

    target = min(why, max(PHASE_MIN, int(avail * PHASE_SHARE)))
    for want, drops in ((why, WHOLE_DROP), (target, len(BOARD_DROP))):
        for n in range(drops + 1):
            shown = [k for k in cols if k not in BOARD_DROP[:n]]
            for server in dict.fromkeys((full, capped)):
                out = plan(shown, server)
                if out is not None and out["why"] >= want:
                    return shown, out
    shown = [k for k in cols if k not in BOARD_DROP]
    out = plan(shown, capped) or {}
    out["why"] = max(1, out.get("why", 1))
    return shown, out


def board_rows(needed: int, room: int, with_trials: bool) -> int:
    """Lines of the board's table (its header included) to show: all `needed` where `room` (the
    lines left under the summary, above the footer, for the board's table and the panes below)
    allows. Without trials the log pane keeps LOG_ROOM lines; with them, the board takes at most
    BOARD_SHARE of the room. Never less than a header and two rows."""
    cap = room - LOG_ROOM if not with_trials else int(room * BOARD_SHARE)
    return max(3, min(needed, cap))


def trials_width(natural: int, screen: int) -> int:
    """Columns of the trials pane side by side with the log: what its content needs, leaving the
    log pane LOG_MIN columns or LOG_SHARE of the screen, whichever is more."""
    room = screen - max(LOG_MIN, int(screen * LOG_SHARE))
    return max(30, min(natural, room))


class MainScreen(Screen):
    """The default screen, its own keys given ids (the keymap file can move them too).

    Its active bindings list the app's and the screen's first, then the focused pane's: the
    footer shows them in that order, so the few global keys are never pushed off its right edge
    by a pane with many keys (Textual's own order is the focused widget's first)."""

    BINDINGS = [
        Binding("tab", "app.focus_next", "Next pane", show=False, id="gymwatch.next-pane"),
        Binding("shift+tab", "app.focus_previous", "Previous pane", show=False, id="gymwatch.prev-pane"),
        Binding("ctrl+c,super+c", "screen.copy_text", "Copy selected text", show=False, id="gymwatch.copy"),
    ]

    @property
    def active_bindings(self):
        bindings = super().active_bindings
        first = {k: b for k, b in bindings.items() if isinstance(b.node, (App, Screen))}
        return first | {k: b for k, b in bindings.items() if k not in first}


class ResponsiveLayout:
    """A mixin of GymwatchApp: pane fitting, maximize / wrap actions, the keymap file.

    Needs from the app: board, trials, pane (set in its on_mount, which calls `layout_mount`).
    The breakpoints and the z / w / escape bindings are on the app class (Textual reads
    BINDINGS only from DOM classes)."""

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (SHORT, "-tall")]

    def get_default_screen(self) -> Screen:
        return MainScreen(id="_default")

    def layout_mount(self) -> None:
        self.keymap_problems: list[str] = []
        self.load_keymap()
        self.watch(self.trials, "virtual_size", lambda _: self.fit_panes(), init=False)
        self.watch(self.board, "virtual_size", lambda _: self.call_after_refresh(self.fit_panes), init=False)
        self.watch(self.screen, "maximized", self._maximized_changed, init=False)
        self.call_after_refresh(self.fit_panes)

    def load_keymap(self) -> None:
        """The user's keymap file over the bindings' ids; each problem a warning of one line."""
        known = {b.id for _, b in all_bindings(self) if b.id}
        self.keymap_path, mapping, self.keymap_problems = keymap.load(known)
        if mapping:
            self.set_keymap(mapping)
        if self.keymap_problems:       # together: a small screen shows one toast at a time
            self.notify("\n".join(self.keymap_problems), title="keymap", severity="warning", markup=False,
                        timeout=10)
        keys = {b.id: self.get_key_display(b) for _, b in all_bindings(self) if b.id}  # type: ignore[attr-defined]
        self.trials.keys_told = (keys.get("gymwatch.next-failure", "]"), keys.get("trials.filter", "v"))  # type: ignore[attr-defined]

    def set_keymap(self, keymap_: dict[str, str]) -> None:
        """Textual's, an old binding id (keymap.ALIASES) taken as the id its binding has now."""
        super().set_keymap(keymap.current_ids(dict(keymap_)))  # type: ignore[misc]

    def on_resize(self, event) -> None:
        self.call_after_refresh(self.fit_panes)

    @property
    def narrow(self) -> bool:
        return self.size.width < NARROW

    @property
    def small(self) -> bool:
        return self.narrow or self.size.height < SHORT

    def on_notify(self, event: Notify) -> None:
        """A small screen shows one toast at a time: the new one replaces the others (App's own
        handler adds it after this one)."""
        if self.small:
            for holder in self.screen.query("ToastRack > *"):    # Textual would leave them, a line each
                holder.remove()
            self.clear_notifications()

    def _place_toasts(self) -> None:
        """Toasts start under the summary's first line(s), the verdict and the counts."""
        top = self.summary.items_height()
        for rack in self.screen_stack[0].query("ToastRack"):
            if rack.styles.margin.top != top:
                rack.styles.margin = (top, 0, 0, 0)

    def fit_panes(self) -> None:
        """Size the trials pane to its content (or hide it when the run has no trials), the board
        to its rows, and the footer to the width. Called after every poll: a style is set only
        when it changes (each set lays the screen out again; `styles.X` reads the stylesheet's
        value too, so an inline rule is cleared only when there is one)."""
        trials = getattr(self, "trials", None)
        if trials is None or not trials.is_attached:
            return
        empty = trials.state is None or not trials.state.trials
        trials.set_class(empty, "-empty")
        if empty and trials.has_focus:
            self.board.focus()
        self._fit_board(not empty)
        self._place_toasts()
        for footer in self.screen_stack[0].query(Footer):
            footer.compact = self.narrow
        if self.narrow or empty or trials.is_maximized:
            if trials.styles.inline.has_rule("width"):
                trials.styles.width = None      # the stylesheet's: full width, stacked or maximized
            return
        want = trials_width(trials.natural_width(), self.size.width)
        if trials.styles.width is None or trials.styles.width.value != want:
            trials.styles.width = want

    def _fit_board(self, with_trials: bool) -> None:
        """The board's table as tall as its rows where the screen allows (board_rows); all of
        the screen when it is maximized."""
        board = self.board
        pane = board.parent
        if not isinstance(pane, Widget):
            return
        if pane.is_maximized:
            board.styles.height, board.styles.max_height = "1fr", "100%"
            return
        below = self.screen_stack[0].query(Footer)
        footer = below.first().outer_size.height if below else 0
        chrome = pane.outer_size.height - board.outer_size.height     # its border, the detail line
        room = self.size.height - self.summary.outer_size.height - footer - chrome
        rows = board_rows(board.virtual_size.height, room, with_trials)
        if board.styles.inline.has_rule("height"):
            board.styles.height = None          # the stylesheet's: auto
        if board.styles.max_height is None or board.styles.max_height != Scalar.from_number(rows):
            board.styles.max_height = rows

    # --- keys -----------------------------------------------------------------------------
    def focused_pane(self) -> Optional[Widget]:
        """The pane (board, trials, log pane) holding the focus."""
        panes = [w for w in (getattr(self, "board", None), getattr(self, "trials", None),
                             getattr(self, "pane", None)) if w is not None]
        node = self.screen.focused if self.screen is self.screen_stack[0] else None
        while isinstance(node, Widget):
            if node in panes:
                return node
            node = node.parent
        return None

    def action_toggle_maximize(self) -> None:
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
            return
        pane = self.focused_pane()
        if pane is self.board and isinstance(pane.parent, Widget):
            pane = pane.parent            # the board with the line under it
        if pane is not None:
            screen.maximized = pane       # the whole pane: the log's header comes with its view

    def action_restore(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()

    def _maximized_changed(self, maximized: Optional[Widget]) -> None:
        """The board maximized wraps its phases whole in their rows; back, one line each."""
        self.board.wrap = maximized is not None and maximized is self.board.parent
        self.call_after_refresh(self.fit_panes)

    def action_toggle_wrap(self) -> None:
        self.pane.view.action_toggle_wrap()


CARD = "Trial card (enter on a trial)"


def all_bindings(app) -> list[tuple[str, object]]:
    """(section, Binding) of every binding on the live screen, the keymap applied: the screen's
    and the app's (in the order a key is looked up: the screen's ctrl+c comes before the app's),
    then each pane's, then the trial card's (TrialCard.BINDINGS). The help screen lists these;
    the keymap file checks ids here."""
    nodes = [("Everywhere", app.screen_stack[0]._bindings), ("Everywhere", app._bindings),
             ("Servers", _bindings_of(getattr(app, "board", None))),
             ("Trials", _bindings_of(getattr(app, "trials", None))),
             ("Log", _bindings_of(getattr(getattr(app, "pane", None), "view", None))),
             (CARD, BindingsMap(TrialCard.BINDINGS))]
    out = []
    for section, found in nodes:
        if found is None:
            continue
        bindings = found.copy()
        if app._keymap:
            bindings.apply_keymap(app._keymap)
        for _key, group in bindings.key_to_bindings.items():
            out.extend((section, b) for b in group)
    return out


def _bindings_of(node) -> Optional[BindingsMap]:
    return node._bindings if node is not None else None
