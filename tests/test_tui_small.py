"""What a new user hits on the live screen at 80x24 and in the details (issue 33): what needs a
look comes first, `z` on the trials, one toast at a time off the verdict line, the selected
failure whole under the table, a footer of whole labels, `g` pausing the log, the help's layout
and ids, the board selecting the server the run waits on and saying what is true of it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widgets import Static
from textual.widgets._footer import FooterKey
from textual.widgets._toast import Toast

from conftest import CASES07
from gymwatch.core.model import T_FAILED, T_MISSING, T_NEVER_RAN
from gymwatch.tui.head import Probe
from gymwatch.tui.helpscreen import HelpScreen
from gymwatch.tui.keymap import CARD, all_bindings
from gymwatch.tui.polling import HeadProbed
from gymwatch.tui.trials import _why
from runbuilder import Run
from tuihelpers import EPOCH, fixture_app, screen_lines, toasts, view_settled, wait_for

PROBLEMS = (T_FAILED, T_NEVER_RAN, T_MISSING)
SIDECAR = CASES07 / "g07_run_failures_sidecar"     # failures longer than 80 columns


@pytest.fixture(autouse=True)
def own_config(tmp_path, monkeypatch):
    """No user's keymap file reaches these tests: each gets its own config dir."""
    monkeypatch.delenv("GYMWATCH_KEYMAP", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config" / "gymwatch" / "keymap.toml"


async def settled(pilot) -> None:
    app = pilot.app
    assert await wait_for(pilot, lambda: app.run_shown and view_settled(app))
    await pilot.pause(0.2)


def folded(text: str) -> str:
    return " ".join(text.split())


def shown_trials(app) -> list:
    """The trials whose rows are on screen."""
    table = app.trials
    rows = table.scrollable_content_region.height - 1
    top = int(table.scroll_y)
    keys = [table.key_at(i) for i in range(top, top + rows)]
    return [app.live.state.trials[k] for k in keys if k is not None]


# --- what needs a look comes first --------------------------------------------------------------
@pytest.mark.parametrize("run", ["aborted_500", "some_never_ran"])
async def test_at_80x24_the_trials_that_need_a_look_come_first_and_the_title_says_how(run):
    """aborted_500 at 80x24 showed two completed rows; its six missing ones needed scrolling."""
    app = fixture_app(run)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        state = app.live.state
        problems = sorted(k for k, t in state.trials.items() if t.status in PROBLEMS)
        shown = shown_trials(app)
        assert shown and shown[0].status in PROBLEMS, [t.status for t in shown]
        assert app.trials.trial_at_cursor().key == problems[0]      # the first `]` goes to
        title = app.trials.border_title
        assert f"{len(problems)} need a look" in title and "]" in title and "v" in title, title
        # `]` goes on from there, in the same order
        app.trials.focus()
        await pilot.press("right_square_bracket")
        assert app.trials.trial_at_cursor().key == problems[1]
        # `v` shows only them, and the title says so instead
        await pilot.press("v")
        assert "need a look" not in app.trials.border_title


async def test_the_cursor_is_the_users_once_moved():
    app = fixture_app("aborted_500")
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        app.trials.focus()
        await pilot.press("home")
        assert app.trials.cursor == 0
        app.refresh_run()
        await pilot.pause(0.1)
        assert app.trials.cursor == 0


# --- z on the trials ----------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("pane", ["trials", "log", "board"])
async def test_z_gives_the_pane_the_screen(size, pane):
    """On the trials it showed a centred box of 8 rows over a hatch."""
    app = fixture_app("aborted_500")
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        focus, whole = {"trials": (app.trials, app.trials), "log": (app.pane.view, app.pane),
                        "board": (app.board, app.board.parent)}[pane]
        focus.focus()
        await pilot.press("z")
        await pilot.pause(0.2)
        assert app.screen.maximized is whole
        assert whole.region == Region(0, 0, size[0], size[1] - 1)      # all but the footer
        if pane == "trials":
            assert len(shown_trials(app)) == len(app.live.state.trials)
        await pilot.press("z")
        await pilot.pause(0.2)
        assert app.screen.maximized is None
        assert app.trials.region.width < size[0] or size[0] < 100       # back beside the log


async def test_z_again_on_the_trials_gives_them_the_whole_screen_again():
    """Maximized a second time (z, z, z), the trials kept their width beside the log: a centred
    box over a hatch (their inline width was cleared after the layout, which Textual did not redo)."""
    app = fixture_app("aborted_500")
    async with app.run_test(size=(200, 50)) as pilot:
        await settled(pilot)
        app.trials.focus()
        for _ in range(3):
            await pilot.press("z")
            await pilot.pause(0.3)
        assert app.screen.maximized is app.trials
        assert app.trials.region == Region(0, 0, 200, 49)


# --- toasts ---------------------------------------------------------------------------------------
def verdict_line_bottom(app) -> int:
    """The row under the summary's first line(s): the verdict and the counts."""
    first = app.summary.text(app.summary.content_region.width).plain.split("\n")
    reason = folded(str(app.summary._line2))
    items = [line for line in first if folded(line) and folded(line) not in reason]
    return app.summary.region.y + len(items)


async def test_at_80x24_one_toast_at_a_time_and_never_over_the_verdict_line():
    """`]` `]` `}` `}` stacked four toasts over the verdict and the board."""
    app = fixture_app("aborted_500")
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settled(pilot)
        await pilot.press("right_square_bracket", "right_square_bracket", "right_curly_bracket",
                          "right_curly_bracket")
        await pilot.pause(0.3)
        shown = [t for t in app.screen.query(Toast) if t.region.area]
        assert len(shown) == 1, [str(t.render()) for t in shown]
        assert "line 2 of" in toasts(app)[-1] and len(toasts(app)) == 1      # the newest replaced the rest
        assert shown[0].region.y == verdict_line_bottom(app) > app.summary.region.y     # right under it
        assert not shown[0].region.overlaps(app.pane.region)


async def test_on_a_big_screen_toasts_stay_off_the_verdict_line_too():
    app = fixture_app("aborted_500")
    async with app.run_test(size=(200, 50), notifications=True) as pilot:
        await settled(pilot)
        await pilot.press("right_square_bracket", "right_square_bracket")
        await pilot.pause(0.3)
        shown = [t for t in app.screen.query(Toast) if t.region.area]
        assert shown and all(t.region.y >= verdict_line_bottom(app) for t in shown)


# --- the selected failure, whole --------------------------------------------------------------------
@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_selected_failure_under_the_table_is_whole(size):
    """It was the table's bottom border title: cut at the border's width. Under the rows it is
    whole where the pane has the room; where it has not (80x24, under a long verdict reason) the
    selected row still shows and the failure is cut with `…` (the card has it whole)."""
    app = fixture_app(SIDECAR)
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        t = next(t for t in app.live.state.trials.values() if t.status == T_FAILED)
        app.trials.focus()
        app.trials.select(t.key)
        await pilot.pause(0.2)
        pane = app.trials.region
        assert len(_why(t)) > pane.width
        below = [line[pane.x:pane.right] for line in screen_lines(app)[pane.y:pane.bottom]]
        rows = [i for i, line in enumerate(below) if line[1:].lstrip().startswith(f"{t.task_index} ")]
        assert rows, below                          # the selected trial's own row is on screen
        under = below[max(rows) + 1:]
        text = folded(" ".join(line.strip("│╰╯─▅▆▇█▄▃▂▁ ") for line in under))
        whole = folded(_why(t))
        if app.trials.rows_shown > 1:
            assert whole in text, (text, below)
        else:
            assert text.endswith("…") and whole.startswith(text[:-1].rstrip()), (text, below)
            assert size == (80, 24)


# --- the footer ----------------------------------------------------------------------------------
@pytest.mark.parametrize("pane", ["board", "trials", "log"])
async def test_at_80_columns_the_footer_shows_only_whole_labels(pane):
    """`l Cause log` was cut to `l` by the palette key."""
    app = fixture_app(SIDECAR)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        {"board": app.board, "trials": app.trials, "log": app.pane.view}[pane].focus()
        await pilot.pause(0.3)
        keys = list(app.screen.query(FooterKey))
        palette = next(k for k in keys if "-command-palette" in k.classes)
        shown = [k for k in keys if k is not palette and k.display and k.region.width]
        assert len(shown) >= 5
        footer = screen_lines(app)[-1]
        for k in shown:
            assert k.region.right <= palette.region.x, (k.key, k.region, palette.region)
            assert f"{k.key_display} {k.description}" in footer


# --- the log pane's follow state ------------------------------------------------------------------
@pytest.mark.parametrize("lines", [200, 0], ids=["long", "short"])
async def test_g_pauses_following_and_the_header_says_so(tmp_path: Path, clock, lines):
    """The header said `● following` after `g` went to the top."""
    import shutil

    from conftest import CASES
    run = tmp_path / "run"
    shutil.copytree(CASES / "mixed_ok", run)
    log = run / "logs" / "mcqa.log"
    with open(log, "a") as fh:
        fh.writelines(f"(mcqa) filler {i}\n" for i in range(lines))
    app = fixture_app(run, clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        app.pane.show(log, "logs/mcqa.log")
        view = app.pane.view
        assert await wait_for(pilot, lambda: view_settled(app) and view.scroll_y >= view.max_scroll_y)
        header = app.pane.query_one("#log-header")
        assert "● following" in str(header.render())
        view.focus()
        await pilot.press("g")
        assert await wait_for(pilot, lambda: "paused" in str(header.render()))
        assert "● following" not in str(header.render()) and view.cursor == 0
        with open(log, "a") as fh:
            fh.write("(mcqa) one more\n")
        app.hints.put_nowait("logs/mcqa.log")
        assert await wait_for(pilot, lambda: app.pane.new_lines == 1)
        assert view.cursor == 0                         # paused: the cursor stays at the top
        await pilot.press("G")
        assert await wait_for(pilot, lambda: "● following" in str(header.render()))


# --- help ----------------------------------------------------------------------------------------
async def test_binding_ids_have_one_naming_style():
    app = fixture_app("aborted_500")
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        bad = [b.id for _, b in all_bindings(app) if not re.fullmatch(r"[a-z]+\.[a-z]+(-[a-z]+)*", b.id or "")]
        assert not bad, bad


async def test_help_at_80_columns_keeps_key_description_and_id_in_their_columns():
    """Ids and descriptions wrapped to the box's left edge, ids on lines of their own."""
    app = fixture_app("aborted_500")
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause(0.2)
        static = app.screen.query_one("#help-box").query_one(Static)
        width = static.content_region.width
        lines = [s.text.rstrip() for s in static.render_lines(Region(0, 0, width, static.virtual_size.height))]
        ids = {b.id for _, b in all_bindings(app)}
        sections = {"Everywhere", "Servers", "Trials", "Log", CARD}
        start = next(i for i, line in enumerate(lines) if line in sections)
        end = next(i for i, line in enumerate(lines) if line.startswith("Remap"))
        body = [line for line in lines[start:end] if line and line not in sections]
        for line in body:       # a key's row, or its description going on in its own column
            assert line.startswith("  "), f"wrapped to the left edge: {line!r}"
            assert line.split()[0] not in ids, f"an id on a line of its own: {line!r}"
        where = {}
        for line in body:
            for word in line.split():
                if word in ids:
                    where.setdefault(word, line.index(word))
        assert set(where) == ids - {None}
        assert len(set(where.values())) == 1, where      # one column of ids, each whole


async def test_an_old_binding_id_still_works_in_a_keymap_file(own_config: Path):
    own_config.parent.mkdir(parents=True)
    own_config.write_text('"gymwatch.next_failure" = "x"\n"gymwatch.all_logs" = "M"\n')
    app = fixture_app("some_never_ran")
    async with app.run_test(size=(120, 36)) as pilot:
        await settled(pilot)
        assert not app.keymap_problems
        app.board.focus()
        await pilot.press("x")
        assert app.focused is app.trials and app.trials.trial_at_cursor().key == (1, 0)
        await pilot.press("M")
        assert app.pane.merged


# --- the board ------------------------------------------------------------------------------------
def stuck_run(root: Path) -> Path:
    """Two servers ready, the third (last on the board) still installing its venv."""
    run = Run(root)
    run.ready_server("a_agent", 18001)
    run.ready_server("b_model", 18002)
    run.server_log("c_resources", "Using CPython 3.13.0 interpreter at: /usr/bin/python3.13",
                   "Creating virtual environment with seed packages at: /tmp/c/.venv",
                   "Resolved 161 packages in 3.40s", "Downloading ray (75.6MiB)")
    return root


async def test_the_board_selects_the_server_the_run_waits_on(tmp_path, clock):
    """At 80x24 the demo selected a ready server instead of the stuck one."""
    app = fixture_app(stuck_run(tmp_path / "run"), clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        assert list(app.board._cells)[0] == "a_agent"
        assert await wait_for(pilot, lambda: app.board.server_at_cursor() == "c_resources")
        assert await wait_for(pilot, lambda: app.pane.rel == "logs/c_resources.log")
        # once the user moves the cursor, it is theirs
        app.board.focus()
        await pilot.press("home")
        assert await wait_for(pilot, lambda: app.board.server_at_cursor() == "a_agent")
        clock.t += 5
        app.refresh_run()
        await pilot.pause(0.1)
        assert app.board.server_at_cursor() == "a_agent"


async def test_a_ready_server_does_not_say_ready_twice_nor_contradict_itself(tmp_path, clock):
    """`● ready  ready · GET / → refused`: the probe was taken before the server was ready."""
    run = Run(tmp_path / "run")
    stuck_run(run.root)
    run.server_log("d_agent", "INFO:     Started server process [1]")
    app = fixture_app(run.root, clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        before = clock.t
        app.main.head_probed(HeadProbed(Probe(detail={"d_agent": "GET / → refused", "c_resources": "GET / → refused"},
                                              answers={"d_agent": False, "c_resources": False}, at=before)))
        clock.t += 2
        run.ready_server("d_agent", 18004)
        app.refresh_run()
        await pilot.pause(0.1)
        assert app.live.state.servers["d_agent"].state == "ready"
        why = app.board.row_cells("d_agent")[4].plain
        assert "ready" not in why and "refused" not in why, why       # the probe is older than that
        assert "GET / → refused" in app.board.row_cells("c_resources")[4].plain    # still true of it
        app.main.head_probed(HeadProbed(Probe(detail={"d_agent": "GET / → refused"}, answers={"d_agent": False}, at=clock.t + 1)))
        await pilot.pause(0.1)
        why = app.board.row_cells("d_agent")[4].plain
        assert why == "its log said ready, but GET / → refused", why
        app.main.head_probed(HeadProbed(Probe(detail={"d_agent": "GET / → HTTP 200"}, answers={"d_agent": True}, at=clock.t + 2)))
        await pilot.pause(0.1)
        assert app.board.row_cells("d_agent")[4].plain == "GET / → HTTP 200"
        assert app.board.row_cells("a_agent")[4].plain == ""          # not `ready` again
        assert before >= EPOCH
