"""The trial card on the live screen: `enter` on a trial opens it, `r` opens the raw row, a listed
line opens in the log pane; `}`/`{` step through a trial's cause chain, `]`/`[` say where they are."""

from __future__ import annotations

import pytest

from conftest import CASES, CASES07, RECORDED070
from gymwatch.tui.card import TrialCard
from gymwatch.tui.logscreens import LineScreen
from tuihelpers import fixture_app, view_settled, wait_for

SIZE = (120, 36)


async def settled(pilot) -> None:
    assert await wait_for(pilot, lambda: pilot.app.run_shown and view_settled(pilot.app))


async def open_card(pilot, key) -> TrialCard:
    app = pilot.app
    await settled(pilot)
    app.trials.set_filter("all")
    assert app.trials.select(key)
    app.trials.focus()
    await pilot.press("enter")
    assert await wait_for(pilot, lambda: isinstance(app.screen, TrialCard))
    return app.screen


def card_plain(screen: TrialCard) -> str:
    return str(screen.query_one("#card-body Static").render())


async def test_enter_opens_the_card_and_r_the_raw_row():
    app = fixture_app(CASES / "some_never_ran")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_card(pilot, (1, 0))
        text = card_plain(screen)
        assert "NEVER RAN" in text and "response.output is empty ([])" in text
        assert "user: You should output your final response letter" in text
        await pilot.press("r")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, TrialCard))
        assert (app.pane.rel, app.pane.line) == ("rollouts.jsonl", 7)
        # the row itself, whole and indented, over the log pane (no line cut at the edge)
        assert await wait_for(pilot, lambda: isinstance(app.screen, LineScreen))
        assert '"_ng_task_index": 1' in app.screen.text and '\n  "response": {' in app.screen.text
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, LineScreen))


async def test_a_listed_line_opens_in_the_log_pane():
    app = fixture_app(CASES07 / "g07_run_failures_sidecar")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_card(pilot, (1, 0))
        assert "failed: agent_run_error, HTTP 500" in card_plain(screen)
        await pilot.press("}", "}")             # from the collector's line, past the row, to the agent's
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, TrialCard))
        assert (app.pane.rel, app.pane.line) == ("logs/mcqa_simple_agent.log", 8)


async def test_escape_closes_the_card_and_changes_nothing():
    app = fixture_app(CASES / "aborted_500")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_card(pilot, (1, 0))
        assert "the collector stopped: aiohttp.client_exceptions.ClientResponseError: 500" in card_plain(screen)
        before = (app.pane.rel, app.pane.line)
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, TrialCard))
        assert (app.pane.rel, app.pane.line) == before


async def test_braces_step_through_the_cause_chain_and_brackets_count_failures(monkeypatch):
    app = fixture_app(CASES07 / "g07_run_failures_sidecar")
    said = []
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        monkeypatch.setattr(app, "notify", lambda msg, **kw: said.append(msg))
        await pilot.press("]")
        assert said[-1] == "failure 1 of 4: task 1 rollout 0"
        await pilot.press("}")
        assert said[-1].startswith("line 1 of 4: gym_eval_run.stdout.log:")
        await pilot.press("}", "}", "}")
        assert said[-1].startswith("line 4 of 4: logs/policy_model.log:")
        assert app.pane.rel == "logs/policy_model.log"
        await pilot.press("{")
        assert said[-1].startswith("line 3 of 4: logs/mcqa_simple_agent.log:")
        await pilot.press("[")
        assert said[-1] == "wrapped to failure 4 of 4: task 3 rollout 1"


@pytest.mark.parametrize("case, key", [(CASES / "some_never_ran", (1, 0)),
                                       (CASES07 / "g07_run_failures_sidecar", (1, 0)),
                                       (CASES / "aborted_500", (1, 0))],
                         ids=["never_ran", "failed_07_sidecar", "missing_after_abort"])
def test_snapshot_trial_card(snap_compare, case, key):
    async def run_before(pilot):
        await open_card(pilot, key)
        await pilot.pause()
    assert snap_compare(fixture_app(case), terminal_size=SIZE, run_before=run_before)


async def test_a_server_without_its_own_log_shows_its_stdout_and_stderr_together(tmp_path):
    """Without +nemo_gym_log_dir a server's prints are on Gym's stdout and its uvicorn lines on
    Gym's stderr: its log is both, and only its lines."""
    from runbuilder import Run

    run = Run(tmp_path)
    run.lines("gym_env_start.stdout.log", "(mcqa) loading the dataset", "(policy_model) hello",
              "(mcqa) dataset ready")
    run.lines("gym_env_start.stderr.log", "(mcqa) INFO:     Started server process [77]",
              "(mcqa) INFO:     Uvicorn running on http://127.0.0.1:9001 (Press CTRL+C to quit)")
    app = fixture_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        app.main.navigator.open_server_log("mcqa", force=True)
        view = app.pane.view
        assert await wait_for(pilot, lambda: view.row_count == 4 and view_settled(app))
        assert app.pane.merged == ["gym_env_start.stderr.log", "gym_env_start.stdout.log"]
        text = "\n".join(view.row_text(i) for i in range(view.row_count))
        assert "dataset ready" in text and "Uvicorn running" in text and "hello" not in text


async def test_t_shows_every_servers_log_around_the_trial():
    """The trial's cause line in every server's log merged in the order the lines were written:
    what the other servers were doing around it."""
    app = fixture_app(CASES07 / "g07_run_failures_sidecar")
    async with app.run_test(size=SIZE) as pilot:
        await open_card(pilot, (1, 0))
        await pilot.press("t")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, TrialCard))
        view = app.pane.view
        assert await wait_for(pilot, lambda: view_settled(app) and view.current() is not None)
        assert len(app.pane.merged) == 4 and view.order_basis == "Gym's output"
        path, line = view.current()
        assert path.endswith("logs/mcqa_simple_agent.log") and line == 8
        assert "around logs/mcqa_simple_agent.log:8" in str(app.pane.border_title)


@pytest.mark.parametrize("case, key, at, merged", [
    # the servers' output is in Gym's captured output only: the first line in it (past the
    # collector's line naming the trial), in that output merged
    ("g070_env_interrupted_mid_collection", (2, 0), ("gym_env_start.stdout.log", 90),
     {"gym_env_start.stderr.log", "gym_env_start.stdout.log"}),
    # every line in the collector's output: the first, merged with the servers' output
    ("g070_collector_interrupted", (2, 0), ("gym_eval_run.stderr.log", 46),
     {"gym_env_start.stderr.log", "gym_env_start.stdout.log", "gym_eval_run.stderr.log"})])
async def test_t_goes_to_the_trials_line_in_gyms_captured_output(monkeypatch, case, key, at, merged):
    """No server has a log of its own (no +nemo_gym_log_dir): `t` still shows what every server
    was doing around the trial's first line that can be shown among them."""
    app = fixture_app(RECORDED070 / case)
    said = []
    async with app.run_test(size=SIZE) as pilot:
        await open_card(pilot, key)
        monkeypatch.setattr(app, "notify", lambda msg, **kw: said.append(msg))
        await pilot.press("t")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, TrialCard))
        view = app.pane.view
        assert await wait_for(pilot, lambda: view_settled(app) and view.current() is not None)
        assert said == [] and set(app.pane.merged) == merged
        path, line = view.current()
        assert (path.rsplit("/", 1)[-1], line) == at
        assert f"around {at[0]}:{at[1]}" in str(app.pane.border_title)


async def test_q_typed_ahead_of_the_card_closes_it_and_the_screen_goes_on():
    """Enter then q in one burst (a paste, a busy machine) can close the card before its Mount is
    handled, its widgets already gone: that ended the app with NoMatches (exit code 1)."""
    app = fixture_app(CASES / "some_never_ran")
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        app.main.navigator.open_trial_card(app.live.state.trials[(1, 0)])
        card = app.screen
        assert isinstance(card, TrialCard) and not card.is_mounted
        card.action_close()                       # q, handled before the card's Mount
        await pilot.pause()
        assert not isinstance(app.screen, TrialCard) and app.return_code is None
        await pilot.press("]")                    # the screen still answers
        assert await wait_for(pilot, lambda: app.main.navigator.failure_index == 0)


async def test_quitting_while_a_card_opens_quits_cleanly():
    """Enter then q can also reach the app first (the card is pushed by a message Enter posted):
    the app quits while the card mounts, which must not turn a quit into a crash."""
    app = fixture_app(CASES / "some_never_ran")
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        app.main.navigator.open_trial_card(app.live.state.trials[(1, 0)])
        app.exit()
        await pilot.pause()
    assert app.return_code == 0
