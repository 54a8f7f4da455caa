"""The trials table: keyed rows, update_cell for changed cells, add_row for new ones.

A filter or sort change rebuilds the view once (a user action); a poll never does.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Optional

from rich.text import Text
from textual.widgets import DataTable

from ..core.model import RunState, Trial, TrialKey
from .fmt import STATUS_LOOK, plain, reward

COLUMNS = (("task", "Task"), ("rollout", "Roll"), ("attempt", "Att"), ("status", "Status"),
           ("reward", "Reward"), ("tokens", "Tokens in/out"), ("why", "Failure"))
FILTERS = ("all", "failed", "never_ran", "missing", "pending")
SORTS = ("key", "status", "reward", "tokens")
FILL_BATCH = 1000       # rows added per batch when (re)building the view
SORT_AT_ONCE = 5000     # smaller tables re-sort on every add; bigger ones at most every SORT_EVERY s
SORT_EVERY = 2.0
SEVERITY = {"never_ran": 0, "failed": 1, "missing": 2, "pending": 3, "completed": 4}


def row_key(key: TrialKey) -> str:
    return f"{key[0]}:{key[1]}:{'' if key[2] is None else key[2]}"


def sort_value(t: Trial, by: str) -> tuple:
    k = (t.task_index, t.rollout_index, -1 if t.attempt_index is None else t.attempt_index)
    if by == "status":
        return (SEVERITY.get(t.status, 9),) + k
    if by == "reward":
        return (t.reward is None, -(t.reward or 0.0)) + k
    if by == "tokens":
        return (-((t.input_tokens or 0) + (t.output_tokens or 0)),) + k
    return k


LABEL_STATUS = {v[0]: k for k, v in STATUS_LOOK.items()}


def row_sort_value(row: tuple, by: str) -> tuple:
    """sort_value() computed back from a row's cells (DataTable.sort sees cells, not trials)."""
    task, roll, att, status, rw, toks = (getattr(c, "plain", c) for c in row[:6])
    k = (int(task), int(roll), int(att) if att else -1)
    if by == "status":
        return (SEVERITY.get(LABEL_STATUS.get(status, ""), 9),) + k
    if by == "reward":
        x = _num(rw)
        return (x is None, -(x or 0.0)) + k
    if by == "tokens":
        return (-sum(_num(p) or 0 for p in toks.split("/")),) + k
    return k


def _num(s: str) -> Optional[float]:
    try:
        return float(s)
    except ValueError:
        return None


def cells(t: Trial) -> tuple:
    label, style, row_style = STATUS_LOOK.get(t.status, (t.status, "", ""))
    rw = reward(t.reward)
    if t.status == "never_ran":
        rw = "withheld" + (f" ({t.withheld_reward:g})" if t.withheld_reward is not None else "")
    toks = "" if t.input_tokens is None and t.output_tokens is None else \
        f"{t.input_tokens if t.input_tokens is not None else '-'}/{t.output_tokens if t.output_tokens is not None else '-'}"
    why = t.failure_class + (": " if t.failure_class and t.message else "") + t.message
    if t.status == "never_ran" and not why:
        why = "model never called (empty output, zero usage)"
    if t.status == "missing" and not why:
        why = "no row: the collector ended without it"
    att = "" if t.attempt_index is None else str(t.attempt_index)
    if not row_style:   # the common rows: plain strings (digits only: no markup) save memory
        return (str(t.task_index), str(t.rollout_index), att, Text(label, style=style), rw, toks,
                plain(why, 100) if why else "")
    return (Text(str(t.task_index), style=row_style), Text(str(t.rollout_index), style=row_style),
            Text(att, style=row_style), Text(label, style=style), Text(rw, style=row_style),
            Text(toks, style=row_style), plain(why, 100, row_style))


class TrialsTable(DataTable):
    BINDINGS = [("v", "cycle_filter", "Filter"), ("s", "cycle_sort", "Sort"), ("l", "open_cause", "Cause log")]

    def __init__(self, **kw):
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)
        self.state: Optional[RunState] = None
        self.view = "all"
        self.sort_by = "key"
        self._cells: dict[str, tuple] = {}
        self._keys: dict[str, TrialKey] = {}
        self._fill: OrderedDict[TrialKey, None] = OrderedDict()   # rows still to add, in order
        self._gen = 0
        self._needs_sort = False
        self._sorted_at = 0.0

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)
        self._title()

    # --- live updates -------------------------------------------------------------------
    def rebuild(self, state: Optional[RunState]) -> None:
        """Clear and re-add the rows in view: on a reset or a filter/sort change only.

        Rows go in by batches between paints, so a big run shows its first rows at once."""
        self.state = state
        self.clear()
        self._cells.clear()
        self._keys.clear()
        self._gen += 1
        self._fill.clear()
        self._needs_sort = False
        if state is not None:
            trials = sorted((t for t in state.trials.values() if self._in_view(t)),
                            key=lambda t: sort_value(t, self.sort_by))
            self._fill.update((t.key, None) for t in trials)
            self._fill_some(self._gen)
        self._title()

    def _fill_some(self, gen: int) -> None:
        if gen != self._gen or self.state is None:
            return                       # a newer rebuild took over
        for _ in range(min(FILL_BATCH, len(self._fill))):
            key, _ = self._fill.popitem(last=False)
            t = self.state.trials.get(key)
            if t is not None and self._in_view(t) and row_key(key) not in self._cells:
                self._add(t)
        if self._fill:
            self.set_timer(0.01, lambda: self._fill_some(gen))   # paint, then the next batch
        else:
            self.flush()
        self._title()

    @property
    def filling(self) -> bool:
        return bool(self._fill)

    def update(self, state: RunState, changed: set[TrialKey], removed: set[TrialKey]) -> None:
        self.state = state
        for key in removed:
            self._fill.pop(key, None)
            rk = row_key(key)
            if rk in self._cells:
                self._remove(rk)
        for key in changed:
            t = state.trials.get(key)
            rk = row_key(key)
            if t is None or not self._in_view(t):
                self._fill.pop(key, None)
                if rk in self._cells:
                    self._remove(rk)
            elif rk in self._cells:
                self._patch(rk, cells(t))
            elif self._fill:
                self._fill[key] = None    # still filling: it goes in with its batch
                self._needs_sort = True
            else:
                self._add(t)
                self._needs_sort = True
        self.flush()
        self._title()

    def flush(self, force: bool = False) -> None:
        """Sort after adds: at once on small tables, at most every SORT_EVERY s on big ones."""
        if not self._needs_sort or self._fill:
            return
        now = time.monotonic()
        if force or self.row_count < SORT_AT_ONCE or now - self._sorted_at >= SORT_EVERY:
            self._needs_sort, self._sorted_at = False, now
            self._sort()

    def _add(self, t: Trial) -> None:
        rk = row_key(t.key)
        c = cells(t)
        self.add_row(*c, key=rk)
        self._cells[rk], self._keys[rk] = c, t.key

    def _patch(self, rk: str, new: tuple) -> None:
        for (col, _), a, b in zip(COLUMNS, self._cells[rk], new):
            if a != b:
                # Widen only: a narrower value makes DataTable re-measure the whole column.
                wider = (b.cell_len if isinstance(b, Text) else len(b)) > self.columns[col].content_width
                self.update_cell(rk, col, b, update_width=wider)
        self._cells[rk] = new

    def _remove(self, rk: str) -> None:
        self.remove_row(rk)
        del self._cells[rk], self._keys[rk]

    def _sort(self) -> None:
        """Re-order rows after adds (only when something was added); the cursor stays on its row."""
        if self.row_count < 2:
            return
        here = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        self.sort(key=lambda row: row_sort_value(row, self.sort_by))
        if here in self._cells:
            self.move_cursor(row=self.get_row_index(here), scroll=False)

    def _in_view(self, t: Trial) -> bool:
        return self.view == "all" or t.status == self.view

    def _title(self) -> None:
        n = len(self.state.trials) if self.state else 0
        shown = "" if self.view == "all" else f" · showing {self.view.replace('_', '-')} ({self.row_count})"
        loading = f" · loading {self.row_count}/{self.row_count + len(self._fill)}" if self._fill else ""
        self.border_title = f"Trials {n}{shown}{loading} · sort: {self.sort_by}"

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

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        by = {"status": "status", "reward": "reward", "tokens": "tokens"}.get(str(event.column_key.value), "key")
        event.stop()
        self.set_sort(by)

    def trial_at_cursor(self) -> Optional[Trial]:
        if not self.row_count or self.state is None:
            return None
        rk = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        return self.state.trials.get(self._keys.get(rk))

    def select(self, key: TrialKey) -> bool:
        rk = row_key(key)
        if rk not in self._cells:
            return False
        self.move_cursor(row=self.get_row_index(rk))
        return True
