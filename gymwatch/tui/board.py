"""The readiness board: one DataTable row per server, updated cell by cell, and under it the
selected server's name and phase whole when its row cuts them (BoardPane).

Its columns are fitted to its width (geometry.fit_board): the Server column as wide as the longest
name (capped when room is short), the phase whole where dropping the least needed columns allows;
it never scrolls sideways. Maximized (`z`), rows wrap their name and phase whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable, Static

from .. import charts
from ..core import attribution, gymversion, timeline
from ..core.model import EXITED, FAILED, READY, STARTING, RunState, Server, parent_ended
from .fmt import KIND_LABEL, STATE_LOOK, STEP_LOOK, body, duration, plain
from .geometry import fit_board
from .head import Probe

COLUMNS = (("server", "Server"), ("kind", "Kind"), ("state", "State"), ("limit", "Spin-up"),
           ("why", "Phase / why not ready"), ("steps", "Startup"), ("in", "In state"), ("ttr", "To ready"),
           ("err", "Err"), ("last", "Last line"))
SHORT_LABELS = {"why": ("Phase / why not ready", "Phase / why", "Phase"), "last": ("Last line", "Last")}
WHY_WIDTH = 400                     # a phase or reason, whitespace folded; the row cuts it, the line under the board does not
LAST_WIDTH = 90
WHY_AT = [key for key, _ in COLUMNS].index("why")
DETAIL_MAX = 4                      # lines kept for the line under the board (more only when the selected one needs them)
SLOW_FACTOR, SLOW_MIN = 3.0, 60.0   # waiting > 3x the slowest ready sibling, and > 1 min
LIMIT_WARN = 0.75                   # share of Gym's spin-up limit used that flags a waiting server
STEPS_WIDTH = 20                    # the startup column's bar: every server's steps on one time axis


def startup_bars(state: RunState, now: Optional[float]) -> dict[str, Text]:
    """While servers are starting (no critical path yet: none failed, not all ready), each one's
    steps as a bar on the axis they share, from the first step seen to now; {} else, or when no
    step has a time (the run was read after the fact)."""
    st = timeline.startup(state, now)
    if not st.timed or st.critical is not None:
        return {}
    out = {}
    for lane in st.lanes:
        cells = [(" ", "")] * STEPS_WIDTH
        for a, b, sp in charts.lane_cells(st, lane, STEPS_WIDTH):
            for x in range(a, b):
                cells[x] = ("█", STEP_LOOK.get(sp.step, ""))
        bar = Text()
        for ch, style in cells:
            bar.append(ch, style=style)
        out[lane.name] = bar
    return out


class ReadinessBoard(DataTable):
    """One row per server. Moving and choosing rows post DataTable's own RowHighlighted and
    RowSelected; `l` posts LogRequested. The app acts on them; it hands the state down in
    `rebuild()` / `update()`."""

    BINDINGS = [
        Binding("l", "open_log", "Log", id="servers.log"),
        Binding("enter", "select_cursor", "Open its log / evidence", show=False, id="servers.open"),
        Binding("up,k", "cursor_up", "Up", show=False, id="servers.up"),
        Binding("down,j", "cursor_down", "Down", show=False, id="servers.down"),
        Binding("pageup", "page_up", "Page up", show=False, id="servers.page-up"),
        Binding("pagedown", "page_down", "Page down", show=False, id="servers.page-down"),
        Binding("home,g", "first", "First server", show=False, id="servers.first"),
        Binding("end,G", "last", "Last server", show=False, id="servers.last"),
        Binding("left", "cursor_left", "Scroll left", show=False, id="servers.left"),
        Binding("right", "cursor_right", "Scroll right", show=False, id="servers.right"),
        Binding("ctrl+pageup", "page_left", "Page left", show=False, id="servers.page-left"),
        Binding("ctrl+pagedown", "page_right", "Page right", show=False, id="servers.page-right"),
        Binding("ctrl+home", "scroll_top", "First server", show=False, id="servers.top"),
        Binding("ctrl+end", "scroll_bottom", "Last server", show=False, id="servers.bottom"),
    ]

    @dataclass
    class LogRequested(Message):
        """`l` on a server: show its log, even where one of its evidence lines is open."""

        board: ReadinessBoard
        server: str

        @property
        def control(self) -> ReadinessBoard:
            return self.board

    @dataclass
    class DetailChanged(Message):
        """The line under the board: the selected server whole (None: its row shows it all),
        and the lines to keep for it."""

        board: ReadinessBoard
        text: Optional[Text]
        lines: int

        @property
        def control(self) -> ReadinessBoard:
            return self.board

    wrap: reactive[bool] = reactive(False)
    """Rows wrap their server name and phase whole (the board maximized), instead of cutting them."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)
        self._cells: dict[str, tuple] = {}  # every column's cell, shown or not
        self._details: dict[str, Text] = {}  # server -> its name, state and phase whole
        self.probe = Probe()                # the last probe of the head server and its servers (--head)
        self.shown_columns: list[str] = []
        self.widths: dict[str, int] = {}    # each shown column's width (geometry.fit_board)
        self.cut: set[str] = set()          # servers whose row cuts their name or phase
        self._built: tuple = ()             # (columns, widths, wrap) the rows were added with
        self._posted: tuple = ()
        self._told = ""                     # what the screen says above the board (the verdict's reason)

    def on_mount(self) -> None:
        self._title("Servers")

    def _title(self, title: str) -> None:
        """The title of the board's border (its pane's, when it is in one); set only when it
        changes (a title set repaints the border, and the board is updated every tick)."""
        if title == self.border_title:
            return
        self.border_title = title
        if isinstance(self.parent, BoardPane):
            self.parent.border_title = title

    # --- columns fitted to the width (geometry.fit_board) -------------------------------------
    def _pick(self, cells: tuple) -> list:
        return [self._shown(key, c) for (key, _), c in zip(COLUMNS, cells, strict=True) if key in self.shown_columns]

    def _shown(self, key: str, cell: Text) -> Text:
        """A cell as the table gets it: cut with … at its column's width, or (wrapping) the
        name and the phase folded onto more lines."""
        t = cell.copy()
        if self.wrap and key in ("server", "why"):
            t.no_wrap, t.overflow = False, "fold"
        else:
            t.no_wrap, t.overflow = True, "ellipsis"
        return t

    def _label(self, key: str, label: str) -> Text:
        width = self.widths.get(key, len(label))
        fits = [x for x in SHORT_LABELS.get(key, (label,)) if len(x) <= width]
        return Text(fits[0] if fits else label, no_wrap=True, overflow="ellipsis")

    def natural_widths(self) -> tuple[dict[str, int], dict[str, bool]]:
        """What each column needs to show every row's cell and its label whole (the last line's
        label may be cut), and whether any row has text in it."""
        widths = {key: 0 if key == "last" else len(label) for key, label in COLUMNS}   # the phase's label whole too, room allowing
        filled = {key: False for key, _ in COLUMNS}
        for cells in self._cells.values():
            for (key, _), c in zip(COLUMNS, cells, strict=True):
                n = c.cell_len
                widths[key] = max(widths[key], n)
                filled[key] = filled[key] or bool(c.plain.strip())
        return widths, filled

    def on_resize(self) -> None:
        self.refit()

    def watch_show_vertical_scrollbar(self) -> None:
        self.call_after_refresh(self.refit)      # it takes cells of the width

    def watch_wrap(self) -> None:
        self.refit()

    def refit(self) -> None:
        """Fit the columns to the width; add the rows again when what they were added with
        changed (columns, or in wrap mode any width: a row's height follows its widths)."""
        if not self.is_attached:
            return
        widths, filled = self.natural_widths()
        shown, fit = fit_board([k for k, _ in COLUMNS], widths, filled, self.scrollable_content_region.width)
        self.cut = {name for name, cells in self._cells.items()
                    if any(c.cell_len > fit.get(key, 0) for (key, _), c in zip(COLUMNS, cells, strict=True)
                           if key in ("server", "why"))} if not self.wrap else set()
        built = (shown, fit if self.wrap else None, self.wrap)
        if built != self._built:
            self._build(shown, fit, built)
        elif fit != self.widths:
            self.widths = fit
            for col in self.columns.values():
                col.width = fit.get(str(col.key.value), col.width)
                col.label = self._label(str(col.key.value), dict(COLUMNS)[str(col.key.value)])
            self._require_update_dimensions = True
            self._clear_caches()
            self.refresh()
        self._post_detail()

    def _build(self, shown: list[str], fit: dict[str, int], built: tuple) -> None:
        here = self.server_at_cursor()
        self.shown_columns, self.widths, self._built = shown, fit, built
        self.clear(columns=True)
        labels = dict(COLUMNS)
        for key in shown:
            self.add_column(self._label(key, labels[key]), width=fit[key], key=key)
        for name, cells in self._cells.items():
            self.add_row(*self._pick(cells), key=name, height=None if self.wrap else 1)
        if here:
            self.select(here)

    def tell(self, told: str) -> None:
        """What the screen shows above the board (the verdict's reason): a cut phase it holds whole
        is not shown again under the board (on 80x24 the trials had no row left)."""
        told = " ".join(told.split())
        if told != self._told:
            self._told = told
            self._post_detail()

    def _said(self, name: str) -> bool:
        """The server's cut phase is in what the screen already says of it (its name too): its words
        after its state's."""
        cells = self._cells.get(name)
        if cells is None:
            return False
        why = " ".join(cells[WHY_AT].plain.split("; ", 1)[-1].split())
        return len(why) > 12 and why in self._told and name in self._told

    def detail(self, name: Optional[str] = None) -> Optional[Text]:
        """Server `name`'s (the selected one's) name, state and phase whole, when a row cuts
        a name or a phase the screen does not show whole already; else None."""
        name = name or self.server_at_cursor()
        if not self.cut or name is None or self._said(name):
            return None
        return self._details.get(name)

    def _post_detail(self) -> None:
        """Tell the pane what to show under the board, when that changed: the selected server
        whole, in as many lines as the longest cut one needs (up to DETAIL_MAX), so the screen
        does not jump as the cursor moves."""
        width = max(1, self.size.width - 2)      # the line's padding
        console = self.app.console
        cut = [n for n in self.cut if n in self._details and not self._said(n)]
        lines = max((len(self._details[n].wrap(console, width)) for n in cut), default=0)
        text = self.detail()
        need = len(text.wrap(console, width)) if text is not None else 0
        lines = max(min(lines, DETAIL_MAX), need) if cut else 0
        key = (text.markup if text is not None else None, lines)
        if key != self._posted:
            self._posted = key
            self.post_message(self.DetailChanged(self, text, lines))

    @on(DataTable.RowHighlighted)
    def _stale_highlight(self, event: DataTable.RowHighlighted) -> None:
        """A highlight the cursor has already left (the rows were added again and the cursor
        put back on its server) goes no further: the log pane would open that row's log."""
        if event.row_key.value != self.server_at_cursor():
            event.stop()

    def watch_cursor_coordinate(self, old, new) -> None:
        super().watch_cursor_coordinate(old, new)
        self._post_detail()

    def action_first(self) -> None:
        if self.row_count:
            self.move_cursor(row=0)

    def action_last(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)

    def rebuild(self, state: Optional[RunState], now: Optional[float]) -> None:
        """Every row again (a reset: the run's files were read again), the cursor kept on its
        server (it went back to the first row, and the log pane with it)."""
        here = self.server_at_cursor()
        self.clear()
        self._cells.clear()
        self._details.clear()
        if state is not None:
            self.update(state, set(state.servers), now)
            if here:
                self.select(here)

    def update(self, state: RunState, names: set[str], now: Optional[float]) -> None:
        """Update rows of `names`, and the time cells of every row (they move with the clock)."""
        slow = slow_servers(state, now)
        for name in [n for n in self._cells if n not in state.servers]:   # renamed (a_b -> a/b)
            self.remove_row(name)
            del self._cells[name]
            self._details.pop(name, None)
        clock = spinup_clock(state, now)
        bars = startup_bars(state, now)
        changed = False
        for name, s in state.servers.items():   # few rows: recompute all, write only what differs
            cells = self._row(state, s, now, name in slow, clock, bars.get(name, Text()))
            self._details[name] = detail_text(s, cells)
            changed |= self._set_row(name, cells)
        self._title(board_title(state, now, clock))
        if changed:
            self.refit()

    def _set_row(self, name: str, cells: tuple) -> bool:
        """Write what differs; True when anything did (the columns are fitted again)."""
        old = self._cells.get(name)
        self._cells[name] = cells
        if old is None:
            if self.columns:
                self.add_row(*self._pick(cells), key=name, height=None if self.wrap else 1)
            return True
        if old == cells:
            return False
        if self.wrap:
            self._built = ()        # a row's height follows its cells: add the rows again
        else:
            for (key, _), a, b in zip(COLUMNS, old, cells, strict=True):
                if a != b and key in self.shown_columns:
                    self.update_cell(name, key, self._shown(key, b))
        return True

    def _row(self, state: RunState, s: Server, now: Optional[float], slow: bool,
             clock: Optional[tuple[Optional[float], float]], steps: Text) -> tuple:
        sym, style = STATE_LOOK.get(s.state, ("?", ""))
        state_cell = Text(f"{sym} {s.state}", style=style)
        if slow:
            state_cell.append(" ⚠ slow", style="bold black on yellow")
        if s.orphaned:
            state_cell.append(" ⚠ orphan", style="bold black on yellow")
        limit = limit_text(s, clock) or Text()
        in_state = now - s.state_since if now is not None and s.state_since is not None else None
        waited = now - s.first_seen if now is not None and s.first_seen is not None else in_state
        ttr = s.ready_at - s.first_seen if s.ready_at is not None and s.first_seen is not None else None
        err = Text(str(s.error_count), style="bold red" if s.error_count else "dim")
        why = why_text(state, s, slow, waited)
        probed = probe_text(s, self.probe)
        if probed is not None:          # after why it is not ready: what its port said is the detail
            why = Text.assemble(why, " · ", probed) if why.plain else probed
        kind = Text(KIND_LABEL.get(s.kind, s.kind), style="dim")
        return (Text(s.name, style="bold"), kind, state_cell, limit, why, steps,
                Text(duration(in_state)), Text("—" if ttr == 0 else duration(ttr)), err,
                plain(body(s.last_line), LAST_WIDTH))

    def row_cells(self, name: str) -> tuple:
        """Every column's cell of server `name`'s row, shown or not (tests read the board here)."""
        return self._cells[name]

    def server_at_cursor(self) -> Optional[str]:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return key.value

    def select(self, name: str) -> None:
        if name in self._cells and name in self.rows:
            self.move_cursor(row=self.get_row_index(name))

    def action_open_log(self) -> None:
        name = self.server_at_cursor()
        if name:
            self.post_message(self.LogRequested(self, name))


class BoardPane(Vertical):
    """The board in its border, and under it the selected server's line when its row cuts it."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.board = ReadinessBoard(id="board")

    def compose(self) -> ComposeResult:
        yield self.board
        yield Static(id="board-detail", markup=False)

    @on(ReadinessBoard.DetailChanged)
    def _detail(self, event: ReadinessBoard.DetailChanged) -> None:
        line = self.query_one("#board-detail", Static)
        line.update(event.text or "")
        line.styles.height = event.lines
        line.display = bool(event.lines)


def detail_text(s: Server, cells: tuple) -> Text:
    """The line under the board for server `s`: its name, state and phase or reason whole, and
    for a failed one where its failure line is (enter opens it)."""
    by_key = {key: c for (key, _), c in zip(COLUMNS, cells, strict=True)}
    t = Text.assemble(by_key["server"].copy(), "  ", by_key["state"].copy(), "  ")
    why = by_key["why"].copy()
    why.no_wrap, why.overflow = False, "fold"
    t.append_text(why)
    if s.state == FAILED and s.failure is not None:
        t.append(f"  ({s.failure.where()})", style="underline")
    return t


def spinup_clock(state: RunState, now: Optional[float]) -> Optional[tuple[Optional[float], float]]:
    """(seconds of Gym's spin-up limit used, the limit) while servers are still waiting; used is
    None when the wait began before gymwatch was watching. None when there is no limit to show."""
    p = state.parent
    limit = gymversion.spinup_limit(state)
    if limit is None or p.all_ready is not None or p.spinup is None or parent_ended(state):
        return None
    used = now - p.spinup_at if now is not None and p.spinup_at is not None else None
    return used, limit


def limit_text(s: Server, clock: Optional[tuple[Optional[float], float]]) -> Optional[Text]:
    """`2m10s/10m00s` of Gym's spin-up limit used, on a server Gym is still waiting for; flagged
    as it nears the limit. Nothing when the wait began before gymwatch was watching."""
    if clock is None or s.became_ready or s.state == FAILED:
        return None
    used, limit = clock
    if used is None:
        return None
    share = used / limit
    style = "bold white on red" if share >= 1 else ("bold black on yellow" if share >= LIMIT_WARN else "dim")
    return Text(f"{duration(used)}/{duration(limit)}" + (" ⚠" if share >= LIMIT_WARN else ""), style=style)


def limit_flag(clock: Optional[tuple[Optional[float], float]]) -> str:
    """The title's flag as the wait nears Gym's spin-up limit (a narrow board drops the column)."""
    if clock is None or clock[0] is None:
        return ""
    return " ⚠" if clock[0] / clock[1] >= LIMIT_WARN else ""


def board_title(state: RunState, now: Optional[float], clock: Optional[tuple[Optional[float], float]]) -> str:
    ready = sum(1 for s in state.servers.values() if s.became_ready)
    title = f"Servers {ready}/{len(state.servers)} ready"
    if clock is not None:
        used, limit = clock
        title += f" · Gym's spin-up limit {duration(limit)}" + (f", {duration(used)} used" if used is not None else "")
        title += limit_flag(clock)
    stage = endpoint_stage(state, now)
    return title + (f" · {stage}" if stage else "")


def endpoint_stage(state: RunState, now: Optional[float]) -> str:
    """Gym's wait for the model endpoints after all servers are ready (Gym 0.5+): a stage of its own."""
    e = state.parent.endpoints
    if e.gave_up is not None:
        return "model endpoint never answered"
    if not e.pending:
        return ""
    elapsed = e.elapsed
    if now is not None and e.waiting_at is not None:
        elapsed = max(elapsed or 0.0, now - e.waiting_at)
    took = duration(elapsed) if elapsed is not None else ""
    limit = f" of {duration(e.limit)}" if e.limit else ""
    return f"waiting for model endpoint {', '.join(e.urls) or '?'}" + (f" ({took}{limit})" if took else "")


def probe_text(s: Server, probe: Probe) -> Optional[Text]:
    """What `GET /` of server `s` got, when that still says something of it: a probe asked before
    the server entered its state does not (the demo's servers showed `ready · GET / → refused`,
    refused while they were starting). Refused after the server was said to be ready, it says so."""
    detail = probe.detail.get(s.name)
    if detail is None or (s.state_since is not None and probe.at < s.state_since):
        return None
    if s.state == READY and probe.answers.get(s.name) is False:
        who = "its log" if s.ready_evidence is not None else "Gym"
        return plain(f"{who} said ready, but {detail}", 80, "bold yellow")
    return plain(detail, 30, "cyan")


def why_text(state: RunState, s: Server, slow: bool, in_state: Optional[float]) -> Text:
    if s.state == FAILED:
        return plain(s.failure_reason or FAILED, WHY_WIDTH, "red")
    if s.became_ready or s.state in (READY, EXITED):
        phase = "" if s.phase == s.state else s.phase    # not `● ready  ready`: the State column says it
        r = attribution.server_trouble(state, s)
        if r is not None:      # up, but waiting on a connection it cannot make: the run stalls here
            words = attribution.retry_words(state, s.name, r, named=False)
            return plain(f"{phase}; {words}" if phase else words, WHY_WIDTH, "yellow")
        return plain(phase, WHY_WIDTH)
    if s.phase:
        why = s.phase
    elif s.last_line:
        why = STARTING
    else:
        why = "no output yet" + ("; Gym waiting for it" if s.name in (state.parent.pending or []) else "")
    if slow:
        took = max(_ttrs(state), default=0.0)
        bound = duration(took) or "0s"
        bound = bound if bound.startswith("<") else f"≤{bound}"      # not "≤<1s"
        return plain(f"{duration(in_state)}; siblings took {bound}; {why}", WHY_WIDTH, "yellow")
    return plain(why, WHY_WIDTH)


def waited_on(state: RunState, now: Optional[float]) -> Optional[str]:
    """The server the screen selects while the user has not chosen one: the first failed, else,
    once some are ready, the one the run waits on (a slow one first). None: no server stands out
    (none ready yet, or all)."""
    servers = list(state.servers.values())
    failed = next((s.name for s in servers if s.state == FAILED), None)
    if failed is not None:
        return failed
    waiting = [s.name for s in servers if not s.became_ready and s.state != EXITED]
    if not waiting or len(waiting) == len(servers):
        return None
    slow = slow_servers(state, now)
    return next((name for name in waiting if name in slow), waiting[0])


def slow_servers(state: RunState, now: Optional[float]) -> set[str]:
    """Servers not ready for far longer than the slowest sibling that became ready."""
    if now is None:
        return set()
    ttrs = _ttrs(state)
    if not ttrs:
        return set()
    limit = max(SLOW_MIN, SLOW_FACTOR * max(ttrs))
    return {s.name for s in state.servers.values()
            if not s.became_ready and s.state != FAILED and s.first_seen is not None
            and now - s.first_seen > limit}


def _ttrs(state: RunState) -> list[float]:
    return [s.ready_at - s.first_seen for s in state.servers.values()
            if s.ready_at is not None and s.first_seen is not None]
