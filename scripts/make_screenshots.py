#!/usr/bin/env python3
"""Write screenshots/*.svg of the live screen from the recorded runs in tests/fixtures.

    .venv/bin/python scripts/make_screenshots.py [OUT_DIR]

Same states as the snapshot tests (fixed clock), plus the aborted and ok runs, and
`gymwatch serve` in Debian's headless chromium (screenshots/serve_aborted_500.png).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))   # the tests' helpers

from gymwatch.core import session as core_session  # noqa: E402
from tuihelpers import FakeClock, fixture_app, make_app, staged_live, view_settled, wait_for  # noqa: E402

SIZE = (140, 42)
COLD_START = [3.3, 9.4, 10.4, 12.4, 20.0, 24.2, 24.5, 25.5, 26.2]
COLLECTING = COLD_START + [30.2, 33.0, 36.0, 37.0, 38.0, 39.0, 40.0]
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
# Gym 0.7.0 with its model endpoint silent after 3 rows (29.0 s): stalled from a minute later
STALLED = [1.0, 20.0, 22.3, 25.8, 27.3, 29.1, 60.0, 96.0, 130.0]
# g07_cold_start_shared_venv's recorded times (its timeline.jsonl) up to all six servers ready
COLD_SHARED = [0.5, 5.0, 5.3, 11.3, 12.1, 12.3, 13.6, 13.8, 27.3, 27.5, 29.5, 29.8, 32.3, 32.6, 33.1, 33.3, 36.6,
               36.9, 37.1, 37.4, 42.6, 49.0, 50.2, 51.2, 51.5, 52.0, 52.7, 53.2, 56.0, 56.2, 59.3, 59.8, 62.3, 62.6,
               63.6]


async def shoot(app, out: Path, keys: tuple[str, ...] = (), size: tuple[int, int] = SIZE) -> None:
    async with app.run_test(size=size) as pilot:
        view = app.pane.view
        settled = lambda: app.run_shown and view_settled(app) and (  # noqa: E731
            not view.follow or view.scroll_y >= view.max_scroll_y)
        await wait_for(pilot, settled)
        for key in keys:
            await pilot.press(key)
            await wait_for(pilot, settled)
        await pilot.pause(0.2)          # the footer draws its keys after the first frames
        app.save_screenshot(filename=out.name, path=str(out.parent))
    print(out)


def staged(case: str | Path, times: list[float], tmp: Path, stuck: float = 0.0):
    clock = FakeClock()
    live, _ = staged_live(case, tmp / Path(case).name, times, clock)
    clock.t += stuck
    return make_app(live, clock)


async def compare_shot(out: Path, size: tuple[int, int] = (120, 40)) -> None:
    """The runs browser's compare screen on two runs of 50 tasks (tests/runbuilder.scored_pair:
    made, not recorded: the recorded runs have 5 tasks, too few for an interval)."""
    from textual.app import App

    from gymwatch.browse.compare import CompareScreen
    from runbuilder import scored_pair

    with tempfile.TemporaryDirectory() as tmp:
        a, b = scored_pair(Path(tmp) / "runs")
        app = App()
        app.title = "gymwatch browse"
        async with app.run_test(size=size) as pilot:
            screen = CompareScreen(str(a), str(b), [str(Path(tmp) / "runs")])
            app.push_screen(screen)
            await wait_for(pilot, lambda: screen.loaded)
            await pilot.pause(0.2)
            app.save_screenshot(filename=out.name, path=str(out.parent))
    print(out)


async def submission_shot(out: Path, size: tuple[int, int] = (150, 14)) -> None:
    """A `gym eval submit` of two benchmarks, one job running and one queued for resources (selected:
    its line under the table says it whole): the recorded files as they were 61 s in, a fake Slurm
    on PATH answering as the real one did then."""
    from fakeslurm import FakeSlurm
    from tuihelpers import pending_running_app, submission_shown

    saved = dict(os.environ)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            fake = FakeSlurm(Path(tmp))
            os.environ.update({k: fake.env[k] for k in ("PATH", "FAKESLURM_STATE", "FAKESLURM_LOG")})
            app = pending_running_app(Path(tmp) / "runs", fake)
            async with app.run_test(size=size) as pilot:
                await submission_shown(pilot)
                await pilot.press("down")
                await pilot.pause(0.2)
                app.save_screenshot(filename=out.name, path=str(out.parent))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    print(out)


async def serve_shot(case: str, out: Path) -> None:
    """`gymwatch serve` on a recorded run, as a browser on a laptop shows it (through the same
    headless chromium the serve tests drive)."""
    from headless_browser import Browser, serving

    run = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "gym-0.4.0-cases" / case
    with serving(run) as (port, _):
        async with Browser(1400, 860) as browser:
            await browser.goto(f"http://127.0.0.1:{port}/?fontsize=14")
            await browser.wait_js("document.body.classList.contains('-first-byte')", timeout=60)
            out.write_bytes(await browser.settled_screenshot())


async def main(out: Path) -> None:
    core_session.SHAPE_CHECK_EVERY = 0.0   # staged replays poll faster than real time
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        await shoot(staged("live_timeline", COLD_START, t / "a", stuck=300), out / "cold_start_stuck.svg")
        await shoot(staged("live_timeline", COLLECTING, t / "b"), out / "collecting.svg")
        await shoot(staged(FIXTURES / "gym-0.7.0-stalls" / "g070_endpoint_silent_for_good", STALLED, t / "e"),
                    out / "stalled.svg")
        # the startup timeline (`t`) of six servers, two sharing a venv: the lock waits, the critical
        # path; and the board's startup column while they start
        cold = FIXTURES / "gym-0.7.0-cases" / "g07_cold_start_shared_venv"
        await shoot(staged(cold, COLD_SHARED, t / "c"), out / "startup_timeline.svg", ("t",))
        await shoot(staged(cold, COLD_SHARED[:16], t / "d"), out / "starting_board.svg", size=(200, 50))
    await shoot(fixture_app("some_never_ran"), out / "some_never_ran.svg", ("right_square_bracket",))
    await shoot(fixture_app("startup_failed"), out / "startup_failed.svg")
    await shoot(fixture_app("aborted_500"), out / "aborted_500.svg")
    await shoot(fixture_app("mixed_ok"), out / "mixed_ok.svg")
    # the layout at a small and a wide terminal (stacked panes; the Failure column whole)
    await shoot(fixture_app("aborted_500"), out / "aborted_500_80x24.svg", size=(80, 24))
    await shoot(fixture_app("some_never_ran"), out / "some_never_ran_200x50.svg", size=(200, 50))
    # Gym 0.7: a spin-up limit that ran out, and the card of a trial the failure sidecar names
    cases07 = FIXTURES / "gym-0.7.0-cases"
    await shoot(fixture_app(cases07 / "g07_spinup_timeout"), out / "g07_spinup_timeout.svg")
    await shoot(fixture_app(cases07 / "g07_run_failures_sidecar"), out / "g07_failed_trial_card.svg",
                ("right_square_bracket", "enter"))
    # the charts (`p`): results per minute of a run with a 75 s stall, and cost per agent
    spread = FIXTURES / "gym-0.7.0-stalls" / "g070_endpoint_silent_75s"
    await shoot(fixture_app(spread), out / "charts_throughput.svg", ("p",))
    await shoot(fixture_app(cases07 / "g07_health_summary"), out / "charts_cost.svg", ("p", "5"))
    # `gymwatch diff` as the runs browser's compare screen: the verdict line, flipped tasks first
    await compare_shot(out / "compare_stats.svg")
    # `gym eval submit`: a submission's screen, one benchmark running and one queued
    await submission_shot(out / "submission_pending_running.svg")
    await serve_shot("aborted_500", out / "serve_aborted_500.png")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "screenshots"))
