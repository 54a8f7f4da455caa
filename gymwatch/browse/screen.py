"""The runs browser: a table of every run under the roots; enter opens one read-only.

Summaries arrive from a thread worker (cache hits at once, the rest as they are made)
and are added as rows; sorting and filtering rebuild the table once per user action.
`enter` opens the live screen (`gymwatch.tui.app`, an App of its own: the browser exits,
the live app runs, and closing it with q brings the list back as it was); `d` opens a
read-only detail screen here (the `gymwatch report` text and the run's logs).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.worker import get_current_worker

from ..core.sanitize import clean
from .cache import SummaryCache
from .fmt import COLUMNS, VERDICT_ORDER, cells
from .runs import list_runs

VERDICT_STYLE = {"ok": "green", "some_never_ran": "bold magenta", "no_agent_ran": "bold red",
                 "collection_aborted": "bold red", "startup_failed": "bold red", "incomplete": "yellow",
                 "error": "red", "starting": "cyan", "collecting": "cyan"}
SORTS = ("started", "name", "verdict", "reward", "duration", "path")
FLUSH_EVERY = 0.1       # seconds between batches of runs handed to the UI while scanning


def sort_value(run: dict[str, Any], by: str) -> tuple:
    if by == "name":
        return ((run.get("environment") or "~"), (run.get("agent") or ""), run["path"])
    if by == "verdict":
        v = run.get("verdict", "")
        return (VERDICT_ORDER.index(v) if v in VERDICT_ORDER else 99, run["path"])
    if by == "reward":
        r = run.get("mean_reward")
        return (r is None, -(r or 0.0), run["path"])
    if by == "duration":
        return (-(run.get("duration") or 0.0), run["path"])
    if by == "path":
        return (run["path"],)
    return (-(run.get("started") or 0.0), run["path"])


@dataclass
class BrowseState:
    """What survives a trip to the live screen and back."""

    roots: list[str]
    use_cache: bool = True
    runs: list[dict[str, Any]] = field(default_factory=list)
    sort: str = "started"
    text: str = ""
    verdict: Optional[str] = None
    cursor_path: Optional[str] = None
    scanned: bool = False


class BrowseScreen(Screen):
    DEFAULT_CSS = """
    BrowseScreen #browse-title { height: 1; padding: 0 1; background: $boost; }
    BrowseScreen #browse-filter { height: 3; }
    BrowseScreen #runs { height: 1fr; }
    """
    BINDINGS = [
        Binding("enter", "open_run", "Open", id="browse.open"),
        Binding("d", "details", "Details", id="browse.details"),
        Binding("slash", "focus_filter", "Filter", key_display="/", id="browse.filter"),
        Binding("v", "cycle_verdict", "Verdict", id="browse.verdict"),
        Binding("s", "cycle_sort", "Sort", id="browse.sort"),
        Binding("r", "rescan", "Rescan", id="browse.rescan"),
        Binding("escape", "clear", "Clear filter", show=False),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, state: BrowseState):
        super().__init__()
        self.st = state
        self.shown: list[dict[str, Any]] = []
        self._row_run: dict[int, dict[str, Any]] = {}     # id(a row's first cell) -> its run

    def compose(self) -> ComposeResult:
        yield Static(id="browse-title")
        yield Input(self.st.text, placeholder="filter: words in name, path or verdict (/ to type, escape clears)",
                    id="browse-filter")
        table = DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        for key, header in COLUMNS:
            table.add_column(header, key=key)
        yield table
        yield Footer()

    @property
    def table(self) -> DataTable:
        return self.query_one("#runs", DataTable)

    def on_mount(self) -> None:
        self.table.focus()
        if self.st.scanned:
            self.rebuild()
        else:
            self.scan()

    # --- scanning ----------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="scan")
    def scan(self) -> None:
        self.st.runs, self.st.scanned = [], False
        self.app.call_from_thread(self.rebuild)
        cache = SummaryCache(enabled=self.st.use_cache)
        worker = get_current_worker()
        pending: list[dict[str, Any]] = []
        flushed = [0.0]

        def flush() -> None:         # a round trip to the UI thread per batch, not per run
            batch = pending[:]
            pending.clear()
            flushed[0] = time.monotonic()
            if batch and not worker.is_cancelled:
                self.app.call_from_thread(self._arrived, batch)

        def arrived(run: dict[str, Any]) -> None:
            pending.append(run)
            if time.monotonic() - flushed[0] >= FLUSH_EVERY:
                flush()
        list_runs(self.st.roots, cache, on_run=arrived, stop=lambda: worker.is_cancelled)
        flush()
        if not worker.is_cancelled:
            self.app.call_from_thread(self._scanned)

    def _arrived(self, runs: list[dict[str, Any]]) -> None:
        with self.app.batch_update():
            for run in runs:
                self.st.runs.append(run)
                if self._matches(run):
                    self.shown.append(run)
                    self._add(run)
        self._title()

    def _scanned(self) -> None:
        self.st.scanned = True
        self.resort()

    # --- the table ---------------------------------------------------------------------
    def _matches(self, run: dict[str, Any]) -> bool:
        if self.st.verdict and run.get("verdict") != self.st.verdict:
            return False
        words = self.st.text.lower().split()
        hay = " ".join(str(run.get(k) or "") for k in ("environment", "agent", "model", "path", "verdict")).lower()
        return all(w in hay for w in words)

    def rebuild(self) -> None:
        """Refill the table after a filter change (or a rescan), keeping the selected run."""
        keep = self.st.cursor_path or self._selected()
        self.shown = sorted((r for r in self.st.runs if self._matches(r)),
                            key=lambda r: sort_value(r, self.st.sort))
        table = self.table
        with self.app.batch_update():
            table.clear()
            self._row_run.clear()
            for run in self.shown:
                self._add(run)
        self._keep_cursor(keep)

    def resort(self) -> None:
        """Reorder the rows in place: DataTable measures every cell it is given, so re-adding
        1,000 rows for a new order costs ~0.4 s; sorting them costs milliseconds."""
        keep = self.st.cursor_path or self._selected()
        by, runs = self.st.sort, self._row_run
        self.shown.sort(key=lambda r: sort_value(r, by))
        self.table.sort(key=lambda row: sort_value(runs[id(row[0])], by))    # same total order
        self._keep_cursor(keep)

    def _keep_cursor(self, keep: Optional[str]) -> None:
        table = self.table
        if keep is not None and keep in table.rows:
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        self.st.cursor_path = None
        self._title()

    def _add(self, run: dict[str, Any]) -> None:
        c = cells(run, self.st.roots)
        row = [Text(c[k], no_wrap=True) for k, _ in COLUMNS]
        row[[k for k, _ in COLUMNS].index("verdict")].stylize(VERDICT_STYLE.get(run.get("verdict", ""), ""))
        self._row_run[id(row[0])] = run      # a sort's key function sees the cells, not the key
        self.table.add_row(*row, key=run["path"])

    def _title(self) -> None:
        roots = ", ".join(clean(r) for r in self.st.roots)
        n, total = len(self.shown), len(self.st.runs)
        bits = [f"runs under {roots}: {n}" + (f" of {total}" if n != total else ""),
                f"sort: {self.st.sort}"]
        if self.st.verdict:
            bits.append(f"verdict: {self.st.verdict}")
        if not self.st.scanned:
            bits.append("scanning…")
        self.query_one("#browse-title", Static).update(Text("  ·  ".join(bits)))

    def _selected(self) -> Optional[str]:
        table = self.table
        if not table.row_count:
            return None
        return self.shown[table.cursor_row]["path"] if table.cursor_row < len(self.shown) else None

    # --- actions -----------------------------------------------------------------------
    @on(Input.Changed, "#browse-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.st.text = event.value
        self.rebuild()

    @on(Input.Submitted, "#browse-filter")
    def _filter_done(self) -> None:
        self.table.focus()

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        by = {"completed": "reward", "reward": "reward"}.get(key, key)
        if by in SORTS:
            self.st.sort = by
            self.resort()

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open_run()

    def action_focus_filter(self) -> None:
        self.query_one("#browse-filter", Input).focus()

    def action_clear(self) -> None:
        box = self.query_one("#browse-filter", Input)
        if box.value or self.st.verdict:
            self.st.verdict = None
            box.value = ""           # Input.Changed rebuilds
            self.rebuild()
        self.table.focus()

    def action_cycle_verdict(self) -> None:
        present = [v for v in VERDICT_ORDER if any(r.get("verdict") == v for r in self.st.runs)]
        options: list[Optional[str]] = [None, *present]
        i = options.index(self.st.verdict) if self.st.verdict in options else 0
        self.st.verdict = options[(i + 1) % len(options)]
        self.rebuild()

    def action_cycle_sort(self) -> None:
        self.st.sort = SORTS[(SORTS.index(self.st.sort) + 1) % len(SORTS)]
        self.resort()

    def action_rescan(self) -> None:
        self.scan()

    def action_open_run(self) -> None:
        path = self._selected()
        if path is None:
            return
        if live_app_available():
            self.st.cursor_path = path
            self.app.exit(path)
        else:
            self.app.push_screen(RunDetail(path))

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
    out = [(name, str(p)) for name, p in lay.server_logs().items()]
    out += [(os.path.basename(str(s.path)).rsplit(".", 1)[0], str(s.path)) for s in lay.streams
            if os.path.isfile(s.path)]
    return out


def live_app_available() -> bool:
    try:
        from ..tui import app  # noqa: F401
    except ImportError:
        return False
    return hasattr(app, "GymwatchApp")


class BrowseApp(App):
    TITLE = "gymwatch browse"

    def __init__(self, state: BrowseState):
        super().__init__()
        self.st = state

    def on_mount(self) -> None:
        self.push_screen(BrowseScreen(self.st))


def run_browser(roots: list[str], use_cache: bool = True) -> int:
    """The list; a chosen run opens in the live app; closing that returns to the list."""
    state = BrowseState([os.path.abspath(r) for r in roots], use_cache)
    while True:
        chosen = BrowseApp(state).run()
        if not chosen:
            return 0
        from ..core.layout import NotARun
        from ..tui.app import GymwatchApp

        try:
            GymwatchApp(str(chosen)).run()
        except NotARun as exc:          # gone or changed since it was listed: back to the list
            print(f"gymwatch: {exc}")
