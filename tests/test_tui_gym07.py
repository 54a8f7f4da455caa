"""The live screen on replays of real Gym 0.7.0 runs: the venv-lock wait, the spin-up limit as it
runs out, environment servers, Gym's health column (fixed clock, staged replays)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CASES07
from test_tui_app import summary_plain
from tuihelpers import EPOCH, FakeClock, fixture_app, make_app, settled, staged_live, wait_for

SIZE = (120, 40)
COLD = CASES07 / "g07_cold_start_shared_venv"
TIMEOUT = CASES07 / "g07_spinup_timeout"


pytestmark = pytest.mark.usefixtures("shape_check_every_poll")


def board(app) -> dict[str, str]:
    """Each server's row on the board as plain text."""
    b = app.board
    return {key.value: " | ".join(str(c) for c in b.row_cells(key.value)) for key in b.rows}


def staged(case: Path, times: list[float], tmp: Path):
    clock = FakeClock()
    live, rp = staged_live(case, tmp / case.name, times, clock)
    return make_app(live, clock), clock, live, rp


async def test_cold_start_shows_the_venv_lock_and_the_spinup_clock(tmp_path):
    app, clock, live, rp = staged(COLD, [5.0, 12.1, 12.4, 20.0], tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        rows = board(app)
        assert len(rows) == 6 and "env" in rows["mcqa_environment_server"]
        assert "waiting for mcqa_simple_agent's venv setup" in rows["mcqa_simple_agent_b"]
        assert "creating venv" in rows["mcqa_simple_agent"]
        assert "7s/10m00s" in rows["mcqa"]                   # Gym 0.7's default limit, seen at 12.1 s
        assert "spin-up limit 10m00s, 7s used" in app.board.border_title
        for t in (33.4, 62.4):                                    # the lock released; all ready
            rp.step_to(t)
            clock.t = EPOCH + t
            app.refresh_run()
        await pilot.pause(0.05)
        rows = board(app)
        assert "venv up to date: 3 packages" in rows["mcqa_simple_agent_b"] or "ready" in rows["mcqa_simple_agent_b"]
        assert all("/10m00s" not in r for r in rows.values())  # no limit once all are ready
        assert "6/6 ready" in app.board.border_title


async def test_spinup_limit_flags_the_server_as_it_nears_and_the_timeout_names_it(tmp_path):
    app, clock, live, rp = staged(TIMEOUT, [5.0, 14.5, 45.1, 50.0], tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        mcqa = board(app)["mcqa"]
        assert "35s/1m00s" in mcqa and "⚠" not in mcqa     # the 60 s limit from the run's config
        clock.t = EPOCH + 60.0
        app.refresh_run()
        await pilot.pause(0.05)
        assert "45s/1m00s ⚠" in board(app)["mcqa"]          # 75% of the limit used
        rp.step_to(80.0)
        clock.t = EPOCH + 80.0
        app.refresh_run()
        await wait_for(pilot, lambda: "STARTUP FAILED" in summary_plain(app))
        summary = summary_plain(app)
        assert "spin-up limit ran out waiting for mcqa" in summary
        assert "not ready within Gym's 60s spin-up limit" in board(app)["mcqa"]


async def test_health_column_flags_gym_and_gymwatch_disagreeing():
    app = fixture_app(CASES07 / "g07_some_never_ran")
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        assert app.trials.cell((1, 0), "gym").plain == "≠ unobs."
        assert app.trials.cell((0, 0), "gym").plain == "unobs."
        assert "Gym health 0✓ 0✗ 10? ≠4" in summary_plain(app)


async def test_failed_trials_show_class_and_http_status():
    app = fixture_app(CASES07 / "g07_run_failures_sidecar")
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        assert app.trials.cell((1, 0), "why").plain.startswith("agent_run_error HTTP 500: 500, message=")
        assert "SOME TRIALS FAILED" in summary_plain(app)


def test_snapshot_cold_start_venv_lock(snap_compare, tmp_path):
    app, *_ = staged(COLD, [5.0, 12.1, 12.4, 20.0], tmp_path)
    assert snap_compare(app, terminal_size=SIZE, run_before=settled)


def test_snapshot_spinup_limit_nearing(snap_compare, tmp_path, clock):
    live, _ = staged_live(TIMEOUT, tmp_path / "t", [5.0, 14.5, 45.1, 50.0], clock)
    clock.t = EPOCH + 60.0
    assert snap_compare(make_app(live, clock), terminal_size=SIZE, run_before=settled)


async def test_the_model_endpoint_wait_is_a_stage_of_its_own_on_screen(tmp_path):
    """Gym 0.5+: after `All N / N servers ready` it waits for the model endpoints; the board's
    title says which endpoint, for how long, of what limit, and the summary says it is still
    starting (all servers ready is not ready to collect)."""
    from runbuilder import Run

    endpoint = "http://127.0.0.1:18997/v1"
    run = Run(tmp_path)
    run.ready_server("env", 15000)
    run.lines("gym_env_start.stdout.log", "Waiting for servers to spin up", "All 1 / 1 servers ready! Polling every 60s",
              f"Waiting for 1 model endpoint(s) to answer: {endpoint} (policy_base_url)",
              "If an inference server is still loading weights this is expected. Waiting up to 600s...",
              "  still waiting, 30s elapsed")
    app = fixture_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        title = str(app.board.border_title)
        assert f"waiting for model endpoint {endpoint} (policy_base_url) (30s of 10m00s)" in title
        summary = " ".join(summary_plain(app).split())
        assert "STARTING" in summary and "waiting for the model endpoint" in summary
        run.lines("gym_env_start.stdout.log", "All model endpoints are answering after 51s.")
        app.refresh_run()
        await wait_for(pilot, lambda: "model endpoint" not in str(app.board.border_title))
        assert "1/1 ready" in str(app.board.border_title)
        run2 = Run(tmp_path / "gave_up")
        run2.ready_server("env", 15000)
        run2.lines("gym_env_start.stdout.log", "Waiting for servers to spin up",
                   "All 1 / 1 servers ready! Polling every 60s",
                   f"Waiting for 1 model endpoint(s) to answer: {endpoint} (policy_base_url)",
                   "NeMo Gym finished!", "Error: 1 model endpoint(s) never answered within 20s:",
                   f"  - {endpoint} (from `policy_base_url`)")
    app = fixture_app(tmp_path / "gave_up")
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        assert "model endpoint never answered" in str(app.board.border_title)
        summary = " ".join(summary_plain(app).split())
        assert "STARTUP FAILED" in summary and "see gym_env_start.stdout.log:5" in summary
        assert f"model endpoint {endpoint} (policy_base_url) never answered within 20s" in summary


async def test_a_dead_model_endpoint_shows_on_the_board_until_rows_come_again(tmp_path):
    """A real 0.7.0 run whose model endpoint died mid-collection, as it looked while it hung: the
    model server's row says what it cannot reach, and so does the summary; once a row is written
    after its retry reports, neither does."""
    import os
    import shutil
    import time

    from conftest import RECORDED070

    run = tmp_path / "run"
    shutil.copytree(RECORDED070 / "g070_model_endpoint_died", run)
    out = run / "gym_env_start.stdout.log"
    lines = out.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "retry=51 " in line)
    second = next(i for i, line in enumerate(lines) if "retry=101 " in line)
    out.write_text("".join(lines[:first + 1]))
    for name in ("gym_env_start.stderr.log", "gym_eval_run.stderr.log"):
        f = run / name
        f.write_text("".join(x for x in f.read_text().splitlines(keepends=True) if "Shutting down" not in x
                             and "Finished server process" not in x and "shutdown" not in x))
    rows = run / "rollouts.jsonl"
    os.utime(rows, (time.time() - 60,) * 2)
    app = fixture_app(run)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        model = board(app)["policy_model"]
        assert "could not connect to the model endpoint http://127.0.0.1:38861/v1/responses (ClientOSError): " \
               "100 failed connections" in model
        assert "policy_model could not connect" in summary_plain(app)
        with open(out, "a") as fh:
            fh.writelines(lines[first + 1:second + 1])
        app.refresh_run()
        assert await wait_for(pilot, lambda: "200 failed connections" in board(app)["policy_model"])
        later = time.time() + 10
        with open(rows, "a") as fh:
            fh.write(rows.read_text().splitlines(keepends=True)[0])
        os.utime(rows, (later, later))
        app.refresh_run()
        assert await wait_for(pilot, lambda: "could not connect" not in board(app)["policy_model"])
        assert "could not connect" not in summary_plain(app)


def _replay_at(case: Path, dst: Path, speed: float):
    """A replay's DST as `gymwatch replay --speed` leaves it: its marker says the speed."""
    import json

    from gymwatch.core.layout import REPLAY_MARKER
    from gymwatch.replay import Replayer

    rp = Replayer(case, dst)
    (dst / REPLAY_MARKER).write_text(json.dumps({"src": str(case), "speed": speed}) + "\n")
    return rp


async def test_a_replay_at_5x_shows_the_spinup_clock_in_the_runs_own_time(tmp_path):
    """At 5x the board said `10s/1m00s` beside "the 60s spin-up limit ran out": wall seconds
    beside Gym's. The screen's clock runs at the replay's speed."""
    from gymwatch.tui.live import LiveRun

    rp = _replay_at(TIMEOUT, tmp_path / "run", 5.0)
    clock = FakeClock()
    live = None
    for t in (5.0, 14.5, 45.1, 50.0):                # as the 1x test above, at a fifth of the wall time
        rp.step_to(t)
        clock.t = EPOCH + t / 5                   # the wall clock of a 5x replay
        live = live or LiveRun(str(tmp_path / "run"), clock=clock, check_processes=False)
        live.poll()
    app = make_app(live, clock)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        assert "35s/1m00s" in board(app)["mcqa"], board(app)["mcqa"]
        clock.t = EPOCH + 60.0 / 5
        app.refresh_run()
        await pilot.pause(0.05)
        mcqa = board(app)["mcqa"]
        assert "45s/1m00s ⚠" in mcqa and "45s" in app.board.border_title, mcqa


def test_the_run_clock_speeds_up_from_when_the_replay_is_seen(tmp_path):
    """The screen may open before `gymwatch replay` writes DST: its clock is the wall clock until
    the marker says the speed, then runs that much faster, without a jump."""
    from gymwatch.tui.live import LiveRun

    clock = FakeClock()
    dst = tmp_path / "run"
    dst.mkdir()
    live = LiveRun(str(dst), clock=clock, check_processes=False)
    live.poll()
    clock.t += 3
    assert live.clock() == EPOCH + 3 and not live.replay
    rp = _replay_at(TIMEOUT, dst, 5.0)
    rp.step_to(5.0)
    live.poll()
    assert live.replay and live.clock() == EPOCH + 3
    clock.t += 2
    assert live.clock() == EPOCH + 3 + 10
