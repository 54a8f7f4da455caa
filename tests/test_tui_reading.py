"""The live screen reads the run off the UI thread: polls in a worker thread, coalesced, their
changes handed over as a RunChanged message; the screen's R key writes the retry file."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

from textual.widgets import Input

from conftest import CASES07
from gymwatch.tui.live import LiveRun
from gymwatch.tui.polling import RunChanged
from gymwatch.tui.retryscreen import RetryScreen
from gymwatch.tui.screen import MainScreen
from test_tui_app import copy_case
from tuihelpers import fixture_app, settled, toasts, wait_for

SIZE = (120, 40)
SIDECAR = CASES07 / "g07_run_failures_sidecar"        # tasks 1 and 3 failed, 6 completed


async def test_hints_poll_in_a_worker_thread_and_a_flood_is_one_or_two_polls(tmp_path: Path, monkeypatch, clock):
    run = copy_case("mixed_ok", tmp_path)
    threads: list[str] = []
    real_poll = LiveRun.poll

    def poll(self):
        threads.append(threading.current_thread().name)
        return real_poll(self)

    monkeypatch.setattr(LiveRun, "poll", poll)
    handed: list[RunChanged] = []
    real_apply = MainScreen.apply
    app = fixture_app(run, clock)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        monkeypatch.setattr(MainScreen, "apply", lambda self, changes: (handed.append(changes), real_apply(self, changes)))
        before, read = app.polls, len(threads)
        assert (before, read) == (0, 1)                                # only the first read so far
        with (run / "logs" / "policy_model.log").open("a") as fh:
            fh.write("(policy_model) ERROR:    a line written while the screen is up\n")
        for _ in range(200):
            app.hints.put_nowait({"changed"})
        assert await wait_for(pilot, lambda: app.live.state.servers["policy_model"].last_line
                              == "ERROR:    a line written while the screen is up")
        assert await wait_for(pilot, lambda: app.polls > before and len(threads) == read + (app.polls - before))
        await pilot.pause(0.2)
        assert 1 <= app.polls - before <= 3, app.polls - before        # coalesced: not one poll a hint
        assert threads[0] == threading.main_thread().name             # the first read, which the first frame shows
        assert all(name != threading.main_thread().name for name in threads[read:]), threads[read:]
        assert handed and any("policy_model" in c.servers for c in handed)


def sidecar_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(SIDECAR, run, ignore=shutil.ignore_patterns("timeline.jsonl", "truth.json"))
    return run


def materialized(run: Path) -> dict[tuple, bytes]:
    out = {}
    for line in (run / "rollouts_materialized_inputs.jsonl").read_bytes().splitlines(keepends=True):
        row = json.loads(line)
        out[(row["_ng_task_index"], row["_ng_rollout_index"])] = line
    return out


async def test_R_writes_the_retry_file_of_the_selected_trial_and_shows_the_command(tmp_path: Path, monkeypatch):
    run = sidecar_run(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    app = fixture_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        failed = sorted(k for k, t in app.live.state.trials.items() if t.status == "failed")
        app.trials.focus()
        app.trials.select(failed[0])
        await pilot.press("R")
        assert await wait_for(pilot, lambda: isinstance(app.screen, RetryScreen))
        dialog = app.screen
        assert dialog.query_one(Input).value == str(out / "run-retry.jsonl")    # outside the run
        dialog.query_one(Input).value = str(run / "retry.jsonl")              # inside it: refused
        await pilot.press("enter")
        said = str(dialog.query_one("#retry-said").render())
        assert "inside the run" in said and not (run / "retry.jsonl").exists()
        dialog.query_one(Input).value = str(out / "one.jsonl")
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: (out / "one.jsonl").exists())
        assert (out / "one.jsonl").read_bytes() == materialized(run)[failed[0]]   # that trial's row, byte for byte
        said = str(dialog.query_one("#retry-said").render())
        assert "wrote 1 trial(s)" in said and "gym eval run" in said and f"--input {out / 'one.jsonl'}" in said
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, RetryScreen))


async def test_R_from_the_board_writes_every_trial_that_did_not_complete(tmp_path: Path, monkeypatch):
    run = sidecar_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    app = fixture_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        failed = sorted(k for k, t in app.live.state.trials.items() if t.status == "failed")
        app.board.focus()
        await pilot.press("R")
        assert await wait_for(pilot, lambda: isinstance(app.screen, RetryScreen))
        assert f"all {len(failed)} trial(s)" in str(app.screen.query_one("#retry-which").render()) or \
            any(f"all {len(failed)} trial(s)" in str(b.label) for b in app.screen.query("RadioButton"))
        await pilot.press("enter")
        written = tmp_path / "run-retry.jsonl"
        assert await wait_for(pilot, lambda: written.exists())
        rows = materialized(run)
        assert written.read_bytes() == b"".join(rows[k] for k in failed)


async def test_R_on_a_run_where_every_trial_completed_says_so_and_writes_nothing(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = fixture_app("mixed_ok")
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        await pilot.press("R")
        assert await wait_for(pilot, lambda: any("nothing to rerun" in m for m in toasts(app)))
        assert not isinstance(app.screen, RetryScreen) and list(tmp_path.iterdir()) == []


async def test_the_run_lock_the_trials_pane_holds_leaves_textuals_widget_lock_alone():
    """The screen hands the trials pane the run's lock (a thread's); Textual's own lock on every
    widget, the asyncio one its batch() and recompose() take, is still there beside it."""
    app = fixture_app("mixed_ok")
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        async with app.trials.batch():         # what a recompose of the pane takes first
            pass
        assert app.trials.row_count == len(app.live.state.trials)


def test_a_retry_file_asked_of_a_dir_still_waiting_for_its_run_is_refused_in_words(tmp_path: Path):
    run = tmp_path / "run"
    run.mkdir()                                 # a launcher or a replay is about to fill it
    live = LiveRun(str(run), check_processes=False)
    assert live.session is not None and live.state is None
    assert live.write_retry(str(tmp_path / "retry.jsonl")) == (None, "no run to read yet")
    assert not (tmp_path / "retry.jsonl").exists()
