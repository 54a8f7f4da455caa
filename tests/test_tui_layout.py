"""The live screen on real terminal sizes (issue 13): the stacked / side-by-side layout, the
verdict's reason and evidence readable in full, the readiness board fitted to the width and its
rows (a server's phase whole under it), z / w / escape, the footer's global keys first, toasts
off the evidence pane, the help listing every binding once a key, the keymap file.

Re-baseline on purpose only: `pytest tests/test_tui_layout.py --snapshot-update`, then look at
each SVG.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widgets import Static
from textual.widgets._footer import FooterKey
from textual.widgets._toast import Toast

from conftest import CASES07, FIXTURES
from gymwatch.core.verdict import verdict
from gymwatch.tui.card import TrialCard
from gymwatch.tui.geometry import PHASE_MIN, SERVER_CAP, board_rows, fit_board, fit_columns, trials_width
from gymwatch.tui.helpscreen import HelpScreen, help_rows
from gymwatch.tui.keymap import CARD, all_bindings
from test_tui_app import summary_plain
from tuihelpers import fixture_app, make_app, staged_live, toasts, view_settled, wait_for

SIZES = [(80, 24), (120, 36), (200, 50)]
RUNS = ["startup_failed", "aborted_500", "some_never_ran"]
COLD07 = CASES07 / "g07_cold_start_shared_venv"      # six servers, two waiting on a venv lock
COLD07_AT = [5.0, 12.1, 12.4, 20.0]
TIMEOUT07 = CASES07 / "g07_spinup_timeout"
SILENT = FIXTURES / "gym-0.4.0-recorded" / "cold_build_silent_deaths"
BOARD_KEYS = ["server", "kind", "state", "limit", "why", "in", "ttr", "err", "last"]


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


def summary_lines(app) -> list[str]:
    return [line.text for line in app.summary.render_lines(app.summary.region.reset_offset)]


def board_lines(app) -> list[str]:
    """The board's table as drawn: its header, then its rows."""
    return [app.board.render_line(y).text for y in range(app.board.size.height)]


def detail(app) -> str:
    """The line under the board, spaces folded (it wraps)."""
    line = app.query_one("#board-detail", Static)
    return " ".join(str(line.render()).split()) if line.display else ""


def folded(text: str) -> str:
    return " ".join(text.split())


def cold_start(tmp_path: Path, clock):
    """The 0.7 cold start replayed to 20 s: every server installing, two waiting on a venv lock."""
    live, _ = staged_live(COLD07, tmp_path / COLD07.name, COLD07_AT, clock)
    return make_app(live, clock)


# --- snapshots ---------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("run", RUNS)
def test_snapshot(snap_compare, run, size):
    assert snap_compare(fixture_app(run), terminal_size=size, run_before=settled)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_cold_start_board(snap_compare, tmp_path, clock, size):
    """Six servers, two waiting on a venv lock: every row and column, the selected one whole."""
    async def waiting_one(pilot):
        await settled(pilot)
        pilot.app.board.select("mcqa_simple_agent_b_environment_server")
        await pilot.pause(0.2)

    assert snap_compare(cold_start(tmp_path, clock), terminal_size=size, run_before=waiting_one)


def test_snapshot_board_maximized(snap_compare, tmp_path, clock):
    async def maximized(pilot):
        await settled(pilot)
        await pilot.press("z")
        await pilot.pause(0.3)

    assert snap_compare(cold_start(tmp_path, clock), terminal_size=(80, 24), run_before=maximized)


# --- the reason and the evidence, whole, at every size ------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("run", RUNS)
async def test_reason_and_evidence_never_cut(run, size):
    app = fixture_app(run)
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        shown = " ".join(" ".join(summary_lines(app)).split())
        v = verdict(app.live.state)
        assert v.evidence is not None and v.evidence.where() in shown
        assert " ".join(v.reason.split()) in shown
        assert app.summary.region.bottom <= app.board.region.y      # nothing drawn over it


# --- layout -------------------------------------------------------------------------------
async def test_narrow_stacks_and_wide_sits_side_by_side():
    app = fixture_app("aborted_500")
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        assert app.screen.has_class("-narrow")
        t, log = app.trials.region, app.pane.region
        assert t.width == log.width == 80 and t.bottom <= log.y
        assert app.pane.region.bottom <= app.screen.region.bottom - 1      # above the footer
        assert app.board.parent.region.width == 80 and not app.board.show_horizontal_scrollbar
        await pilot.resize_terminal(200, 50)
        await pilot.pause(0.3)
        assert app.screen.has_class("-wide")
        t, log = app.trials.region, app.pane.region
        assert t.y == log.y and t.right == log.x and log.width >= 48


async def test_no_trials_no_trials_pane():
    app = fixture_app("startup_failed")
    async with app.run_test(size=(120, 36)) as pilot:
        await settled(pilot)
        assert not app.trials.display or app.trials.region.width == 0
        assert app.pane.region.width == 120


async def test_wide_terminal_gives_the_failure_column_room():
    app = fixture_app("aborted_500")
    async with app.run_test(size=(200, 50)) as pilot:
        await settled(pilot)
        key = next(k for k, t in app.live.state.trials.items() if t.status == "missing")
        failure = app.trials.cell(key, "why").plain
        i = app.trials.index_of(key)
        line = app.trials.render_line(i + 1 - int(app.trials.scroll_y)).text
        assert failure in line


def test_fit_columns_drops_empty_then_least_needed():
    keys = ["task", "rollout", "attempt", "status", "gym", "reward", "tokens", "why"]
    widths = [4, 4, 3, 11, 3, 12, 13, 45]
    filled = [True, True, False, True, False, True, True, True]
    shown, fit = fit_columns(keys, widths, filled, 1000)
    assert len(shown) == len(keys) and fit[-1] == 45               # room: everything
    shown, fit = fit_columns(keys, widths, filled, 100)
    assert [keys[i] for i in shown] == ["task", "rollout", "status", "reward", "tokens", "why"]
    shown, fit = fit_columns(keys, widths, filled, 60)
    assert "tokens" not in [keys[i] for i in shown] and fit[-1] >= 24
    assert trials_width(500, 200) == 200 - 84 and trials_width(40, 120) == 40


# --- the readiness board ----------------------------------------------------------------------
def test_fit_board_caps_the_name_keeps_err_and_drops_by_priority():
    # the cold start's cells: a 38-character server name, a 48-character venv-lock phase
    widths = dict(server=38, kind=5, state=12, limit=9, why=48, in_=8, ttr=8, err=3, last=90)
    widths["in"] = widths.pop("in_")
    filled = {k: True for k in BOARD_KEYS}

    def total(fit):
        return sum(w + 2 for w in fit.values())

    shown, fit = fit_board(BOARD_KEYS, widths, filled, 78)                 # 80 columns
    assert shown == ["server", "kind", "state", "why", "err"] and total(fit) == 78
    assert fit["server"] == SERVER_CAP and fit["why"] >= PHASE_MIN
    shown, fit = fit_board(BOARD_KEYS, widths, filled, 118)                # 120: the phase whole
    assert "last" not in shown and "err" in shown and fit["why"] >= 48 and total(fit) == 118
    shown, fit = fit_board(BOARD_KEYS, widths, filled, 198)                # 200: everything
    assert shown == BOARD_KEYS and fit["server"] == 38 and fit["why"] == 48 and total(fit) == 198
    # a long reason: the last line goes, the reason takes the width it leaves
    shown, fit = fit_board(BOARD_KEYS, {**widths, "why": 291}, filled, 198)
    assert "last" not in shown and total(fit) == 198 and fit["why"] >= 90
    # columns no row fills go first
    shown, _ = fit_board(BOARD_KEYS, widths, {**filled, "ttr": False, "limit": False}, 198)
    assert "ttr" not in shown and "limit" not in shown
    assert board_rows(7, 8, with_trials=False) == 3 and board_rows(7, 13, with_trials=False) == 7
    assert board_rows(7, 17, with_trials=True) == 6 and board_rows(7, 40, with_trials=True) == 7


async def test_cold_start_at_80x24_every_server_every_column_fits(tmp_path, clock):
    app = cold_start(tmp_path, clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        board = app.board
        assert board.row_count == 6 and not board.show_vertical_scrollbar      # every row on screen
        assert board.size.height == 7 and board.virtual_size.height == 7
        assert sum(w + 2 for w in board.widths.values()) == board.scrollable_content_region.width
        assert "err" in board.shown_columns and board.widths["server"] <= SERVER_CAP
        assert board.widths["why"] >= PHASE_MIN
        lines = board_lines(app)
        assert lines[0].rstrip().endswith("Err") and lines[0].startswith(" Server ")
        assert all(line.rstrip().endswith(" 0") for line in lines[1:])         # every Err cell
        assert app.pane.region.height >= 5 and app.pane.region.y >= board.parent.region.bottom
        # the selected server's name and phase whole under the board
        board.focus()
        board.select("mcqa_simple_agent_b_environment_server")
        assert await wait_for(pilot, lambda: "mcqa_simple_agent_b_environment_server" in detail(app))
        assert "waiting for mcqa_environment_server's venv setup" in detail(app)
        await pilot.press("up")
        assert await wait_for(pilot, lambda: "waiting for mcqa_simple_agent's venv setup" in detail(app))
        line = app.query_one("#board-detail")
        assert board.parent.region.contains_region(line.region) and line.region.y >= board.region.bottom


async def test_a_reset_keeps_the_boards_cursor_and_its_log(tmp_path, clock):
    """The run's files read again (a reset) put the board's cursor back on the first row, and
    the log pane opened that server's log."""
    app = cold_start(tmp_path, clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        app.board.focus()
        app.board.select("mcqa_simple_agent_b")
        assert await wait_for(pilot, lambda: app.pane.rel == "logs/mcqa_simple_agent_b.log")
        changes = app.live.poll()
        changes.reset = True
        app.main.apply(changes)
        await pilot.pause(0.2)
        assert app.board.server_at_cursor() == "mcqa_simple_agent_b"
        assert app.pane.rel == "logs/mcqa_simple_agent_b.log"


async def test_z_gives_the_board_the_whole_screen_with_its_phases_whole(tmp_path, clock):
    app = cold_start(tmp_path, clock)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        board = app.board
        board.focus()
        await pilot.press("z")
        assert await wait_for(pilot, lambda: board.wrap and board.size.height > 12)
        await pilot.pause(0.1)
        assert app.screen.maximized is board.parent
        assert board.parent.region == Region(0, 0, 80, 23)                   # all but the footer
        assert board.virtual_size.height <= board.size.height                 # every row
        text = folded(" ".join(board_lines(app)))
        assert "…" not in text
        heights = {str(k.value): r.height for k, r in board.rows.items()}
        assert heights["mcqa_simple_agent_b"] > 1 and heights["mcqa"] == 1   # the long phase wrapped
        for word in ("waiting", "mcqa_simple_agent's", "venv", "setup", "ronment_server"):
            assert word in text
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: not board.wrap and app.screen.maximized is None)
        await pilot.pause(0.1)
        assert all(r.height == 1 for r in board.rows.values())


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("run", [TIMEOUT07, SILENT], ids=lambda p: p.name)
async def test_a_failed_servers_reason_is_readable_whole(run, size):
    app = fixture_app(run)
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        board = app.board
        for s in [s for s in app.live.state.servers.values() if s.failure_reason]:
            board.select(s.name)
            await pilot.pause(0.05)
            row = board_lines(app)[board.get_row_index(s.name) + 1 - int(board.scroll_y)]
            whole = folded(s.failure_reason) in folded(row)
            said = folded(s.failure_reason) in folded(summary_plain(app)) and s.name in summary_plain(app)
            assert whole or said or folded(s.failure_reason) in detail(app), s.name
            if said:
                assert not detail(app)                  # not twice: on 80x24 the trials had no row left
            elif not whole:
                assert s.failure.where() in detail(app)                   # and where enter goes
        if size == (200, 50) and run == TIMEOUT07:                         # room: the row itself
            mcqa = app.live.state.servers["mcqa"]
            row = board_lines(app)[board.get_row_index("mcqa") + 1 - int(board.scroll_y)]
            assert folded(mcqa.failure_reason) in folded(row) and not detail(app)


# --- the footer and the toasts ----------------------------------------------------------------
@pytest.mark.parametrize("pane", ["board", "trials", "log"])
async def test_footer_shows_the_global_keys_first(pane):
    app = fixture_app("aborted_500")
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        {"board": app.board, "trials": app.trials, "log": app.pane.view}[pane].focus()

        def keys() -> list[FooterKey]:
            return [k for k in app.screen.query(FooterKey) if "-command-palette" not in k.classes]

        own = {"board": "l", "trials": "v", "log": "slash"}[pane]     # a key of the pane's own

        def laid_out() -> bool:
            return own in [k.key for k in keys()[5:]] and all(
                0 < k.region.width and k.region.right <= 80 for k in keys()[:5])

        assert await wait_for(pilot, laid_out)
        first = [k.key for k in keys()[:5]]
        assert first == ["q", "question_mark", "z", "right_square_bracket", "exclamation_mark"], first


async def test_toasts_stay_off_the_evidence_pane():
    """`]` and `}` toast where they go; at 80x24 those toasts stacked over the evidence pane."""
    app = fixture_app("aborted_500")
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settled(pilot)
        await pilot.press("right_square_bracket", "right_square_bracket", "right_curly_bracket",
                          "right_curly_bracket")
        assert await wait_for(pilot, lambda: "line 2 of" in " ".join(toasts(app)))
        await pilot.pause(0.2)
        shown = [t for t in app.screen.query(Toast) if t.region.area]
        assert len(shown) == 1                      # at 80x24 one at a time, the newest
        for t in shown:
            assert not t.region.overlaps(app.pane.region), str(t.region)
            assert t.region.y < app.pane.region.y


# --- keys -----------------------------------------------------------------------------------
async def test_z_maximizes_the_focused_pane_escape_restores():
    app = fixture_app("aborted_500")
    async with app.run_test(size=(120, 36)) as pilot:
        await settled(pilot)
        app.pane.view.focus()
        await pilot.press("z")
        assert app.screen.maximized is app.pane
        assert app.pane.region.width == 120
        await pilot.press("escape")
        assert app.screen.maximized is None
        app.trials.focus()
        await pilot.press("z")
        assert app.screen.maximized is app.trials
        await pilot.press("z")
        assert app.screen.maximized is None


async def test_w_wraps_long_log_lines():
    app = fixture_app("aborted_500")
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        view = app.pane.view
        width = view.scrollable_content_region.width
        cut = [view.render_line(y).text for y in range(view.scrollable_content_region.height)]
        assert any(line.rstrip().endswith("…") for line in cut)
        await pilot.press("w")
        assert view.wrap
        await pilot.pause(0.1)
        wrapped = [view.render_line(y).text for y in range(view.scrollable_content_region.height)]
        assert not any(line.rstrip().endswith("…") for line in wrapped)
        line_no = f"{view.current()[1]} "                     # the evidence line stays on screen
        assert any(line.strip().startswith(line_no) for line in wrapped)
        long = next(vy for vy in range(view.row_count) if view._full_strip(vy)[0].cell_length > width)
        rows = view._wrap_row(long, width)
        assert len(rows) > 1 and "".join(r.text for r in rows).replace(" ", "") == \
            view._full_strip(long)[0].text.replace(" ", "")
        await pilot.press("w")
        assert not view.wrap


async def test_help_lists_every_binding_with_its_id():
    app = fixture_app("some_never_ran")
    async with app.run_test(size=(120, 50)) as pilot:
        await settled(pilot)
        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        static = app.screen.query_one(Static)
        plain = "\n".join(s.text for s in static.render_lines(
            Region(0, 0, static.content_region.width, static.virtual_size.height)))
        for _, b in all_bindings(app):
            assert b.id, f"{b.key} -> {b.action} has no id"
            assert b.id in plain and app.get_key_display(b) in plain
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_help_lists_each_key_once_and_the_cards_keys():
    app = fixture_app("some_never_ran")
    async with app.run_test(size=(120, 50)) as pilot:
        await settled(pilot)
        rows = help_rows(app)
        for section, lines in rows.items():
            keys = [k for line in lines for k in line[0].split()]
            assert len(keys) == len(set(keys)), (section, keys)
        ctrl_c = [line for line in rows["Everywhere"] if "^c" in line[0].split()]
        assert len(ctrl_c) == 1 and "gymwatch.copy" in ctrl_c[0][2] and "gymwatch.ctrl-c" in ctrl_c[0][2]
        assert "copy" in ctrl_c[0][1] and "quit" in ctrl_c[0][1]
        card = {line[2]: line[0] for line in rows[CARD]}
        for b in TrialCard.BINDINGS:
            assert b.id in card
        assert card["card.raw-row"] == "r" and card["card.next-line"] == "}" and card["card.prev-line"] == "{"
        assert "esc" in card["card.close"].split()


async def test_keymap_file_remaps_a_key(own_config: Path):
    own_config.parent.mkdir(parents=True)
    own_config.write_text('"gymwatch.maximize" = "M"\n[logview]\nwrap = "W"\n')
    app = fixture_app("aborted_500")
    async with app.run_test(size=(120, 36)) as pilot:
        await settled(pilot)
        assert not app.keymap_problems
        app.pane.view.focus()
        await pilot.press("z")
        assert app.screen.maximized is None               # z no longer maximizes
        await pilot.press("M")
        assert app.screen.maximized is app.pane
        await pilot.press("escape")
        await pilot.press("W")
        assert app.pane.view.wrap


async def test_bad_keymap_file_is_a_one_line_warning(own_config: Path):
    own_config.parent.mkdir(parents=True)
    own_config.write_text('"gymwatch.maximize" = "Z"\n"no.such" = "x"\n"gymwatch.wrap" = "notakey"\n'
                          '"gymwatch.help" = 3\n')
    app = fixture_app("aborted_500")
    async with app.run_test(size=(120, 36)) as pilot:
        await settled(pilot)
        problems = app.keymap_problems
        assert len(problems) == 3 and all("\n" not in p and str(own_config) in p for p in problems)
        assert any(set(problems) <= set(toast.split("\n")) for toast in toasts(app))   # one toast, a line each
        await pilot.press("Z")                              # the good entry still applies
        assert app.screen.maximized is not None

    own_config.write_text("this is = = not toml\n")
    app = fixture_app("aborted_500")
    async with app.run_test(size=(120, 36)) as pilot:
        await settled(pilot)
        assert len(app.keymap_problems) == 1 and str(own_config) in app.keymap_problems[0]
        assert "not used" in app.keymap_problems[0]



def spy_refreshes(monkeypatch) -> list[tuple[str, bool]]:
    """Every widget refresh from now on: (its class, whether it asked for a layout)."""
    from textual.widget import Widget

    seen: list[tuple[str, bool]] = []
    real = Widget.refresh

    def spy(self, *regions, **kw):
        seen.append((type(self).__name__, bool(kw.get("layout"))))
        return real(self, *regions, **kw)

    monkeypatch.setattr(Widget, "refresh", spy)
    return seen


@pytest.mark.parametrize("run", ["aborted_500", "startup_failed"])       # trials; none (no trials pane)
async def test_a_poll_that_changes_nothing_redraws_nothing(run, monkeypatch):
    """The idle screen's cost: the 1 s tick polls a run where nothing moved. It lays out and
    repaints nothing (each poll set the board's height, the trials pane's width and the board's
    title again, and the whole screen was laid out every second)."""
    app = fixture_app(run)
    async with app.run_test(size=(200, 50)) as pilot:
        await settled(pilot)
        seen = spy_refreshes(monkeypatch)
        for _ in range(3):
            app.refresh_run()
            await pilot.pause()
        assert seen == []


async def test_a_live_runs_clock_repaints_the_summary_and_lays_nothing_out(tmp_path, clock, monkeypatch):
    """A quiet live run: only its clock moves, each second. The summary line is repainted; nothing
    is laid out again while its height stays the same."""
    live, _ = staged_live("mixed_ok", tmp_path / "mixed_ok", [10.0], clock)
    app = make_app(live, clock)
    async with app.run_test(size=(200, 50)) as pilot:
        await settled(pilot)
        before = summary_lines(app)[0]
        seen = spy_refreshes(monkeypatch)
        for _ in range(3):
            clock.t += 1
            app.refresh_run()
            await pilot.pause()
        assert summary_lines(app)[0] != before                # the clock moved on screen
        assert ("Summary", False) in seen and not [s for s in seen if s[1]], seen
