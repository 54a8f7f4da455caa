"""TrialsTable on its own: batched fill of a big view, updates while filling, sort after adds."""

from __future__ import annotations

from textual.app import App, ComposeResult

from gymwatch.core.model import RunState, Trial
from gymwatch.tui.testing import wait_for
from gymwatch.tui.trials import FILL_BATCH, TrialsTable, row_key


class Host(App):
    def compose(self) -> ComposeResult:
        yield TrialsTable()


def state(n: int) -> RunState:
    st = RunState(root="/x")
    for i in range(n):
        t = Trial(i // 2, i % 2, status="completed", reward=1.0, input_tokens=100, output_tokens=5)
        st.trials[t.key] = t
    return st


async def test_big_view_fills_in_batches_and_takes_updates_meanwhile():
    n = 2 * FILL_BATCH + 500
    st = state(n)
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(TrialsTable)
        table.rebuild(st)
        assert table.row_count == FILL_BATCH and table.filling
        last = st.trials[(n // 2 - 1, 1, None)]           # not added yet
        last.status, last.reward = "never_ran", None
        new = Trial(n, 0, status="failed", failure_class="agent_run_error")
        st.trials[new.key] = new
        table.update(st, {last.key, new.key}, set())
        assert await wait_for(pilot, lambda: not table.filling)
        assert table.row_count == n + 1
        assert table.get_cell(row_key(last.key), "status").plain == "◆ NEVER RAN"
        assert str(table.get_row_at(table.row_count - 1)[0]) == str(n)   # key order kept


async def test_new_rows_are_sorted_into_place():
    st = state(6)
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(TrialsTable)
        table.rebuild(st)
        table.set_sort("status")
        t = Trial(0, 5, status="never_ran")
        st.trials[t.key] = t
        table.update(st, {t.key}, set())
        assert table.get_row_at(0)[3].plain == "◆ NEVER RAN"
        table.update(st, set(), {(0, 5, None)})
        assert table.row_count == 6
