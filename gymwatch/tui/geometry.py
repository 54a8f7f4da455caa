"""The live screen's geometry on any terminal, 80x24 to 250 columns: breakpoints, pane sizes,
which columns fit, what `z` maximizes, the footer's order. No behaviour of the screen here: it
calls these (`MainScreen.fit_panes()`) with the panes it owns.

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
- `z` maximizes the focused pane (again, or escape, restores; `maximizable()`): the board then
  fills the screen with its phases wrapped whole in their rows.
- The footer shows the few global keys first, then the focused pane's own (`global_keys_first()`).
- Toasts show top right, under the verdict and the counts (never over them); on a small screen
  (below SHORT rows or NARROW columns) one at a time, the newest replacing the others.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from textual.app import App
from textual.binding import ActiveBinding
from textual.css.scalar import Scalar
from textual.geometry import Size
from textual.screen import Screen
from textual.widget import Widget

NARROW = 100            # columns: below this the panes stack
SHORT = 30              # rows: below this the board shows fewer rows
# Textual's breakpoints (the App's, so that every screen, the help too, gets the classes).
HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW, "-wide")]
VERTICAL_BREAKPOINTS = [(0, "-short"), (SHORT, "-tall")]
LOG_MIN, LOG_SHARE = 48, 0.42
WHY_MIN = 24            # the trials' Failure column is never squeezed below this while others can go
# Trials columns, least needed first: dropped in this order when the pane is too narrow.
DROP_ORDER = ("tokens", "attempt", "gym", "reward")
KEEP = ("task", "rollout", "status", "why")
# The readiness board's columns (board.py), least needed first: dropped in this order when the
# board is narrow. The others always stay: Err too (a count is what says a server has errors).
# (the startup timeline's column first: `t` shows it whole)
BOARD_DROP = ("steps", "last", "ttr", "limit", "in", "kind")
BOARD_KEEP = ("server", "state", "why", "err")
WHOLE_DROP = 4          # ... of which only these go to show a phase whole (the title has the spin-up clock)
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


def is_narrow(size: Size) -> bool:
    """The trials and log panes are stacked (and the footer compact)."""
    return size.width < NARROW


def is_small(size: Size) -> bool:
    """A screen that shows one toast at a time."""
    return is_narrow(size) or size.height < SHORT


def global_keys_first(bindings: Mapping[str, ActiveBinding]) -> dict[str, ActiveBinding]:
    """A screen's active bindings, the app's and the screen's first, then the focused pane's:
    the footer shows them in that order, so the few global keys are never pushed off its right
    edge by a pane with many keys (Textual's own order is the focused widget's first)."""
    first = {k: b for k, b in bindings.items() if isinstance(b.node, App)}
    first |= {k: b for k, b in bindings.items() if isinstance(b.node, Screen) and k not in first}
    return first | {k: b for k, b in bindings.items() if k not in first}


def fit_trials(trials: Widget, natural: int, size: Size, stacked: bool) -> None:
    """The trials pane as wide as its content beside the log (`trials_width`); the stylesheet's
    width when `stacked` (narrow, empty or maximized). A style is set only when it changes: each
    set lays the screen out again (`styles.X` reads the stylesheet's value too, so an inline rule
    is cleared only when there is one)."""
    if stacked:
        if trials.styles.inline.has_rule("width"):
            trials.styles.width = None
        return
    want = trials_width(natural, size.width)
    if trials.styles.width is None or trials.styles.width.value != want:
        trials.styles.width = want


def fit_board_height(board: Widget, pane: Widget, room: int, with_trials: bool) -> None:
    """The board's table (in `pane`, with the line under it) as tall as its rows where `room`
    allows (`board_rows`: `room` is the screen's height less the summary and the footer); all of
    the screen when its pane is maximized."""
    if pane.is_maximized:
        board.styles.height, board.styles.max_height = "1fr", "100%"
        return
    chrome = pane.outer_size.height - board.outer_size.height     # its border, the detail line
    rows = board_rows(board.virtual_size.height, room - chrome, with_trials)
    if board.styles.inline.has_rule("height"):
        board.styles.height = None          # the stylesheet's: auto
    if board.styles.max_height is None or board.styles.max_height != Scalar.from_number(rows):
        board.styles.max_height = rows


def place_toasts(screen: Screen, top: int) -> None:
    """Toasts start `top` lines down: under the summary's verdict and counts."""
    for rack in screen.query("ToastRack"):
        if rack.styles.margin.top != top:
            rack.styles.margin = (top, 0, 0, 0)


def maximizable(pane: Optional[Widget], board: Widget) -> Optional[Widget]:
    """What `z` maximizes for the focused `pane`: the pane whole (the log's header comes with its
    view; the board with the line under it)."""
    if pane is board and isinstance(board.parent, Widget):
        return board.parent
    return pane
