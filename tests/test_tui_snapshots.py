"""SVG snapshots of the screen at four moments of real recorded runs (fixed clock, no wall time).

Re-baseline on purpose only: `pytest tests/test_tui_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tuihelpers import fixture_app, make_app, settled, staged_live

SIZE = (120, 40)
COLD_START = [3.3, 9.4, 10.4, 12.4, 20.0, 24.2, 24.5, 25.5, 26.2]
COLLECTING = COLD_START + [30.2, 33.0, 36.0, 37.0, 38.0, 39.0, 40.0]
STUCK_FOR = 300.0     # seconds mcqa keeps installing after its siblings became ready


pytestmark = pytest.mark.usefixtures("shape_check_every_poll")


def test_cold_start_one_server_stuck_installing(snap_compare, tmp_path: Path, clock):
    live, _ = staged_live("live_timeline", tmp_path / "live_timeline", COLD_START, clock)
    clock.t += STUCK_FOR
    assert snap_compare(make_app(live, clock), terminal_size=SIZE, run_before=settled)


def test_collecting(snap_compare, tmp_path: Path, clock):
    live, _ = staged_live("live_timeline", tmp_path / "live_timeline", COLLECTING, clock)
    assert snap_compare(make_app(live, clock), terminal_size=SIZE, run_before=settled)


def test_finished_with_never_ran_trials(snap_compare):
    async def first_failure(pilot):
        await settled(pilot)
        await pilot.press("right_square_bracket")
        await settled(pilot)

    assert snap_compare(fixture_app("some_never_ran"), terminal_size=SIZE, run_before=first_failure)


def test_startup_failed(snap_compare):
    assert snap_compare(fixture_app("startup_failed"), terminal_size=SIZE, run_before=settled)
