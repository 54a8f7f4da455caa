"""The runs browser: a table of every run under the roots; enter opens one read-only.

Summaries arrive from a thread worker (cache hits at once, the rest as they are made)
and are added as rows; sorting and filtering rebuild the table once per user action.
`enter` opens the live screen (`gymwatch.tui.app`, an App of its own: the browser exits,
the live app runs, and closing it with q brings the list back as it was); `d` opens a
read-only detail screen here (the `gymwatch report` text and the run's logs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from time import monotonic
from typing import Any, Optional

from rich.cells import cell_len
from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.widgets.data_table import ColumnKey
from textual.worker import get_current_worker

from ..core.model import (
    V_COLLECTING,
    V_COLLECTION_ABORTED,
    V_INCOMPLETE,
    V_NO_AGENT_RAN,
    V_OK,
    V_SOME_FAILED,
    V_SOME_NEVER_RAN,
    V_STARTING,
    V_STARTUP_FAILED,
    V_UNREADABLE,
)
from ..core.sanitize import clean
from ..tui.typeahead import closed_early
from .cache import SummaryCache
from .compare import CompareScreen
from .fmt import COLUMNS, ERROR, PROBLEM, VERDICT_ORDER, cells, fit, run_name, shorten
from .runs import list_runs

VERDICT_STYLE = {V_OK: "green", V_SOME_NEVER_RAN: "bold magenta", V_NO_AGENT_RAN: "bold red",
                 V_COLLECTION_ABORTED: "bold red", V_STARTUP_FAILED: "bold red", V_INCOMPLETE: "yellow",
                 V_SOME_FAILED: "yellow", V_UNREADABLE: "red", ERROR: "red", V_STARTING: "cyan", V_COLLECTING: "cyan"}
SORTS = tuple(k for k, _ in COLUMNS)
# Seconds between batches of runs handed to the UI while scanning: the first run at once and the
# next batch soon (the screen fills), the rest seldom (each batch redraws every visible row:
# frequent batches took much of the UI's CPU in a cold scan, on cores the workers need).
FIRST_FLUSH, FLUSH_EVERY = 0.1, 0.5
_COUNT_KEYS = {"completed", "failed", "never_ran", "missing"}


def sort_value(run: dict[str, Any], by: str) -> tuple:
    """Ascending order of a column (unknown values last either way: see sort_key)."""
    if by == "name":
        return ((run.get("environment") or "~"), (run.get("agent") or ""))
    if by == "verdict":
        v = run.get("verdict", "")
        return (VERDICT_ORDER.index(v) if v in VERDICT_ORDER else 99,)
    if by == "reward":
        return (run.get("mean_reward"),)
    if by in _COUNT_KEYS:
        return ((run.get("trials") or {}).get(by, 0),)
    if by == "servers":
        return (run.get("servers"),)
    if by == "duration":
        return (run.get("duration"),)
    if by == "run":
        return (run["path"],)
    return (run.get("started"),)


def sort_key(run: dict[str, Any], by: str, reverse: bool) -> tuple:
    """The table's order: `by` ascending or descending, runs without a value last, then by path.
    `started` and the numbers read newest / biggest first unless reversed."""
    desc = by in ("started", "duration", "reward") or by in _COUNT_KEYS
    desc = desc != reverse
    vals = sort_value(run, by)
    unknown = any(v is None for v in vals)
    if desc and not unknown:
        vals = tuple(-v if isinstance(v, (int, float)) else _Desc(v) for v in vals)
    elif unknown:
        vals = ()
    return (unknown, vals, run["path"])


class _Desc:
    """A value that sorts the other way (descending strings)."""

    __slots__ = ("v",)

    def __init__(self, v: Any):
        self.v = v

    def __lt__(self, other: "_Desc") -> bool:
        return self.v > other.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.v == other.v


@dataclass
class BrowseState:
    """What survives a trip to the live screen and back."""

    roots: list[str]
    use_cache: bool = True
    runs: list[dict[str, Any]] = field(default_factory=list)
    sort: str = "started"
    reverse: bool = False
    text: str = ""
    verdict: Optional[str] = None           # a verdict, or fmt.PROBLEM (every verdict but ok)
    cursor_path: Optional[str] = None
    scanned: bool = False
    marked: list[str] = field(default_factory=list)     # paths marked to compare (two at most)


class Cell(Text):
    """A cell's text, never measured: the screen sets every column's width itself (`_widen`),
    so DataTable's measuring of each new cell (much of the UI's CPU while a cold scan adds its
    rows) would buy nothing. Without `__rich_measure__`, Textual takes a width of 1 for its
    unused content width, and Rich the full width offered."""

    __rich_measure__ = None         # type: ignore[assignment]


class RunsArrived(Message):
    """Summaries from the scanning thread (`scan`: which scan made them; a later one drops them)."""

    def __init__(self, scan: int, runs: list[dict[str, Any]]):
        super().__init__()
        self.scan, self.runs = scan, runs


class ScanDone(Message):
    def __init__(self, scan: int):
        super().__init__()
        self.scan = scan


class RunsTable(DataTable):
    """The runs: j / k down and up, g / home the first row, G / end the last."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False, id="browse.down"),
        Binding("k", "cursor_up", "Up", show=False, id="browse.up"),
        Binding("g,home", "first", "First", show=False, id="browse.first"),
        Binding("G,end", "last", "Last", show=False, id="browse.last"),
    ]

    def action_first(self) -> None:
        if self.row_count:
            self.move_cursor(row=0, animate=False)

    def action_last(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)


class BrowseScreen(Screen):
    DEFAULT_CSS = """
    BrowseScreen #browse-title { height: 1; padding: 0 1; background: $boost; }
    BrowseScreen #browse-filter { height: 3; }
    BrowseScreen #browse-empty { height: auto; padding: 0 1; color: $warning; display: none; }
    BrowseScreen #runs { height: 1fr; }
    """
    BINDINGS = [
        Binding("enter", "open_run", "Open", id="browse.open"),
        Binding("d", "details", "Details", id="browse.details"),
        Binding("slash", "focus_filter", "Filter", key_display="/", id="browse.filter"),
        Binding("v", "cycle_verdict", "Verdict", id="browse.verdict"),
        Binding("s", "cycle_sort", "Sort", id="browse.sort"),
        Binding("S", "reverse_sort", "Reverse", id="browse.reverse"),
        Binding("m,space", "mark", "Mark", id="browse.mark"),
        Binding("c", "compare", "Compare", id="browse.compare"),
        Binding("r", "rescan", "Rescan", id="browse.rescan"),
        Binding("escape", "clear", "Clear filter", show=False),
        Binding("q", "app.quit", "Quit"),
    ]
    AUTO_FOCUS = "#runs"      # keys typed ahead go to the list, not into the filter box

    def __init__(self, listing: BrowseState):
        super().__init__()
        self.listing = listing
        self.shown: list[dict[str, Any]] = []
        self._row_run: dict[int, dict[str, Any]] = {}     # id(a row's first cell) -> its run
        self.columns: list[str] = [k for k, _ in COLUMNS]  # shown now (narrow screens drop some)
        self._widths: dict[str, int] = {k: len(h) + len(" ▼") for k, h in COLUMNS}   # the label and its sort arrow
        self._run_width: Optional[int] = None              # the run column cut to fit (None: whole)
        self._scans = 0                                    # scans started: the latest one's runs are shown

    def compose(self) -> ComposeResult:
        yield Static(id="browse-title")
        yield Input(self.listing.text, placeholder="filter: words in name, path or verdict (/ to type, escape clears)",
                    id="browse-filter")
        yield Static(id="browse-empty")
        table = RunsTable(id="runs", cursor_type="row", zebra_stripes=True)
        self._add_columns(table)
        yield table
        yield Footer()

    def _add_columns(self, table: DataTable) -> None:
        # Widths are set here, not measured by the table: it measures new rows when idle and keeps
        # lines it drew before that (a run column was left too narrow after a scan, now and then).
        for key in self.columns:
            table.add_column(self._label(key), key=key, width=self._width(key))

    def _width(self, key: str) -> int:
        """A column's width: its widest cell's, the run column's as cut to fit."""
        width = self._widths[key]
        return min(width, self._run_width) if key == "run" and self._run_width is not None else width

    def _label(self, key: str) -> Text:
        """A column's label with room for the sort arrow in every column, so the arrow shows
        whichever column is sorted (a column as narrow as its label cut it off) and a new sort
        moves no column."""
        arrow = (" ▲" if self.listing.reverse else " ▼") if key == self.listing.sort else "  "
        return Text(dict(COLUMNS)[key] + arrow, no_wrap=True)

    @property
    def table(self) -> DataTable:
        return self.query_one("#runs", DataTable)

    def on_mount(self) -> None:
        self.table.focus()
        if self.listing.scanned:
            self.rebuild()
        else:
            self.scan()

    def on_resize(self) -> None:
        self._refit()

    def _refit(self, force: bool = False) -> None:
        """Cut the run column, then drop columns by priority, until the table fits the screen."""
        cols, width = fit(self._widths, max(20, self.size.width - 2))
        run_width = width if width < self._widths["run"] else None
        if cols != self.columns or run_width != self._run_width or force:
            self.columns, self._run_width = cols, run_width
            keep = self._selected()
            table = self.table
            with self.app.batch_update():
                table.clear(columns=True)
                self._add_columns(table)
                self._row_run.clear()
                for run in self.shown:
                    self._add(run)
            self._keep_cursor(keep)

    # --- scanning ----------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="scan")
    def scan(self) -> None:
        self.listing.runs, self.listing.scanned = [], False
        self._scans += 1
        this = self._scans
        self.app.call_from_thread(self.rebuild)
        cache = SummaryCache(enabled=self.listing.use_cache)
        worker = get_current_worker()
        pending: list[dict[str, Any]] = []
        flushed = [0.0, 0]            # when the last batch went, and how many have

        # Batches are posted, not handed over with call_from_thread: that waits for the UI to add
        # them, and meanwhile no worker's answer is read (their pipes fill and they stop): the
        # screen took several times as long as the listing it shows.
        def flush() -> None:         # a message per batch, not per run
            batch = pending[:]
            pending.clear()
            flushed[0], flushed[1] = monotonic(), flushed[1] + 1
            if batch and not worker.is_cancelled:
                self.post_message(RunsArrived(this, batch))

        def arrived(run: dict[str, Any]) -> None:
            pending.append(run)
            if monotonic() - flushed[0] >= (FLUSH_EVERY if flushed[1] > 1 else FIRST_FLUSH):
                flush()
        list_runs(self.listing.roots, cache, on_run=arrived, stop=lambda: worker.is_cancelled)
        flush()
        if not worker.is_cancelled:
            self.post_message(ScanDone(this))

    @on(RunsArrived)
    def _runs_arrived(self, message: RunsArrived) -> None:
        if message.scan == self._scans:
            self._arrived(message.runs)

    @on(ScanDone)
    def _scan_done(self, message: ScanDone) -> None:
        if message.scan == self._scans:
            self._scanned()

    def _arrived(self, runs: list[dict[str, Any]]) -> None:
        wider = False
        with self.app.batch_update():
            for run in runs:
                self.listing.runs.append(run)
                if self._matches(run):
                    self.shown.append(run)
                    wider |= self._add(run)
        if wider:
            self._refit()
        self._title()

    def _scanned(self) -> None:
        self.listing.scanned = True
        self.resort(top=True)

    # --- the table ---------------------------------------------------------------------
    def _matches(self, run: dict[str, Any]) -> bool:
        want = self.listing.verdict
        if want == PROBLEM:
            if run.get("verdict") == V_OK:
                return False
        elif want and run.get("verdict") != want:
            return False
        words = self.listing.text.lower().split()
        hay = " ".join(str(run.get(k) or "") for k in ("environment", "agent", "model", "path", "verdict")).lower()
        return all(w in hay for w in words)

    def _key(self, run: dict[str, Any]) -> tuple:
        return sort_key(run, self.listing.sort, self.listing.reverse)

    def rebuild(self) -> None:
        """Refill the table after a filter change (or a rescan): the cursor on the first row,
        or on the run the list came back to."""
        keep = self.listing.cursor_path
        self.shown = sorted((r for r in self.listing.runs if self._matches(r)), key=self._key)
        table = self.table
        with self.app.batch_update():
            table.clear()
            self._row_run.clear()
            for run in self.shown:
                self._add(run)
        self._keep_cursor(keep)

    def resort(self, top: bool = False) -> None:
        """Reorder the rows in place: DataTable measures every cell it is given, so re-adding
        the rows for a new order costs far more than sorting them. The cursor
        stays on its run, or goes to the first row (`top`, or when it was there)."""
        keep = self.listing.cursor_path or (None if top or self.table.cursor_row <= 0 else self._selected())
        runs, key = self._row_run, self._key
        self.shown.sort(key=key)
        table = self.table
        table.sort(key=lambda row: key(runs[id(row[0])]))      # same total order
        for col_key, col in table.columns.items():
            col.label = self._label(str(col_key.value))
        table.refresh()
        self._keep_cursor(keep)

    def _keep_cursor(self, keep: Optional[str]) -> None:
        table = self.table
        if keep is not None and keep in table.rows:
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        elif table.row_count:
            table.move_cursor(row=0, animate=False)
        self.listing.cursor_path = None
        self._title()

    def _cells(self, run: dict[str, Any]) -> dict[str, Text]:
        c = cells(run, self.listing.roots)
        marked = run["path"] in self.listing.marked
        if self._run_width is not None:
            c["run"] = shorten(c["run"], self._run_width - (2 if marked else 0))
        out: dict[str, Text] = {k: Cell(v, no_wrap=True) for k, v in c.items()}
        out["verdict"].stylize(VERDICT_STYLE.get(run.get("verdict", ""), ""))
        if marked:
            mark = "A" if self.listing.marked[0] == run["path"] else "B"
            out["run"] = Cell.assemble((f"{mark} ", "bold reverse"), out["run"], no_wrap=True)
        return out

    def _sizes(self, run: dict[str, Any], c: dict[str, Text]) -> dict[str, int]:
        """The widths a run's cells `c` want: the run column's whole, before any cut."""
        sizes = {k: t.cell_len for k, t in c.items()}
        if self._run_width is not None:
            whole = cell_len(run_name(run["path"], self.listing.roots))
            sizes["run"] = whole + (2 if run["path"] in self.listing.marked else 0)
        return sizes

    def _add(self, run: dict[str, Any]) -> bool:
        """Add a run's row; True when a cell is wider than its column was (columns may refit)."""
        c = self._cells(run)
        wider = self._widen(self._sizes(run, c))
        row = [c[k] for k in self.columns]
        self._row_run[id(row[0])] = run      # a sort's key function sees the cells, not the key
        self.table.add_row(*row, key=run["path"])
        return wider

    def _widen(self, sizes: dict[str, int]) -> bool:
        """Columns as wide as cells of these widths (before their row is added or changed, which
        has the table draw its lines again); True when one grew."""
        wider = False
        for k, size in sizes.items():
            if size > self._widths.get(k, 0):
                self._widths[k] = size
                column = self.table.columns.get(ColumnKey(k))
                if column is not None:
                    column.width = self._width(k)
                wider = True
        return wider

    def _title(self) -> None:
        roots = ", ".join(clean(r) for r in self.listing.roots)
        n, total = len(self.shown), len(self.listing.runs)
        bits = [f"runs under {roots}: {n}" + (f" of {total}" if n != total else ""),
                f"sort: {dict(COLUMNS).get(self.listing.sort, self.listing.sort)}" + (" reversed" if self.listing.reverse else "")]
        if self.listing.verdict:
            bits.append(f"verdict: {self._verdict_words()}")
        if self.listing.marked:
            bits.append(f"marked {len(self.listing.marked)}/2" + (": c compares" if len(self.listing.marked) == 2 else ""))
        if not self.listing.scanned:
            bits.append("scanning…")
        self.query_one("#browse-title", Static).update(Text("  ·  ".join(bits)))
        self._say_empty()

    def _verdict_words(self) -> str:
        return "any problem" if self.listing.verdict == PROBLEM else str(self.listing.verdict)

    def _say_empty(self) -> None:
        """Why the list is empty, when it is: no run found, or none the filter matches (and how
        to clear it). The filter's words are shown as typed, never read as markup."""
        box = self.query_one("#browse-empty", Static)
        if self.shown or not (self.listing.scanned or self.listing.runs):
            box.display = False
            return
        if not self.listing.runs:
            said = Text(f"no run found under {', '.join(clean(r) for r in self.listing.roots)} (r rescans)")
        else:
            said = Text("no run matches ")
            if self.listing.text.strip():
                said.append(f"`{clean(self.listing.text.strip())}`")
                if self.listing.verdict:
                    said.append(" with ")
            if self.listing.verdict:
                said.append(f"verdict: {self._verdict_words()}")
            said.append(f" (of {len(self.listing.runs)}): escape clears the filter")
        box.update(said)
        box.display = True

    def _selected(self) -> Optional[str]:
        table = self.table
        if not table.row_count:
            return None
        return self.shown[table.cursor_row]["path"] if 0 <= table.cursor_row < len(self.shown) else None

    # --- actions -----------------------------------------------------------------------
    @on(Input.Changed, "#browse-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        if event.value != self.listing.text:
            self.listing.text = event.value
            self.rebuild()

    @on(Input.Submitted, "#browse-filter")
    def _filter_done(self) -> None:
        self.table.focus()

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        """A click on a column's header sorts by it; a second click reverses."""
        key = str(event.column_key.value)
        if key == self.listing.sort:
            self.listing.reverse = not self.listing.reverse
        else:
            self.listing.sort, self.listing.reverse = key, False
        self.resort()

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open_run()

    def action_focus_filter(self) -> None:
        self.query_one("#browse-filter", Input).focus()

    def action_clear(self) -> None:
        box = self.query_one("#browse-filter", Input)
        if box.value or self.listing.verdict:
            self.listing.verdict, self.listing.text = None, ""
            box.value = ""
            self.rebuild()
        self.table.focus()

    def action_cycle_verdict(self) -> None:
        """All, any problem (every verdict but ok), then each verdict present."""
        present = [v for v in VERDICT_ORDER if any(r.get("verdict") == v for r in self.listing.runs)]
        options: list[Optional[str]] = [None, PROBLEM, *present]
        i = options.index(self.listing.verdict) if self.listing.verdict in options else 0
        self.listing.verdict = options[(i + 1) % len(options)]
        self.rebuild()

    def action_cycle_sort(self) -> None:
        self.listing.sort = SORTS[(SORTS.index(self.listing.sort) + 1) % len(SORTS)] if self.listing.sort in SORTS else SORTS[0]
        self.listing.reverse = False
        self.resort()

    def action_reverse_sort(self) -> None:
        self.listing.reverse = not self.listing.reverse
        self.resort()

    def action_rescan(self) -> None:
        self.scan()

    def action_mark(self) -> None:
        """Mark the run under the cursor to compare (A, then B; a third mark drops A)."""
        path = self._selected()
        if path is None:
            return
        marked = self.listing.marked
        before = list(marked)
        if path in marked:
            marked.remove(path)
        else:
            marked.append(path)
            del marked[:-2]
        table = self.table
        widened = False
        for p in set(before) | set(marked):
            run = next((r for r in self.shown if r["path"] == p), None)
            if run is not None and p in table.rows:
                old_cell = table.get_cell(p, "run") if "run" in self.columns else None
                cells = self._cells(run)
                cell = cells["run"]
                if old_cell is not None:
                    widened |= self._widen({"run": self._sizes(run, cells)["run"]})
                    table.update_cell(p, "run", cell, update_width=False)
                    if self._row_run.pop(id(old_cell), None) is not None and self.columns[0] == "run":
                        self._row_run[id(cell)] = run
        if widened:
            self._refit()
        self._title()

    def action_compare(self) -> None:
        """The two marked runs (or the one marked and the run under the cursor), A then B."""
        pair = list(self.listing.marked)
        cur = self._selected()
        if len(pair) == 1 and cur is not None and cur not in pair:
            pair.append(cur)
        if len(pair) != 2:
            self.notify("mark two runs with m (or space), then c compares them", severity="warning")
            return
        self.app.push_screen(CompareScreen(pair[0], pair[1], self.listing.roots))

    def action_open_run(self) -> None:
        path = self._selected()
        if path is None:
            return
        self.listing.cursor_path = path
        self.app.exit(path)

    def action_details(self) -> None:
        path = self._selected()
        if path is not None:
            self.app.push_screen(RunDetail(path))


class RunDetail(Screen):
    """A run, read-only: the `gymwatch report` text beside its logs (merged, per server)."""

    DEFAULT_CSS = """
    RunDetail #detail-report { width: 2fr; border: round $primary-darken-2; }
    RunDetail #detail-log { width: 3fr; border: round $primary-darken-2; }
    RunDetail #detail-report:focus-within, RunDetail #detail-log:focus { border: round $accent; }
    """
    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), Binding("tab", "app.focus_next", "Next pane", show=False)]

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        from ..tui.logview import LogView

        with Horizontal():
            with VerticalScroll(id="detail-report"):
                yield Static(Text(report_text(self.path)), markup=False)
            yield LogView(id="detail-log")
        yield Footer()

    def on_mount(self) -> None:
        from ..tui.logview import LogView

        if closed_early(self):
            return
        view = self.query_one(LogView)
        view.border_title = "logs"
        sources = run_logs(self.path)
        if sources:
            view.open_merged(sources)
        view.focus()


def report_text(path: str) -> str:
    from ..core.session import read_run
    from ..report import render

    try:
        text, _ = render(read_run(path, check_processes=False).state, "text")
    except Exception as exc:  # noqa: BLE001 - the detail screen shows why, never crashes
        return f"cannot read {path}: {type(exc).__name__}: {exc}"
    return clean(text)


def run_logs(path: str) -> list[tuple[str, str]]:
    """The run's per-server logs, then its captured streams, as (label, path)."""
    from ..core.layout import NotARun, discover

    try:
        lay = discover(path)
    except NotARun:
        return []
    return [(label, str(p)) for label, p in lay.all_logs()]


class BrowseApp(App):
    TITLE = "gymwatch browse"

    def __init__(self, listing: BrowseState):
        super().__init__()
        self.listing = listing

    def get_default_screen(self) -> Screen:
        # The list is the app's first screen, not one pushed once it starts: a q typed while
        # `gymwatch browse` starts up reaches the list's bindings instead of a blank screen's.
        return BrowseScreen(self.listing)


def run_browser(roots: list[str], use_cache: bool = True) -> int:
    """The list; a chosen run opens in the live app; closing that returns to the list."""
    listing = BrowseState([os.path.abspath(r) for r in roots], use_cache)
    while True:
        chosen = BrowseApp(listing).run()
        if not chosen:
            return 0
        from ..core.layout import NotARun
        from ..tui.app import GymwatchApp

        try:
            GymwatchApp(str(chosen)).run()
        except NotARun as exc:          # gone or changed since it was listed: back to the list
            print(f"gymwatch: {exc}")
