#!/usr/bin/env python3
"""Write screenshots/*.svg of the live screen from the recorded runs in tests/fixtures.

    .venv/bin/python scripts/make_screenshots.py [OUT_DIR]

Same states as the snapshot tests (fixed clock), plus the aborted and ok runs.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from gymwatch.core import session as core_session  # noqa: E402
from gymwatch.tui.testing import (  # noqa: E402
    FakeClock, fixture_app, make_app, staged_live, view_settled, wait_for,
)

SIZE = (140, 42)
COLD_START = [3.3, 9.4, 10.4, 12.4, 20.0, 24.2, 24.5, 25.5, 26.2]
COLLECTING = COLD_START + [30.2, 33.0, 36.0, 37.0, 38.0, 39.0, 40.0]


async def shoot(app, out: Path, keys: tuple[str, ...] = ()) -> None:
    async with app.run_test(size=SIZE) as pilot:
        view = app.pane.view
        settled = lambda: app.started and view_settled(app) and (  # noqa: E731
            not view.follow or view.scroll_y >= view.max_scroll_y)
        await wait_for(pilot, settled)
        for key in keys:
            await pilot.press(key)
            await wait_for(pilot, settled)
        app.save_screenshot(filename=out.name, path=str(out.parent))
    print(out)


def staged(case: str, times: list[float], tmp: Path, stuck: float = 0.0):
    clock = FakeClock()
    live, _ = staged_live(case, tmp / case, times, clock)
    clock.t += stuck
    return make_app(live, clock)


async def main(out: Path) -> None:
    core_session.SHAPE_CHECK_EVERY = 0.0   # staged replays poll faster than real time
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        await shoot(staged("live_timeline", COLD_START, t / "a", stuck=300), out / "cold_start_stuck.svg")
        await shoot(staged("live_timeline", COLLECTING, t / "b"), out / "collecting.svg")
    await shoot(fixture_app("some_never_ran"), out / "some_never_ran.svg", ("right_square_bracket",))
    await shoot(fixture_app("startup_failed"), out / "startup_failed.svg")
    await shoot(fixture_app("aborted_500"), out / "aborted_500.svg")
    await shoot(fixture_app("mixed_ok"), out / "mixed_ok.svg")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "screenshots"))
