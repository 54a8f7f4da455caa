"""Pilot tests of the live screen, driven by an injected change source (no watcher, no sleeps)."""

from __future__ import annotations

import shutil
from pathlib import Path

from rich.text import Text
from textual.widgets import DataTable

from conftest import CASES, CASES07
from gymwatch.tui.app import GymwatchApp
from gymwatch.tui.live import LiveRun
from gymwatch.tui.summary import Summary
from gymwatch.tui.trials import COLUMNS
from tuihelpers import fixture_app, toasts, view_settled, wait_for

SIZE = (120, 40)


def cell(table: DataTable, row: str, col: str) -> Text:
    return table.get_cell(row, col)


def summary_plain(app: GymwatchApp) -> str:
    return str(app.query_one(Summary).render())


async def test_finished_run_shows_verdict_servers_and_trials():
    app = fixture_app("some_never_ran")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        assert await wait_for(pilot, lambda: app.trials.row_count == 10)
        text = summary_plain(app)
        assert "SOME TRIALS NEVER RAN" in text and "3/3 ready" in text and "trials 10/10" in text
        assert "mean reward 0.833" in text
        assert app.board.row_count == 3
        status = app.trials.cell((1, 0), "status")
        assert status.plain == "◆ NEVER RAN" and "on dark_magenta" in str(status.style)
        assert app.trials.cell((1, 0), "reward").plain.startswith("withheld")


async def test_filter_and_sort_keys():
    app = fixture_app("some_never_ran")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        app.trials.focus()
        await pilot.press("v")                      # all -> failed
        assert app.trials.filter_by == "failed" and app.trials.row_count == 0
        await pilot.press("v")                      # -> never_ran
        assert app.trials.filter_by == "never_ran" and app.trials.row_count == 4
        await pilot.press("v", "v", "v")            # missing, pending, reward 0
        assert app.trials.filter_by == "reward_0" and app.trials.row_count == 5   # 4 never ran, 1 wrong answer
        await pilot.press("v")                      # completed but 0
        assert app.trials.filter_by == "wrong" and app.trials.row_count == 1
        await pilot.press("v")                      # back to all
        assert app.trials.filter_by == "all" and app.trials.row_count == 10
        await pilot.press("s")                      # sort by status: never-ran rows first
        assert app.trials.sort_by == "status"
        first = app.trials.row_cells(0)
        assert first[3].plain == "◆ NEVER RAN"


async def test_next_failure_opens_the_evidence_row():
    app = fixture_app("some_never_ran")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        await pilot.press("right_square_bracket")
        t = app.trials.trial_at_cursor()
        assert t is not None and t.key == (1, 0) and t.status == "never_ran"
        assert app.pane.rel == "rollouts.jsonl" and app.pane.line == t.evidence.line
        assert await wait_for(pilot, lambda: view_settled(app))
        await pilot.press("right_square_bracket")
        assert app.trials.trial_at_cursor().key == (1, 1)
        await pilot.press("left_square_bracket", "left_square_bracket")   # wraps to the last
        assert app.trials.trial_at_cursor().key == (4, 1)


async def test_enter_on_failed_server_shows_the_evidence_line():
    app = fixture_app("startup_failed")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        assert "STARTUP FAILED" in summary_plain(app)
        app.board.focus()
        app.board.select("policy_model")
        await pilot.press("enter")
        assert app.pane.rel == "logs/policy_model.log" and app.pane.line == 9
        assert await wait_for(pilot, lambda: view_settled(app))
        view = app.pane.view
        assert await wait_for(pilot, lambda: view.current() is not None and view.current()[1] == 9)
        assert "Errno 98" in why(app, "policy_model")


def why(app: GymwatchApp, server: str) -> str:
    return cell(app.board, server, "why").plain


async def test_startup_failed_opens_the_failure_at_once():
    app = fixture_app("startup_failed")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        assert await wait_for(pilot, lambda: app.pane.rel == "logs/policy_model.log")
        assert app.board.server_at_cursor() == "policy_model"


async def test_updates_are_incremental(tmp_path: Path, monkeypatch, clock):
    run = copy_case("mixed_ok", tmp_path)
    rows = (run / "rollouts.jsonl").read_bytes().splitlines(keepends=True)
    (run / "rollouts.jsonl").write_bytes(b"".join(rows[:4]))
    (run / "rollouts_aggregate_metrics.json").unlink()
    app = fixture_app(run, clock)
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        assert await wait_for(pilot, lambda: app.trials.row_count == 10)
        calls = {"rebuild": 0}
        orig = app.trials.rebuild

        def spy(*a, **kw):
            calls["rebuild"] += 1
            return orig(*a, **kw)
        monkeypatch.setattr(app.trials, "rebuild", spy)
        app.trials.focus()
        app.trials.select((3, 1))
        with open(run / "rollouts.jsonl", "ab") as fh:
            fh.write(b"".join(rows[4:6]))
        app.hints.put_nowait("rollouts.jsonl")
        assert await wait_for(pilot, lambda: count(app, "completed") == 6)
        assert calls["rebuild"] == 0                                  # a poll only moves changed rows
        assert app.trials.trial_at_cursor().key == (3, 1)       # and the cursor stays put


def count(app: GymwatchApp, status: str) -> int:
    return sum(1 for t in app.live.state.trials.values() if t.status == status)


def copy_case(case: str, tmp_path: Path) -> Path:
    dst = tmp_path / case
    shutil.copytree(CASES / case, dst, ignore=shutil.ignore_patterns("timeline.jsonl", "truth.json"))
    return dst


async def test_waits_for_an_empty_dir_to_become_a_run(tmp_path: Path, clock):
    run = tmp_path / "later"
    run.mkdir()
    app = fixture_app(run, clock)
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: "WAITING" in summary_plain(app))
        src = CASES / "mixed_ok"
        shutil.copy(src / "gym_env_start.stdout.log", run / "gym_env_start.stdout.log")
        app.hints.put_nowait("new file")
        assert await wait_for(pilot, lambda: app.board.row_count == 3)
        assert "WAITING" not in summary_plain(app)


async def test_help_and_palette(tmp_path: Path):
    app = fixture_app("some_never_ran")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: type(app.screen).__name__ != "HelpScreen")
        await pilot.press("ctrl+p")
        assert await wait_for(pilot, lambda: type(app.screen).__name__ == "CommandPalette")
        await pilot.press(*"show never")
        await pilot.pause(0.3)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: app.trials.filter_by == "never_ran")
        assert app.trials.row_count == 4


async def test_quit_key_exits():
    app = fixture_app("mixed_ok")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        await pilot.press("q")
        assert await wait_for(pilot, lambda: not app.is_running)
    assert app.return_code in (0, None)


async def test_untrusted_text_renders_literally(tmp_path: Path, clock):
    run = copy_case("startup_failed", tmp_path)
    evil = "(policy_model) ERROR: [b]bold[/] [@click=app.quit]click[/] \x1b[31mred\x1b[0m \x1b]0;title\x07end\n"
    with open(run / "logs" / "policy_model.log", "a", encoding="utf-8") as fh:
        fh.write(evil)
    app = fixture_app(run, clock)
    async with app.run_test(size=(220, 40)) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        last = cell(app.board, "policy_model", "last").plain
        assert "[b]bold[/] [@click=app.quit]click[/] red end" in last
        assert "\x1b" not in last
        app.main.navigator.open_server_log("policy_model")
        app.pane.show(app.live.root / "logs/policy_model.log", "logs/policy_model.log", 12)
        assert await wait_for(pilot, lambda: view_settled(app))
        screen_text = "\n".join(strip_text(app.pane.view.render_line(y))
                                for y in range(app.pane.view.size.height))
        assert "[@click=app.quit]click[/]" in screen_text and "[b]bold[/]" in screen_text
        assert "\x1b" not in screen_text and "title" not in screen_text
        await pilot.click("#log-view")
        assert app.is_running


def strip_text(strip) -> str:
    return "".join(seg.text for seg in strip)


async def test_log_follow_pauses_and_counts_new_lines(tmp_path: Path, clock):
    run = copy_case("mixed_ok", tmp_path)
    log = run / "logs" / "mcqa.log"
    with open(log, "a") as fh:
        fh.writelines(f"(mcqa) filler {i}\n" for i in range(200))
    app = fixture_app(run, clock)
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        app.pane.show(log, "logs/mcqa.log")
        view = app.pane.view
        ok = await wait_for(pilot, lambda: view_settled(app) and view.scroll_y >= view.max_scroll_y > 0)
        assert ok, (view.scroll_y, view.max_scroll_y, view.follow, view.row_count, view.virtual_size, view.size)
        view.focus()
        await pilot.press("pageup", "pageup")
        assert await wait_for(pilot, lambda: view.scroll_y < view.max_scroll_y)
        with open(log, "a") as fh:
            fh.writelines(f"(mcqa) more {i}\n" for i in range(5))
        app.hints.put_nowait("logs/mcqa.log")
        assert await wait_for(pilot, lambda: app.pane.new_lines == 5)
        header = str(app.pane.query_one("#log-header").render())
        assert "+5 new lines" in header and "paused" in header
        await pilot.press("G")
        assert await wait_for(pilot, lambda: app.pane.new_lines == 0)


async def test_mouse_click_on_a_server_shows_its_log():
    app = fixture_app("mixed_ok")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        assert app.pane.rel == "logs/mcqa.log"
        row = app.board.get_row_index("policy_model")
        await pilot.click(app.board, offset=(3, row + 1))      # +1: the header row (the border is its pane's)
        assert await wait_for(pilot, lambda: app.pane.rel == "logs/policy_model.log")
        assert app.board.server_at_cursor() == "policy_model"


async def test_a_failing_watcher_is_reported_and_the_tick_keeps_polling(clock):
    async def broken(paths):
        raise OSError("inotify watch limit reached")
        yield  # unreachable: makes this an async generator

    live = LiveRun(str(CASES / "mixed_ok"), clock=clock, check_processes=False)
    app = GymwatchApp(live, change_source=broken, clock=clock, tick=0.05, animations=False)
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: any("watcher stopped" in m for m in toasts(app)))
        before = app.polls
        assert await wait_for(pilot, lambda: app.polls > before + 2)
        assert app.is_running


async def test_evidence_line_is_on_screen():
    app = fixture_app("aborted_500")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        await pilot.press("right_square_bracket")            # a missing trial: the collector's error
        assert app.pane.rel == "gym_eval_run.stderr.log" and app.pane.line == 57
        view = app.pane.view
        assert await wait_for(pilot, lambda: view_settled(app) and view.current()[1] == 57
                              and view.scroll_y <= view.cursor < view.scroll_y + view.size.height)


async def test_verdict_evidence_and_follow_keys():
    app = fixture_app("startup_failed")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        app.main.navigator.open_server_log("mcqa")
        assert app.pane.rel == "logs/mcqa.log" and app.pane.view.follow
        await pilot.press("exclamation_mark")
        assert app.pane.rel == "logs/policy_model.log" and app.pane.line == 9
        assert not app.pane.view.follow
        await pilot.press("f")
        assert app.pane.view.follow
        assert "following" in str(app.pane.query_one("#log-header").render())


async def test_clicking_a_column_header_sorts():
    app = fixture_app("some_never_ran")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        x = sum(len(label) + 2 for _, label in COLUMNS[:3]) + 3     # inside "Status"
        await pilot.click(app.trials, offset=(x, 1))                 # the header row, below the border
        assert await wait_for(pilot, lambda: app.trials.sort_by == "status")
        assert app.trials.row_cells(0)[3].plain == "◆ NEVER RAN"


async def test_bindings_can_be_remapped():
    app = fixture_app("some_never_ran")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        app.set_keymap({"gymwatch.next-failure": "x"})
        await pilot.press("x")
        assert app.trials.trial_at_cursor().key == (1, 0) and app.focused is app.trials
        await pilot.press("x")
        assert app.trials.trial_at_cursor().key == (1, 1)


async def test_a_huge_log_is_read_over_several_polls_with_the_screen_up(tmp_path: Path, monkeypatch, clock):
    """The first screen does not wait for a big log: polls have a time budget, the summary
    says what is being read, and more polls follow at once until it is all read."""
    import gymwatch.core.session as session_mod
    import gymwatch.core.tail as tail_mod
    import gymwatch.tui.live as live_mod
    monkeypatch.setattr(session_mod, "LIVE_SLICE", 32 << 10)
    monkeypatch.setattr(tail_mod, "CHUNK", 16 << 10)
    monkeypatch.setattr(live_mod, "POLL_BUDGET", 0.0)
    run = copy_case("mixed_ok", tmp_path)
    with (run / "logs" / "policy_model.log").open("a") as fh:
        fh.writelines(f'(policy_model) INFO:     127.0.0.1:{i} - "POST /x HTTP/1.1" 200 OK\n' for i in range(20_000))
        fh.write("(policy_model) ERROR:    the last line\n")
    app = fixture_app(run, clock)   # no hints, no ticks
    async with app.run_test(size=SIZE) as pilot:
        assert "reading logs/policy_model.log" in app.live.catching_up()
        assert "reading logs/policy_model.log" in str(app.summary.render())
        assert await wait_for(pilot, lambda: not app.live.catching_up())
        assert app.polls > 10
        assert app.live.state.servers["policy_model"].last_line == "ERROR:    the last line"
        # the last poll's worker is done before its message is shown: the screen follows it
        assert await wait_for(pilot, lambda: "reading" not in str(app.summary.render()))


async def test_all_logs_merged_and_back_to_one():
    app = fixture_app("mixed_ok")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        app.board.focus()
        await pilot.press("m")
        view = app.pane.view
        assert app.pane.rel == "all servers (3 logs)" and app.pane.border_title == "Logs: all servers"
        assert [label for label in view.logs.labels] == ["mcqa", "mcqa_simple_agent", "policy_model"]
        assert await wait_for(pilot, lambda: view_settled(app))
        assert view.row_count == sum(ix.line_count for ix in view.logs.indexes)
        text = [view.render_line(y).text for y in range(view.size.height)]
        assert any("policy_model" in line and "│" in line for line in text)     # labelled lines
        await pilot.press("down")                                           # a server again: its own log
        assert await wait_for(pilot, lambda: app.pane.rel.startswith("logs/") and not app.pane.merged)


async def test_all_logs_merged_in_the_order_gym_received_them():
    """A finished 0.7 run: `m` interleaves the servers' logs as Gym's captured stdout has their
    lines (not file by file), and the pane says what the order comes from."""
    app = fixture_app(CASES07 / "g07_run_failures_sidecar")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        app.board.focus()
        await pilot.press("m")
        view = app.pane.view
        assert await wait_for(pilot, lambda: view_settled(app))
        assert view.order_basis == "Gym's output"
        header = str(app.pane.query_one("#log-header").render())
        assert "in the order of Gym's output" in header
        labels = [view.logs.labels[view.logs.locate(r)[0]] for r in range(view.row_count)]
        assert labels[-1] == "mcqa" and labels[:4] != ["mcqa"] * 4    # mcqa's end-of-run lines last


async def test_all_logs_of_a_bundle_is_its_merged_output():
    app = fixture_app("evaluator_bundle")
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        await pilot.press("m")
        assert app.pane.merged and all("gym_env" in r for r in app.pane.merged)


async def test_the_chosen_server_log_opens_once_it_has_output(tmp_path: Path, clock):
    """A server known before it printed anything (named in Gym's "Waiting for servers" list)
    shows "no output yet"; its log opens by itself once its lines arrive, without the user
    moving the cursor."""
    run = copy_case("mixed_ok", tmp_path)
    shutil.rmtree(run / "logs")                      # the servers' output only in Gym's own
    out = run / "gym_env_start.stdout.log"
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:8]))             # up to the list of servers to wait for
    app = fixture_app(run, clock)
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown and app.board.row_count == 3)
        assert app.pane.rel == "" and "no output yet" in app.pane.border_title
        out.write_bytes(b"".join(lines))
        app.hints.put_nowait("stdout")
        # its lines are in Gym's stdout and stderr: both, in one view
        assert await wait_for(pilot, lambda: "gym_env_start.stdout.log" in app.pane.merged)


async def test_a_renamed_server_leaves_no_stale_row(tmp_path: Path, clock):
    """`logs/team_env.log` is server `team_env` until a `(team/env) ` line names it: the
    board then has one row, `team/env`."""
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    log = run / "logs" / "team_env.log"
    log.write_text("Creating virtual environment at: /w/resources_servers/team/.venv\n")
    app = fixture_app(run, clock)
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.board.row_count == 1)
        with log.open("a") as fh:
            fh.write("(team/env) INFO:     Uvicorn running on http://127.0.0.1:5 (Press CTRL+C to quit)\n")
        app.hints.put_nowait("logs")
        assert await wait_for(pilot, lambda: "team/env" in app.live.state.servers)
        assert await wait_for(pilot, lambda: app.board.row_count == 1
                              and app.board.coordinate_to_cell_key((0, 0)).row_key.value == "team/env")


async def test_l_on_a_server_or_a_trial_opens_its_log():
    """The board and the trials table post what `l` asks for (LogRequested, CauseRequested);
    the app opens it."""
    from gymwatch.core.attribution import trial_cause
    from gymwatch.tui.board import ReadinessBoard
    from gymwatch.tui.trials import TrialsTable

    app = fixture_app("aborted_500")
    asked = []

    def hook(m):                # called at each widget a message bubbles through: keep it once
        if isinstance(m, (ReadinessBoard.LogRequested, TrialsTable.CauseRequested)) and m not in asked:
            asked.append(m)
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        app.board.focus()
        app.board.select("policy_model")
        await pilot.press("l")
        assert await wait_for(pilot, lambda: app.pane.rel == "logs/policy_model.log")
        assert [(type(m).__name__, m.server, m.control) for m in asked] == [("LogRequested", "policy_model", app.board)]
        app.trials.focus()
        app.trials.select((1, 0))                      # missing: the cause is the collector's error
        await pilot.press("l")
        cause = trial_cause(app.live.state, app.trials.trial_at_cursor())
        assert await wait_for(pilot, lambda: app.pane.rel == cause.file and app.pane.line == cause.line)
        assert type(asked[-1]).__name__ == "CauseRequested" and asked[-1].trial.key == (1, 0)
        assert asked[-1].control is app.trials


async def test_the_earlier_names_of_the_screen_still_drive_it():
    """Scripts and tests written against earlier versions call `started`, `apply`,
    `open_server_log` and `open_trial_card` on the app: they still do what they did."""
    from gymwatch.core.model import T_FAILED
    from gymwatch.core.reducer import Changes
    from tuihelpers import fixture_app, wait_for

    app = fixture_app(CASES / "aborted_500")
    async with app.run_test(size=(120, 36)) as pilot:
        assert await wait_for(pilot, lambda: app.started)
        assert app.started is app.run_shown is True
        app.apply(Changes(reset=True))
        app.open_server_log("policy_model", force=True)
        assert await wait_for(pilot, lambda: (app.pane.rel or "").endswith("policy_model.log"))
        t = next(t for t in app.live.state.trials.values() if t.status != T_FAILED)
        app.open_trial_card(t)
        assert await wait_for(pilot, lambda: type(app.screen).__name__ == "TrialCard"
                              and bool(app.screen.query("#card-lines")))
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: app.screen is app.main)
