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


# A submission of two benchmarks 61 s in: one job running, one queued for resources (fake Slurm on
# PATH answering as the real one did then, over the recorded files as they were).
@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_submission_one_queued_one_running(snap_compare, tmp_path: Path, monkeypatch, size):
    from fakeslurm import FakeSlurm
    from tuihelpers import pending_running_app, submission_shown

    app = pending_running_app(tmp_path / "runs", FakeSlurm(tmp_path, monkeypatch))
    assert snap_compare(app, terminal_size=size, run_before=submission_shown)
