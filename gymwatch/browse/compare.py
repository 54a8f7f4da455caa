"""The browser's comparison of two runs: `gymwatch diff A B` as a screen.

Both runs are read in a thread (gymwatch.diff.load: the report's model). The head says the two
runs and diff's verdict line; the trials that changed are a table; below it the flipped tasks, the
statistics, Gym's own comparison report when one is beside the runs, and every task, flipped ones
first (then the worse by how much, the better, the same). `a` / `b` open the selected trial's card
in run A / B (the live screen's card: status and its rule, answers, conversation, the lines that
explain it; `r` there gives the row, a listed line opens its log at that line). Everything taken
from run files is shown as plain Text, never as markup.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional, Union

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ..core.model import Evidence, RunState
from ..core.sanitize import clean
from ..diff import Unreadable, compare, counts_text, load, reward, seconds, short_counts, status, table
from ..diffstats import flipped_line, signed, summary_lines
from ..gymcompare import lines as gym_lines
from ..tui.typeahead import closed_early
from .fmt import rel

CHANGE_STYLE = {"worse": "bold red", "better": "green", "changed": "yellow"}
TRIAL_COLUMNS = (("task", "task"), ("rollout", "rollout"), ("a_status", "A status"), ("a_reward", "A reward"),
                 ("b_status", "B status"), ("b_reward", "B reward"), ("change", "change"))


class CompareScreen(Screen):
    DEFAULT_CSS = """
    CompareScreen #cmp-head { height: auto; padding: 0 1; background: $boost; }
    CompareScreen #cmp-trials { height: 1fr; min-height: 5; }
    CompareScreen #cmp-more { height: 2fr; border-top: solid $primary-darken-2; }
    """
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="compare.back"),
        Binding("a,enter", "open('a')", "Card in A", id="compare.open_a"),
        Binding("b", "open('b')", "Card in B", id="compare.open_b"),
        Binding("tab", "app.focus_next", "Next pane", show=False),
    ]

    def __init__(self, a: str, b: str, roots: Optional[list[str]] = None):
        super().__init__()
        self.a, self.b, self.roots = a, b, roots or []
        self.states: dict[str, RunState] = {}
        self.result: Optional[dict[str, Any]] = None
        self.loaded = False

    def compose(self) -> ComposeResult:
        yield Static(Text(f"comparing {self._label(self.a)} (A) with {self._label(self.b)} (B)…"), id="cmp-head")
        table: DataTable[Text] = DataTable(id="cmp-trials", cursor_type="row", zebra_stripes=True)
        for key, label in TRIAL_COLUMNS:
            table.add_column(label, key=key)
        yield table
        with VerticalScroll(id="cmp-more"):
            yield Static(id="cmp-tasks")
        yield Footer()

    def _label(self, path: str) -> str:
        return clean(rel(path, self.roots)) if self.roots else clean(path)

    def on_mount(self) -> None:
        if closed_early(self):
            return
        self.query_one("#cmp-trials", DataTable).focus()
        self.load()

    @work(thread=True, exclusive=True, group="compare")
    def load(self) -> None:
        try:
            a, b = load(self.a), load(self.b)
        except Unreadable as exc:
            self.app.call_from_thread(self._failed, str(exc))
            return
        result = compare(a, b, (self.a, self.b))
        self.app.call_from_thread(self._show, a, b, result)

    def _failed(self, message: str) -> None:
        self.query_one("#cmp-head", Static).update(Text(clean(message), style="bold red"))
        self.loaded = True

    def _show(self, a: RunState, b: RunState, d: dict[str, Any]) -> None:
        self.states, self.result = {"a": a, "b": b}, d
        head = Text()
        for side in ("a", "b"):
            s = d[side]
            head.append(f"{side.upper()} ", style="bold reverse")
            head.append(f" {self._label(s['path'])}  ")
            head.append(s["verdict"], style="bold")
            head.append(f"  {counts_text(s['counts'])}; mean reward {reward(s['mean_reward'])}"
                        f"  (Gym {s['gym_version'] or '?'})\n")
        stats = d["stats"]
        head.append(stats["verdict"], style="bold " + verdict_style(stats))
        head.append("\n")
        n = len(d["trials"])
        head.append(f"{n} trial{'s' if n != 1 else ''} changed", style="bold")
        head.append(f": {d['worse']} worse, {d['better']} better" if n else ": none")
        head.append("  ·  a (enter) / b: the selected trial's card in run A / B")
        self.query_one("#cmp-head", Static).update(head)
        self._fill(self.query_one("#cmp-trials", DataTable), d["trials"])
        self.query_one("#cmp-tasks", Static).update(self._more(d))
        self.loaded = True

    @staticmethod
    def _fill(table: DataTable, trials: list[dict[str, Any]]) -> None:
        """The columns get widths from all their cells before any row is shown: left to the
        DataTable, they are measured on its next idle, and a row drawn before that (the cursor's)
        keeps its first, narrower render from the line cache (Textual 8.2)."""
        rows = [(Text(str(t["task_index"])), Text(str(t["rollout_index"])), Text(status(t["a_status"])),
                 Text(reward(t["a_reward"])), Text(status(t["b_status"])), Text(reward(t["b_reward"])),
                 Text(t["change"], style=CHANGE_STYLE.get(t["change"], ""))) for t in trials]
        table.clear(columns=True)
        for i, (key, label) in enumerate(TRIAL_COLUMNS):
            table.add_column(label, key=key, width=max([len(label), *(r[i].cell_len for r in rows)]))
        for t, cells in zip(trials, rows, strict=True):
            table.add_row(*cells, key=f"{t['task_index']}/{t['rollout_index']}")

    def _more(self, d: dict[str, Any]) -> Text:
        stats = d["stats"]
        out = Text()
        flipped = flipped_line(stats)
        if flipped:
            lost = any(f["flip"] == "pass_to_fail" for f in stats["flipped"])
            out.append(flipped + "\n", style=("bold red" if lost else "bold green") if stats["flipped"] else "")
        out.append("paired on (task, rollout), the trials both runs scored\n", style="bold")
        for line in summary_lines(stats):
            out.append(f"  {line}\n")
        if d["gym_compare"] is not None:
            head, *rest = gym_lines(d["gym_compare"])
            out.append(clean(head) + "\n", style="bold")
            for line in rest:
                out.append(clean(line) + "\n", style="yellow" if line.startswith("    - ") else "")
        out.append("tasks, flipped first (trials ok/failed/never ran/missing)\n", style="bold")
        tasks = sorted(d["tasks"], key=task_order)
        lines = table(["task", "change", "A -> B paired", "(n)", "flipped", "A trials", "B trials"],
                      [task_cells(t) for t in tasks], right=frozenset({0, 1, 3}))
        for line, style in zip(lines, ["", *map(task_style, tasks)], strict=True):
            out.append(line + "\n", style=style)
        out.append("servers: time to ready and state\n", style="bold")
        for line in table(["server", "A ready in", "A state", "B ready in", "B state"],
                          [[clean(s["name"]), seconds(s["a_time_to_ready"]), status(s["a_state"]),
                            seconds(s["b_time_to_ready"]), status(s["b_state"])] for s in d["servers"]]):
            out.append(line + "\n")
        out.append(f"verdicts: {d['a']['verdict']} -> {d['b']['verdict']}", style="bold")
        return out

    def selected_trial(self) -> Optional[dict[str, Any]]:
        table = self.query_one("#cmp-trials", DataTable)
        if self.result is None or not table.row_count:
            return None
        return self.result["trials"][table.cursor_row]

    def action_open(self, side: str) -> None:
        """The trial's card in run A or B; a trial that run does not have shows why instead."""
        t = self.selected_trial()
        if t is None:
            return
        state, key = self.states[side], (t["task_index"], t["rollout_index"])
        trial = state.trials.get(key)
        if trial is None:
            self.app.push_screen(TrialRowScreen(side, state, key))
            return
        from ..core import card
        from ..core.model import SRC_FAILURE_ROW
        from ..tui.card import AroundIt, TrialCard

        row = card.read_row(state.root, trial.evidence) if trial.evidence is not None \
            and trial.source >= SRC_FAILURE_ROW else None
        shown = card.build(state, trial, row)

        def chosen(ev: Union[Evidence, AroundIt, None]) -> None:
            if isinstance(ev, AroundIt):    # no merged view of the servers' logs here: the line's own log
                ev = ev.picked or next(iter(ev.lines), None)
                if ev is None:
                    self.notify("no line of this trial to show around it", markup=False)
                    return
            if ev is None:
                return
            if shown.row is not None and ev is shown.row:
                self.app.push_screen(TrialRowScreen(side, state, key))
            else:
                self.app.push_screen(EvidenceScreen(state.root, ev))

        context = f"run {side.upper()}: {self._label(state.root)}"
        self.app.push_screen(TrialCard(shown, context), callback=chosen)


FLIP_ORDER = {"pass_to_fail": 0, "fail_to_pass": 1}
DIRECTION_ORDER = {"worse": 2, "better": 3, "same": 4}
TASK_STYLE = {"pass_to_fail": "bold red", "fail_to_pass": "bold green", "worse": "red", "better": "green"}
FLIP_WORDS = {"pass_to_fail": "passed -> failed", "fail_to_pass": "failed -> passed"}


def task_order(t: dict[str, Any]) -> tuple:
    """Flipped tasks first (passed -> failed, then back), then the worse by how much, the better,
    the same, and last the tasks no trial of which both runs scored."""
    rank = FLIP_ORDER.get(t["flip"] or "", DIRECTION_ORDER.get(t["direction"] or "", 5))
    return rank, t["change"] if rank == 2 else -(t["change"] or 0.0), t["task_index"]


def task_style(t: dict[str, Any]) -> str:
    """Flips and changes in red / green; a task whose trials' statuses changed, yellow."""
    moved = short_counts(t["a"]) != short_counts(t["b"])
    return TASK_STYLE.get(t["flip"] or "", TASK_STYLE.get(t["direction"] or "", "yellow" if moved else ""))


def task_cells(t: dict[str, Any]) -> list[str]:
    """task, change, paired means A -> B, how many paired, the flip, the trials' counts."""
    if t["paired"]:
        paired = [signed(t["change"]), f"{reward(t['a_paired_mean'])} -> {reward(t['b_paired_mean'])}", str(t["paired"])]
    else:
        paired = ["", "none scored in both", "0"]
    return [str(t["task_index"]), *paired, FLIP_WORDS.get(t["flip"] or "", ""), short_counts(t["a"]), short_counts(t["b"])]


def verdict_style(stats: dict[str, Any]) -> str:
    if stats["tasks_worse"] > stats["tasks_better"]:
        return "red"
    return "green" if stats["tasks_better"] > stats["tasks_worse"] else ""


class EvidenceScreen(Screen):
    """A line of a run's file, shown in its log (read-only, at that line)."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="compare.line_back")]

    def __init__(self, root: str, ev: Evidence):
        super().__init__()
        self.root, self.ev = root, ev

    def compose(self) -> ComposeResult:
        from ..tui.logview import LogView

        yield LogView(id="cmp-log")
        yield Footer()

    def on_mount(self) -> None:
        from ..tui.logview import LogView

        if closed_early(self):
            return
        view = self.query_one(LogView)
        path = self.ev.file if os.path.isabs(self.ev.file) else os.path.join(self.root, self.ev.file)
        view.border_title = clean(self.ev.where())
        view.open(path, clean(self.ev.file), self.ev.line)
        view.focus()


class TrialRowScreen(Screen):
    """One trial of one run: its status, reward and the row (or the line) behind them."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="compare.row_back")]

    def __init__(self, side: str, state: RunState, key: tuple[int, int]):
        super().__init__()
        self.side, self.state, self.key = side, state, key
        self.text = row_text(side, state, key)

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.text, markup=False, id="row-text")
        yield Footer()


def row_text(side: str, state: RunState, key: tuple[int, int]) -> Text:
    from ..core.card import read_row

    out = Text()
    out.append(f"run {side.upper()}: {clean(state.root)}\n", style="bold")
    out.append(f"task {key[0]} rollout {key[1]}: ")
    t = state.trials.get(key)
    if t is None:
        out.append("not in this run\n", style="yellow")
        return out
    out.append(f"{t.status}, reward {reward(t.reward)}\n", style="bold")
    if t.failure_class or t.message:
        out.append(clean(f"{t.failure_class} {t.message}".strip()) + "\n")
    ev = t.evidence
    if ev is None:
        out.append("no row: nothing in the run's files names this trial beyond its inputs\n")
        return out
    out.append(f"{clean(ev.file)}:{ev.line}\n", style="dim")
    row = read_row(state.root, ev)
    out.append(clean(json.dumps(row, indent=2, ensure_ascii=False)) if row is not None else clean(ev.text))
    return out
