"""Stage notifications: bell + OSC 9 + OSC 777 + a toast when a watched run reaches a stage,
on replays of recorded runs (fixed clock); silent on a finished run and with --no-notify; the
text put in an escape sequence can never carry one of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CASES, CASES07
from gymwatch.cli import _load_extras, build_parser
from gymwatch.tui.notify import StageNotifier, osc_text, sequences
from tuihelpers import EPOCH, FakeClock, fixture_app, make_app, staged_live, toasts, wait_for

SIZE = (120, 40)


pytestmark = pytest.mark.usefixtures("shape_check_every_poll")


async def replay_all(case: Path, tmp_path: Path, enabled: bool = True) -> tuple[list, list[str], list[str]]:
    """Watch `case` replayed from its first second to its end; (events, escape output, toasts)."""
    clock = FakeClock()
    live, rp = staged_live(case, tmp_path / case.name, [1.0], clock)
    app = make_app(live, clock)
    out: list[str] = []
    app.notifier = StageNotifier(app, enabled=enabled, emit=out.append)
    seen: list = []
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        t = 1.0
        while not rp.done:
            t += 2.0
            rp.step_to(t)
            clock.t = EPOCH + t
            before = len(app.notifier.fired)
            app.refresh_run()
            seen += app.notifier.fired[before:]
            await pilot.pause(0)
        shown = toasts(app)
    return (seen if enabled else app.notifier.reached), out, shown


async def test_a_cold_start_rings_when_all_servers_are_ready_and_when_it_finishes(tmp_path):
    events, out, toasts = await replay_all(CASES / "live_timeline", tmp_path)
    assert [e.stage for e in events] == ["all_ready", "finished"]
    assert events[0].text == "all 3 servers ready" and not events[1].bad
    assert len(out) == 2 and all(s.startswith("\a\x1b]9;gymwatch live_timeline: ") for s in out)
    assert "\x1b]777;notify;gymwatch live_timeline;all 3 servers ready\x07" in out[0]
    assert "all 3 servers ready" in toasts and "finished OK: 10 trials completed" in toasts


async def test_a_startup_failure_rings_with_its_reason(tmp_path):
    events, out, _ = await replay_all(CASES07 / "g07_spinup_timeout", tmp_path)
    assert [e.stage for e in events] == ["startup_failed"] and events[0].bad
    assert "spin-up limit ran out waiting for mcqa" in out[0]


async def test_an_aborted_collection_and_the_first_never_ran_trial_ring(tmp_path):
    events, _, _ = await replay_all(CASES / "aborted_500", tmp_path / "a")
    assert [e.stage for e in events] == ["all_ready", "collection_aborted"]
    events, _, toasts = await replay_all(CASES / "some_never_ran", tmp_path / "b")
    assert [e.stage for e in events] == ["all_ready", "first_never_ran", "finished"]
    assert events[1].text.startswith("first never-ran trial: task 1 rollout 0")
    assert any(t.startswith("first never-ran trial") for t in toasts)


async def test_no_notify_is_silent_but_still_follows_the_stages(tmp_path):
    done, out, toasts = await replay_all(CASES / "live_timeline", tmp_path, enabled=False)
    assert out == [] and not any("servers ready" in t for t in toasts)
    assert done == {"all_ready", "finished"}


async def test_attaching_to_a_finished_run_is_silent():
    app = fixture_app("aborted_500")
    out: list[str] = []
    app.notifier = StageNotifier(app, emit=out.append)
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        app.refresh_run()
        await pilot.pause(0)
    assert out == [] and app.notifier.fired == []


def test_text_from_the_run_cannot_end_or_start_an_escape_sequence():
    evil = "boom\x07\x1b]0;pwned\x07\x1b\\ \x9c st \x1b[31mred\nnext\tline ;semi"
    seq = sequences("gymwatch run;x", evil, tmux=False)
    assert seq.count("\x07") == 3 and seq.count("\x1b") == 2          # the bell and our two OSCs only
    assert "pwned" not in seq and "\x9c" not in seq and "\n" not in seq
    assert "\x1b]777;notify;gymwatch run,x;boom st red next line ,semi\x07" in seq
    assert osc_text("x" * 500).endswith("…") and len(osc_text("x" * 500)) == 180
    wrapped = sequences("t", "hello", tmux=True)
    assert wrapped.startswith("\a\x1bPtmux;\x1b\x1b]9;t: hello\x07\x1b\\")


def test_attach_has_no_notify():
    _load_extras()
    args = build_parser().parse_args(["attach", "x", "--no-notify"])
    assert args.no_notify is True
    assert build_parser().parse_args(["attach", "x"]).no_notify is False
