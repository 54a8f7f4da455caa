"""The screen of a submission of several benchmarks (`gym eval submit`): the whole's verdict at
the top (the report's: its worst benchmark's), then one row per benchmark: its Slurm job (the
ids of its resume chain; queued and why, for how long, when Slurm expects it to start; running
where and for how long of its time limit, flagged near it; ended how), its verdict and its
trials. Enter opens the benchmark's own screen (`MainScreen`: its board with the service steps
and Gym's servers, trials, cards, evidence); escape there comes back here.

The polls run off the UI thread (`polling.Poller` over `livesub.LiveSubmission`), each coming back
as a `SubmissionChanged`; the rows are made again from the state after each (a few benchmarks).
While a benchmark's screen is on top, this one neither polls nor watches: that screen polls the
benchmark it shows, and Slurm is still asked for all (the feed is the submission's).
"""

from __future__ import annotations

import asyncio
from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ..core.cluster.model import P_ENDED, P_QUEUED, P_RUNNING, Conclusion
from ..core.model import T_COMPLETED, T_FAILED, T_MISSING, T_NEVER_RAN, RunState
from ..core.sanitize import clean
from ..core.verdict import Verdict, counts
from ..report import Benchmark
from .fmt import STATUS_LOOK, VERDICT_LOOK, plain
from .livesub import LiveSubmission
from .polling import Poller, SubmissionChanged
from .summary import Items, Summary
from .watch import ChangeSource

COLUMNS = (("bench", "Benchmark"), ("jobs", "Job"), ("slurm", "Slurm"), ("verdict", "Verdict"), ("trials", "Trials"))
SLURM_MIN = 16          # the Slurm column's least width; the line under the table has it whole
PHASE_STYLE = {P_QUEUED: "yellow", P_RUNNING: "cyan", P_ENDED: "", "failed": "bold red"}


def jobs_text(state: RunState) -> str:
    """The Slurm job ids of the benchmark's resume chain, oldest first ("" when it has none)."""
    job = state.job
    return "→".join(ln.job_id for ln in job.links) if job is not None else ""


def slurm_text(c: Optional[Conclusion]) -> Text:
    """The job's state in a person's words (the core's conclusion), flagged near its time limit."""
    if c is None:
        return Text("not known yet", style="dim")
    style = PHASE_STYLE["failed"] if c.failed else PHASE_STYLE.get(c.phase, "")
    t = Text(end="")
    if c.near_limit:
        t.append("⚠ ", style="bold yellow")
    t.append_text(plain(c.headline, 400, style))
    if c.inferred:
        t.append(" (from files)", style="dim")
    return t


def trials_text(state: RunState) -> Text:
    c = counts(state)
    done = c[T_COMPLETED] + c[T_FAILED] + c[T_NEVER_RAN]
    total = max(state.expected_total or 0, len(state.trials))
    t = Text(f"{done}/{total or '?'}", end="")
    for k in (T_FAILED, T_NEVER_RAN, T_MISSING):
        if c[k]:
            label, style, _ = STATUS_LOOK[k]
            t.append(f" {label.split()[0]}{c[k]}", style=style)
    return t


def verdict_text(v: Verdict) -> Text:
    label, style = VERDICT_LOOK.get(v.name, (v.name.upper(), "bold"))
    return Text(label, style=style, end="")


def row_cells(b: Benchmark) -> dict[str, Text]:
    name, state, v = b
    return {"bench": plain(name, 60, "bold"), "jobs": plain(jobs_text(state), 60),
            "slurm": slurm_text(state.job_conclusion), "verdict": verdict_text(v), "trials": trials_text(state)}


def detail_text(b: Benchmark) -> Text:
    """The line under the table: the selected benchmark's verdict and job whole (the job's words
    once: a verdict the job decided says them already)."""
    name, state, v = b
    t = Text(end="", overflow="fold")
    t.append_text(plain(name, 60, "bold"))
    t.append("  ")
    t.append_text(verdict_text(v))
    t.append(" ")
    t.append_text(plain(v.reason, 4000))
    c = state.job_conclusion
    if c is None or c.headline not in v.reason:
        t.append("\nSlurm: ", style="dim")
        t.append_text(slurm_text(c))
    return t


def fit_widths(rows: list[dict[str, Text]], width: int) -> dict[str, int]:
    """Every column as wide as its widest cell, the Slurm column cut to the room left (at least
    SLURM_MIN: then the others give way, the benchmark's name last)."""
    widths = {key: max([len(label)] + [r[key].cell_len for r in rows]) for key, label in COLUMNS}
    gaps = 2 * len(COLUMNS) + 1     # DataTable's cell padding, and the border
    others = sum(w for k, w in widths.items() if k != "slurm")
    room = width - gaps - others
    if room < SLURM_MIN:
        cut = SLURM_MIN - room
        for key in ("jobs", "bench"):
            give = min(cut, max(0, widths[key] - 8))
            widths[key] -= give
            cut -= give
    widths["slurm"] = max(min(room, widths["slurm"]), SLURM_MIN)
    return widths


class BenchmarksTable(DataTable):
    """One row per benchmark; enter posts DataTable's RowSelected (the screen opens it)."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Open", id="submission.open"),
        Binding("up,k", "cursor_up", "Up", show=False, id="submission.up"),
        Binding("down,j", "cursor_down", "Down", show=False, id="submission.down"),
    ]


class SubmissionScreen(Screen):
    """The default screen when the run named is a submission of several benchmarks."""

    DEFAULT_CSS = """
    SubmissionScreen #sub-summary { height: auto; padding: 0 1; background: $boost; }
    SubmissionScreen #sub-pane { height: auto; border: round $primary-darken-2; }
    SubmissionScreen #sub-pane:focus-within { border: round $accent; }
    SubmissionScreen #benchmarks { height: auto; max-height: 60vh; overflow-x: hidden; }
    SubmissionScreen #sub-detail { height: auto; padding: 0 1; background: $boost; }
    """

    def __init__(self, live: LiveSubmission, *, source: ChangeSource, tick: float, open_run) -> None:
        """`open_run(name)`: the app's, pushing the benchmark's own screen."""
        super().__init__(id="_default")
        self.live = live
        self.poller = Poller(self, live, source, tick)
        self.open_run = open_run
        self.shown: list[Benchmark] = []
        self.mounted = asyncio.Event()

    def compose(self) -> ComposeResult:
        self.summary = Summary(id="sub-summary")
        self.table = BenchmarksTable(id="benchmarks", cursor_type="row", zebra_stripes=False)
        self.detail = Static(id="sub-detail", markup=False)
        yield self.summary
        with Vertical(id="sub-pane"):
            yield self.table
            yield self.detail
        yield Footer()

    def on_mount(self) -> None:
        try:
            self.query_one("#sub-pane").border_title = "benchmarks (enter: open one)"
            self.live.poll()              # the first frame shows the submission
            self.show()
            self.poller.start()
            self.table.focus()
        finally:
            self.mounted.set()

    # --- reading ---------------------------------------------------------------------------
    def read_now(self) -> None:
        """Poll and show before returning (tests, scripts)."""
        self.poller.read_now(lambda _changes: self.show())

    @on(SubmissionChanged)
    def _changed(self, event: SubmissionChanged) -> None:
        if not self.app.is_running or self.app._exit:
            return
        self.show()
        self.poller.applied(event)

    def on_screen_suspend(self) -> None:
        self.poller.pause()

    def on_screen_resume(self) -> None:
        if self.poller.paused:
            self.poller.resume()
            self.show()

    def show(self) -> None:
        """The summary and every row, from the state now."""
        with self.live.lock, self.app.batch_update():
            benchmarks = self.live.benchmarks()
            _, v = self.live.whole(benchmarks)
            self.shown = benchmarks
            self.summary.show(self._head(benchmarks, v), self._reason(v))
            self._rows([row_cells(b) for b in benchmarks])
            self._detail()

    def _head(self, benchmarks: list[Benchmark], v: Verdict) -> Text:
        t = Items(no_wrap=True, end="")
        label, style = VERDICT_LOOK.get(v.name, (v.name.upper(), "bold"))
        t.append(f" {label} ", style=style)
        t.gap()
        t.append_text(plain(self.live.name, 60, "bold"))
        t.gap()
        t.append(f"{len(benchmarks)} benchmarks")
        phases: dict[str, int] = {}
        for _, state, _ in benchmarks:
            c = state.job_conclusion
            phase = c.phase if c is not None else "unknown"
            phases[phase] = phases.get(phase, 0) + 1
        for phase in (P_QUEUED, P_RUNNING, P_ENDED):
            if phases.get(phase):
                t.gap()
                t.append(f"{phase} {phases[phase]}", style=PHASE_STYLE.get(phase, ""))
        sub = self.live.sub
        if sub.cluster:
            t.gap()
            t.append(f"cluster {clean(sub.cluster)}", style="dim")
        return t

    def _reason(self, v: Verdict) -> Text:
        t = Text(end="", overflow="fold")
        t.append_text(plain(v.reason, 4000))
        return t

    def _rows(self, rows: list[dict[str, Text]]) -> None:
        table = self.table
        widths = fit_widths(rows, self.size.width - 2)
        keep = table.cursor_row
        if [c.width for c in table.columns.values()] != [widths[k] for k, _ in COLUMNS]:
            table.clear(columns=True)
            for key, label in COLUMNS:
                table.add_column(label, key=key, width=widths[key])
        else:
            table.clear()
        for name, cells in zip(self.live.names, rows, strict=True):
            for key, cell in cells.items():       # a cut cell says so (…): its whole is under the table
                cell.truncate(widths[key], overflow="ellipsis")
            table.add_row(*(cells[k] for k, _ in COLUMNS), key=name)
        if rows:
            table.move_cursor(row=min(max(keep, 0), len(rows) - 1), animate=False)

    def _detail(self) -> None:
        row = self.table.cursor_row
        if 0 <= row < len(self.shown):
            self.detail.update(detail_text(self.shown[row]))

    @on(DataTable.RowHighlighted, "#benchmarks")
    def _highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._detail()

    @on(DataTable.RowSelected, "#benchmarks")
    def _selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.open_run(event.row_key.value)

    def on_resize(self) -> None:
        if self.shown:
            self.show()
