"""Replay-driven live tests: a recorded run re-written over time while the screen watches."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tuihelpers import EPOCH, make_app, staged_live, toasts, view_settled, wait_for

SIZE = (120, 40)


pytestmark = pytest.mark.usefixtures("shape_check_every_poll")


def ready_counts(app) -> tuple[int, int]:
    m = re.search(r"(\d+)/(\d+) ready", str(app.board.border_title))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


async def test_replay_fills_the_screen(tmp_path: Path, clock):
    live, rp = staged_live("some_never_ran", tmp_path / "some_never_ran", [1.0], clock)
    app = make_app(live, clock)
    boards, trial_rows = [], []
    async with app.run_test(size=SIZE) as pilot:
        t = 1.0
        while not rp.done:
            t += 1.0
            rp.step_to(t)
            clock.t = EPOCH + t
            before = app.polls
            app.hints.put_nowait(t)
            assert await wait_for(pilot, lambda before=before: app.polls > before)
            boards.append(ready_counts(app))
            trial_rows.append(app.trials.row_count)
        assert boards[0][0] == 0 and boards[-1] == (3, 3)
        assert any(0 < r < 10 for r in trial_rows) or trial_rows.count(10) < len(trial_rows)
        assert trial_rows[-1] == 10
        never = [k for k in ((1, 0), (1, 1), (4, 0), (4, 1))
                 if app.trials.cell(k, "status").plain == "◆ NEVER RAN"]
        assert len(never) == 4
        assert "on dark_magenta" in str(app.trials.cell((4, 1), "status").style)
        app.trials.focus()
        app.trials.select((4, 0))
        await pilot.press("enter")          # the trial's card; `r` there: its raw row
        assert await wait_for(pilot, lambda: type(app.screen).__name__ == "TrialCard")
        await pilot.press("r")
        assert await wait_for(pilot, lambda: type(app.screen).__name__ != "TrialCard")
        trial = app.live.state.trials[(4, 0)]
        assert app.pane.rel == "rollouts.jsonl" and app.pane.line == trial.evidence.line
        assert await wait_for(pilot, lambda: view_settled(app))
        view = app.pane.view
        assert await wait_for(pilot, lambda: view.current() is not None
                              and view.current()[1] == trial.evidence.line)


async def test_startup_failure_appears_live(tmp_path: Path, clock):
    live, rp = staged_live("startup_failed", tmp_path / "startup_failed", [1.0], clock)
    app = make_app(live, clock)
    async with app.run_test(size=SIZE) as pilot:
        rp.step_to(rp.end)
        clock.t = EPOCH + rp.end
        app.hints.put_nowait("all")
        assert await wait_for(pilot, lambda: app.board.row_count == 3
                              and "failed" in app.board.get_cell("policy_model", "state").plain)
        assert any("startup failed" in m for m in toasts(app))
        await pilot.press("right_square_bracket")
        assert app.pane.rel == "logs/policy_model.log" and app.pane.line == 9


def test_elapsed_starts_at_the_first_stamp_of_a_late_attach_not_of_a_replay(tmp_path):
    """Attached late to a running run, the first timestamped line says when it started; a replay's
    lines carry the recording's times (yesterday's), so its clock starts when the screen opened."""
    import datetime as dt

    from gymwatch.core.layout import REPLAY_MARKER
    from gymwatch.tui.live import LiveRun

    opened = dt.datetime(2026, 12, 2, 12, 0, 0).timestamp()
    stamp = dt.datetime.fromtimestamp(opened - 5 * 3600).strftime("%Y-%m-%d %H:%M:%S,000")
    for name, replay in (("attached", False), ("replayed", True)):
        run = tmp_path / name
        run.mkdir()
        (run / "gym_env_start.stdout.log").write_text(
            f"{stamp}\tINFO worker.py:2029 -- Started a local Ray instance.\nWaiting for head server to spin up\n")
        if replay:
            (run / REPLAY_MARKER).write_text("{}\n")
        live = LiveRun(str(run), clock=lambda: opened, check_processes=False)
        live.poll()
        assert live.started_at() == (opened if replay else opened - 5 * 3600), name
