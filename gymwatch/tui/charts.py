"""`c` / `t`: the run's charts over the live screen, a page at a time: the startup timeline (each
server's steps on one axis, the critical path marked), throughput (results over time, failures and
never-ran marked), rewards per agent and per task, tokens per trial, and cost and speed per agent.

Drawn with block characters from the model in memory (core/timeline.py, core/figures.py,
core/costs.py; the shapes are gymwatch/charts.py's, as in the Markdown report). A page is computed
again only when the run changed (the main screen says so: `run_changed()`), at most once a
CHART_EVERY seconds, so a 100k-trial run costs one computation a second while it collects.
Names from the run are plain Text, never markup.
"""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .. import charts
from ..core import costs, figures, timeline
from ..core.model import S_FAILED, S_READY, S_STOPPED, RunState
from ..core.sanitize import clean
from .fmt import STEP_LOOK
from .live import LiveRun

TIMELINE, THROUGHPUT, REWARDS, TOKENS, COST = "timeline", "throughput", "rewards", "tokens", "cost"
PAGES = (TIMELINE, THROUGHPUT, REWARDS, TOKENS, COST)
TITLES = {TIMELINE: "Startup", THROUGHPUT: "Throughput", REWARDS: "Rewards", TOKENS: "Tokens", COST: "Cost"}
CHART_EVERY = 1.0       # seconds between two computations of a page while the run changes
SCREEN_ROWS = 60        # throughput bars at most (the page scrolls)
OUTCOME_STYLE = {S_READY: "green", S_FAILED: "bold red", S_STOPPED: "dim"}
PART_STYLE = {charts.COMPLETED_PART: "green", charts.FAILED_PART: "bold red", charts.NEVER_PART: "yellow"}


def render_page(state: Optional[RunState], page: str, width: int, now: Optional[float] = None) -> Text:
    """One page of the charts at `width` columns (pure: the tests and the benchmark call it)."""
    if state is None:
        return Text("No run yet.", style="dim")
    width = max(width, 30)
    return {TIMELINE: _timeline, THROUGHPUT: _throughput, REWARDS: _rewards, TOKENS: _tokens,
            COST: _cost}[page](state, width, now)


def _lines(*parts: Text) -> Text:
    return Text("\n").join(parts)


def _timeline(state: RunState, width: int, now: Optional[float]) -> Text:
    st = timeline.startup(state, now)
    if not st.lanes:
        return Text("No server seen yet.", style="dim")
    out = []
    if st.timed and st.start is not None and st.end is not None:
        name_w = min(max(len(ln.name) for ln in st.lanes), max(12, width // 3))
        tail_w = min(28, max(len(charts.lane_tail(st, ln)) for ln in st.lanes))
        bar_w = max(10, width - name_w - tail_w - 6)
        took = charts.duration(st.end - st.start)
        head = Text(f"{'':{name_w + 2}} 0s", style="dim")
        head.append(f"{took:>{bar_w - 2}}", style="dim")
        out.append(head)
        for lane in st.lanes:
            row = Text("* " if lane.critical else "  ", style="bold red" if lane.critical else "")
            row.append(f"{_cut(clean(lane.name), name_w):<{name_w}} ", style="bold red" if lane.critical else "bold")
            cells = [(" ", "")] * bar_w
            for a, b, sp in charts.lane_cells(st, lane, bar_w):
                style = STEP_LOOK.get(sp.step, "white")
                for x in range(a, b):
                    cells[x] = ("█", style)
            for ch, style in cells:
                row.append(ch, style=style)
            row.append(f" {clean(charts.lane_tail(st, lane))}", style=OUTCOME_STYLE.get(lane.outcome, ""))
            out.append(row)
        legend = Text("steps: ", style="dim")
        for step, style in STEP_LOOK.items():
            legend.append("█", style=style)
            legend.append(f" {step}  ", style="dim")
        out += [legend, Text("* the critical path: the server everything waited for", style="dim")
                if st.critical else Text("still starting: no critical path yet", style="dim")]
    else:
        out.append(Text("No times: gymwatch times each server's steps while it watches the run start; this run "
                        "was read after the fact.", style="dim"))
    out.append(Text(""))
    out += [Text(clean(line)) for line in charts.startup_steps(st)]
    return _lines(*out)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _throughput(state: RunState, width: int, now: Optional[float]) -> Text:
    tp = figures.throughput(state)
    rows = charts.throughput_rows(tp, max(10, width - 30), rows=SCREEN_ROWS)
    if not rows:
        return Text("No result has a time yet.", style="dim")
    out = [Text(charts.throughput_caption(tp, SCREEN_ROWS), style="dim")]
    for label, parts, notes in rows:
        row = Text(label + " ")
        for kind, n in parts:
            row.append(charts.PART_MARK[kind] * n, style=PART_STYLE[kind])
        if notes:
            row.append(f"  {notes}", style="dim")
        out.append(row)
    return _lines(*out)


def _spreads(spreads: list[figures.Spread], width: int, fmt, what: str) -> list[Text]:
    out: list[Text] = []
    for sp in spreads:
        rows = charts.spread_rows(sp, max(10, width - 24), fmt)
        if not rows:
            continue
        out.append(Text(f"{clean(sp.title)} ({sp.n}{what})", style="bold"))
        for label, bar in rows:
            out.append(Text.assemble(label + " ", (bar, "cyan")))
        out.append(Text(""))
    return out


def _rewards(state: RunState, width: int, now: Optional[float]) -> Text:
    out = _spreads([*figures.rewards_by_agent(state), figures.task_means(state)], width, charts.reward, "")
    return _lines(*out) if out else Text("No completed trial has a reward yet.", style="dim")


def _tokens(state: RunState, width: int, now: Optional[float]) -> Text:
    out = _spreads(figures.tokens_per_trial(state), width, None, " trials that ran")
    return _lines(*out) if out else Text("No trial has token counts yet.", style="dim")


def _cost(state: RunState, width: int, now: Optional[float]) -> Text:
    agents = costs.costs(state)
    if not agents:
        return Text("No trial has a result yet.", style="dim")
    out = [Text("per trial: p50 / p90 / max; duration p50 / p90", style="dim")]
    for c in agents:
        out += [Text(""), Text(clean(c.agent), style="bold"),
                Text(f"  {c.trials} trial(s), {c.ran} ran (not never-ran)"),
                Text(f"  input tokens  {charts.number(c.input_tokens):>8}   per trial {charts.pct(c.input)}"),
                Text(f"  output tokens {charts.number(c.output_tokens):>8}   per trial {charts.pct(c.output)}"),
                Text(f"  duration      {charts.duration_words(c)}")]
        for w in charts.outlier_words(c):
            out.append(Text(f"  far off: {w}", style="yellow"))
    return _lines(*out)


class ChartsScreen(ModalScreen[None]):
    """The charts, a page at a time; left / right (or the page's number) move between pages."""

    DEFAULT_CSS = """
    ChartsScreen { align: center middle; }
    ChartsScreen > Vertical { width: 100%; height: 100%; border: thick $accent; background: $surface; }
    ChartsScreen #charts-tabs { height: 1; padding: 0 1; background: $boost; }
    ChartsScreen #charts-body { padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape,q", "dismiss", "Close", id="charts.close"),
        Binding("right,tab,l", "page(1)", "Next chart", id="charts.next"),
        Binding("left,shift+tab,h", "page(-1)", "Previous chart", show=False, id="charts.previous"),
        *(Binding(str(i + 1), f"show('{p}')", TITLES[p], show=False, id=f"charts.{p}") for i, p in enumerate(PAGES)),
    ]

    def __init__(self, live: LiveRun, page: str = THROUGHPUT) -> None:
        super().__init__()
        self.live = live
        self.page = page
        self._dirty = False
        self._drawn: tuple = ()

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="charts-tabs")
            with VerticalScroll(id="charts-body"):
                yield Static(id="charts-page")

    def on_mount(self) -> None:
        self.draw()
        self.set_interval(CHART_EVERY, self._tick)

    def on_resize(self) -> None:
        self.draw()

    def run_changed(self) -> None:
        """The run changed: draw the page again at the next tick (not at every poll)."""
        self._dirty = True

    def _tick(self) -> None:
        if self._dirty or self.page == TIMELINE:      # (a step still going grows with the clock)
            self._dirty = False
            self.draw(later=True)

    def action_page(self, step: int) -> None:
        self.action_show(PAGES[(PAGES.index(self.page) + step) % len(PAGES)])

    def action_show(self, page: str) -> None:
        if page in PAGES and page != self.page:
            self.page = page
            self.query_one("#charts-body", VerticalScroll).scroll_home(animate=False)
            self.draw()

    def draw(self, later: bool = False) -> None:
        """The page drawn again from the run now. `later`: computed in a thread (a 100k-trial run's
        figures take a tenth of a second) and shown when done; else at once (opened, a page chosen)."""
        if not self.is_attached:
            return
        page, width = self.page, self.query_one("#charts-body").content_region.width or self.size.width - 4
        view = self.live.snapshot()
        if not later:
            self._show(page, render_page(view, page, width, self.live.clock()))
            return

        def work() -> None:
            body = render_page(view, page, width, self.live.clock())
            self.app.call_from_thread(self._show, page, body)

        self.run_worker(work, thread=True, exclusive=True, group="charts")

    def _show(self, page: str, body: Text) -> None:
        if page != self.page or not self.is_attached:
            return
        tabs = Text()
        for i, p in enumerate(PAGES):
            tabs.append(f" {i + 1} {TITLES[p]} ", style="reverse bold" if p == self.page else "")
        tabs.append("   ←/→ or 1-5 · escape closes", style="dim")
        if (tabs.plain, body.markup) != self._drawn:
            self._drawn = (tabs.plain, body.markup)
            self.query_one("#charts-tabs", Static).update(tabs)
            self.query_one("#charts-page", Static).update(body)
