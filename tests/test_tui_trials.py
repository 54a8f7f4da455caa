"""TrialsTable on its own: a virtual list (rows drawn when on screen), updates in place."""

from __future__ import annotations

from textual.app import App, ComposeResult

from gymwatch.core.model import RunState, Trial
from gymwatch.tui import trials as trials_mod
from gymwatch.tui.trials import TrialsTable
from tuihelpers import wait_for


class Host(App):
    def __init__(self):
        super().__init__()
        self.chosen = []

    def compose(self) -> ComposeResult:
        yield TrialsTable()

    def on_trials_table_chosen(self, event: TrialsTable.Chosen) -> None:
        self.chosen.append(event.trial.key)


def state(n: int) -> RunState:
    st = RunState(root="/x")
    for i in range(n):
        t = Trial(i // 2, i % 2, status="completed", reward=1.0, input_tokens=100, output_tokens=5)
        st.trials[t.key] = t
    return st


async def test_a_big_view_is_there_at_once_and_takes_updates():
    n = 20_000
    st = state(n)
    app = Host()
    async with app.run_test(size=(100, 30)):
        table = app.query_one(TrialsTable)
        table.rebuild(st)
        assert table.row_count == n
        last = st.trials[(n // 2 - 1, 1)]
        last.status, last.reward = "never_ran", None
        new = Trial(n, 0, status="failed", failure_class="agent_run_error")
        st.trials[new.key] = new
        table.update(st, {last.key, new.key}, set())
        assert table.row_count == n + 1
        assert table.cell(last.key, "status").plain == "◆ NEVER RAN"
        assert table.row_cells(table.row_count - 1)[0].plain == str(n)      # key order kept


async def test_only_the_rows_on_screen_are_drawn(monkeypatch):
    st = state(50_000)
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(TrialsTable)
        table.rebuild(st)
        await pilot.pause()
        made = []
        real = trials_mod.cells
        monkeypatch.setattr(trials_mod, "cells", lambda t, gym=None: made.append(t.key) or real(t, gym))
        table.refresh()
        await pilot.pause()
        assert 0 < len(made) <= table.size.height


async def test_new_rows_are_sorted_into_place_and_the_cursor_stays_on_its_trial():
    st = state(6)
    app = Host()
    async with app.run_test(size=(100, 30)):
        table = app.query_one(TrialsTable)
        table.rebuild(st)
        table.set_sort("status")
        table.select((2, 1))
        t = Trial(0, 5, status="never_ran")
        st.trials[t.key] = t
        table.update(st, {t.key}, set())
        assert table.row_cells(0)[3].plain == "◆ NEVER RAN"
        assert table.trial_at_cursor().key == (2, 1)                # moved down a row with it
        many = {}
        for i in range(200):                                              # a big poll: one re-sort
            x = Trial(100 + i, 0, status="failed" if i % 2 else "completed", reward=0.0)
            st.trials[x.key] = many[x.key] = x
        table.update(st, set(many), set())
        keys = [table.key_at(i) for i in range(table.row_count)]
        assert keys == sorted(keys, key=lambda k: trials_mod.sort_value(st.trials[k], "status"))
        assert table.trial_at_cursor().key == (2, 1)
        table.update(st, set(), {(0, 5)})
        assert table.row_count == 206


async def test_keys_clicks_and_header_sort():
    st = state(100)
    app = Host()
    async with app.run_test(size=(100, 20)) as pilot:
        table = app.query_one(TrialsTable)
        table.rebuild(st)
        table.focus()
        await pilot.press("down", "down", "enter")
        assert app.chosen == [(1, 0)]
        await pilot.press("end")
        assert table.cursor == 99 and table.scroll_y == table.max_scroll_y > 0
        await pilot.press("home")
        assert table.cursor == 0 and table.scroll_y == 0
        await pilot.click(TrialsTable, offset=(2, 3))                       # the third row
        assert app.chosen[-1] == (1, 0)
        x = sum(w + 2 for w in table._widths[:5]) + 2                      # inside the Reward header
        await pilot.click(TrialsTable, offset=(x, 0))
        assert table.sort_by == "reward"
        await wait_for(pilot, lambda: True)


async def test_filter_views():
    st = state(10)
    st.trials[(1, 0)].status = "failed"
    app = Host()
    async with app.run_test(size=(100, 20)):
        table = app.query_one(TrialsTable)
        table.rebuild(st)
        table.set_filter("failed")
        assert table.row_count == 1 and "showing failed (1)" in table.border_title
        st.trials[(2, 0)].status = "failed"
        table.update(st, {(2, 0)}, set())
        assert table.row_count == 2
        st.trials[(1, 0)].status = "completed"
        table.update(st, {(1, 0)}, set())
        assert table.row_count == 1 and table.trial_at_cursor().key == (2, 0)


async def test_the_selected_failure_is_shown_whole_and_literally():
    st = state(4)
    t = st.trials[(1, 0)]
    t.status, t.failure_class, t.message = "failed", "agent_run_error", "[bold]boom[/bold] \x1b[31mred"
    app = Host()
    async with app.run_test(size=(60, 20)):
        table = app.query_one(TrialsTable)
        table.rebuild(st)                       # the cursor on the trial that needs a look
        assert table.trial_at_cursor().key == (1, 0) and "1 need a look" in table.border_title
        assert "agent_run_error: " in table.border_subtitle and "\x1b" not in table.border_subtitle
        assert "boom" in table.border_subtitle and r"\[bold]" in table.border_subtitle   # escaped
        table.select((0, 0))
        assert table.border_subtitle == ""


async def test_reward_0_filters_tell_wrong_answers_from_never_ran_and_sort_reverses():
    st = RunState(root="/x")
    for t in (Trial(0, 0, status="completed", reward=1.0), Trial(1, 0, status="completed", reward=0.0),
              Trial(2, 0, status="never_ran", withheld_reward=0.0), Trial(3, 0, status="failed"),
              Trial(4, 0, status="completed", reward=0.0)):
        st.trials[t.key] = t
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(TrialsTable)
        table.rebuild(st)
        table.set_filter("reward_0")
        assert [table.row_cells(i)[0].plain for i in range(table.row_count)] == ["1", "2", "4"]
        assert "showing reward 0 (3)" in table.border_title
        table.set_filter("wrong")
        assert [table.row_cells(i)[0].plain for i in range(table.row_count)] == ["1", "4"]
        table.set_filter("all")
        table.focus()
        await pilot.press("S")
        assert [table.row_cells(i)[0].plain for i in range(table.row_count)] == ["4", "3", "2", "1", "0"]
        assert "(reversed)" in table.border_title
        new = Trial(5, 0, status="completed", reward=1.0)
        st.trials[new.key] = new
        table.update(st, {new.key}, set())                    # a live update keeps the order
        assert table.row_cells(0)[0].plain == "5"


async def test_a_finished_run_opened_shows_gyms_health_column():
    """The Gym column was sized before the model was handed over: a finished run never showed it."""
    from conftest import CASES07
    from tuihelpers import fixture_app

    app = fixture_app(CASES07 / "g07_health_summary")
    async with app.run_test(size=(200, 50)) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        header = app.trials.render_line(0).text
        assert "Gym" in header.split()
        assert any("healthy" in app.trials.render_line(y).text for y in range(1, 11))


async def test_until_the_user_moves_it_the_cursor_is_on_the_first_trial_that_needs_a_look():
    st = state(8)
    app = Host()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(TrialsTable)
        table.rebuild(st)
        assert table.cursor == 0 and "need a look" not in table.border_title
        for key, status, first in [((2, 0), "failed", (2, 0)), ((1, 1), "never_ran", (1, 1)),
                                   ((3, 1), "missing", (1, 1)), ((1, 1), "completed", (2, 0))]:
            st.trials[key].status = status
            table.update(st, {key}, set())
            assert table.trial_at_cursor().key == first, (key, status)
        assert "2 need a look" in table.border_title
        table.focus()
        await pilot.press("up")                     # the user's now
        st.trials[(0, 0)].status = "failed"
        table.update(st, {(0, 0)}, set())
        assert table.trial_at_cursor().key == (1, 1)
