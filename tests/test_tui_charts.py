"""The charts on the live screen: `t` (the startup timeline) and `p` (throughput, rewards, tokens,
cost) over the main screen, their pages, their redraw when the run changes, the board's startup
column while servers start; and SVG snapshots of every page at 80x24 and 200x50 (fixed clock).

Re-baseline on purpose only: `pytest tests/test_tui_charts.py --snapshot-update`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import CASES07, FIXTURES
from gymwatch.core.session import read_run
from gymwatch.tui import charts as screen_charts
from gymwatch.tui.charts import ChartsScreen
from tuihelpers import EPOCH, FakeClock, fixture_app, make_app, settled, staged_live, wait_for

SMALL, LARGE = (80, 24), (200, 50)
COLD_SHARED = CASES07 / "g07_cold_start_shared_venv"
# its recorded times (timeline.jsonl) up to all six servers ready at ~62 s, and one poll after
COLD_SHARED_TIMES = [0.5, 5.0, 5.3, 11.3, 12.1, 12.3, 13.6, 13.8, 27.3, 27.5, 29.5, 29.8, 32.3, 32.6, 33.1, 33.3,
                     36.6, 36.9, 37.1, 37.4, 42.6, 49.0, 50.2, 51.2, 51.5, 52.0, 52.7, 53.2, 56.0, 56.2, 59.3, 59.8,
                     62.3, 62.6, 63.6]
STARTING = COLD_SHARED_TIMES[:16]           # mid-install: two servers wait on the shared venv's lock
SPREAD = FIXTURES / "gym-0.7.0-stalls" / "g070_endpoint_silent_75s"    # 10 results over 81 s, a 75 s gap

pytestmark = pytest.mark.usefixtures("shape_check_every_poll")


def timed_app(tmp_path: Path, times: list[float], clock: FakeClock):
    live, _ = staged_live(COLD_SHARED, tmp_path / "run", times, clock)
    return make_app(live, clock)


async def test_t_shows_the_startup_timeline_and_the_pages_move(tmp_path: Path, clock):
    app = timed_app(tmp_path, COLD_SHARED_TIMES, clock)
    async with app.run_test(size=LARGE) as pilot:
        await settled(pilot)
        await pilot.press("t")
        assert isinstance(app.screen, ChartsScreen) and app.screen.page == screen_charts.TIMELINE
        text = str(app.screen.query_one("#charts-page").render())
        assert "* the critical path" in text and "mcqa_simple_agent (critical path)" in text
        assert "setup-lock wait" in text
        for key, page in (("right", screen_charts.THROUGHPUT), ("right", screen_charts.REWARDS),
                          ("5", screen_charts.COST), ("right", screen_charts.TIMELINE), ("left", screen_charts.COST)):
            await pilot.press(key)
            assert app.screen.page == page
        await pilot.press("escape")
        assert not isinstance(app.screen, ChartsScreen)
        await pilot.press("p")
        assert isinstance(app.screen, ChartsScreen) and app.screen.page == screen_charts.THROUGHPUT


async def test_an_open_page_is_drawn_again_when_results_come(tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(SPREAD, run)
    rows = (run / "rollouts.jsonl").read_bytes().splitlines(keepends=True)
    (run / "rollouts.jsonl").write_bytes(b"".join(rows[:3]))
    clock = FakeClock(max(json.loads(r)["response"]["created_at"] for r in rows) + 30)   # as if watched live
    app = fixture_app(run, clock)
    async with app.run_test(size=LARGE) as pilot:
        await settled(pilot)
        await pilot.press("p")
        page = app.screen.query_one("#charts-page")
        assert "+0:00 3 " in str(page.render())
        with (run / "rollouts.jsonl").open("ab") as fh:
            fh.write(b"".join(rows[3:]))
        clock.t += 5
        app.hints.put_nowait(None)
        assert await wait_for(pilot, lambda: app.live.done_total()[0] == 10)
        app.screen._tick()                  # (its 1 s timer, without waiting for it)
        # the 7 results seen arriving now, the 3 already there by when the model answered them (its clock
        # and this one agree: those answers came before the arrivals)
        assert await wait_for(pilot, lambda: "those already there" in str(page.render()))
        text = str(page.render())
        assert "+0:00 3 " in text and " 7 " in text


def test_the_pages_of_a_run_read_after_the_fact():
    state = read_run(str(SPREAD), check_processes=False).state
    assert "No times" in screen_charts.render_page(state, screen_charts.TIMELINE, 120).plain
    tp = screen_charts.render_page(state, screen_charts.THROUGHPUT, 120).plain
    assert "by when the model answered each" in tp and "+0:00 3" in tp and "+1:20 7" in tp   # a 75 s pause between
    cost = screen_charts.render_page(state, screen_charts.COST, 120).plain
    assert "mcqa_simple_agent" in cost and "output tokens" in cost
    assert screen_charts.render_page(None, screen_charts.COST, 120).plain == "No run yet."


async def test_the_board_shows_each_servers_steps_while_they_start(tmp_path: Path, clock):
    app = timed_app(tmp_path, STARTING, clock)
    async with app.run_test(size=LARGE) as pilot:
        await settled(pilot)
        assert "steps" in app.board.shown_columns
        bars = {name: app.board.row_cells(name)[5].plain for name in app.live.state.servers}
        assert any(b.strip() for b in bars.values())
    app = timed_app(tmp_path / "small", STARTING, FakeClock())
    async with app.run_test(size=SMALL) as pilot:
        await settled(pilot)
        assert "steps" not in app.board.shown_columns        # no room: `t` shows it
    app = timed_app(tmp_path / "ready", COLD_SHARED_TIMES, FakeClock())
    async with app.run_test(size=LARGE) as pilot:
        await settled(pilot)
        assert "steps" not in app.board.shown_columns        # every server ready: the column goes


# --- snapshots ---------------------------------------------------------------------------------
def _page(keys: tuple[str, ...]):
    async def run_before(pilot):
        await settled(pilot)
        for key in keys:
            await pilot.press(key)
        await pilot.pause(0.1)
    return run_before


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "200x50"])
def test_snapshot_startup_timeline(snap_compare, tmp_path: Path, size):
    clock = FakeClock()
    app = timed_app(tmp_path, COLD_SHARED_TIMES, clock)
    assert snap_compare(app, terminal_size=size, run_before=_page(("t",)))


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "200x50"])
def test_snapshot_startup_timeline_while_starting(snap_compare, tmp_path: Path, size):
    clock = FakeClock()
    app = timed_app(tmp_path, STARTING, clock)
    assert snap_compare(app, terminal_size=size, run_before=_page(("t",)))


@pytest.mark.parametrize("size", [SMALL, LARGE], ids=["80x24", "200x50"])
@pytest.mark.parametrize("page", ["2", "3", "4", "5"], ids=["throughput", "rewards", "tokens", "cost"])
def test_snapshot_charts(snap_compare, size, page):
    app = fixture_app(SPREAD, FakeClock(EPOCH))
    assert snap_compare(app, terminal_size=size, run_before=_page(("p", page)))


def test_snapshot_board_while_starting(snap_compare, tmp_path: Path):
    app = timed_app(tmp_path, STARTING, FakeClock())
    assert snap_compare(app, terminal_size=LARGE, run_before=_page(()))
