"""The stall recordings (tests/fixtures/gym-0.7.0-stalls, real Gym 0.7.0): replayed over their own
timelines, they are what their README says at each moment, and end as recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES
from gymwatch.core.model import T_COMPLETED
from gymwatch.core.session import read_run
from gymwatch.core.verdict import verdict
from gymwatch.replay import Replayer, run_files

STALLS = FIXTURES / "gym-0.7.0-stalls"

# (case, [(t, rows completed by then)], final verdict, completed at the end, calls held, calls released)
CASES = [
    ("g070_endpoint_silent_for_good", [(27.0, 0), (27.3, 2), (29.1, 3), (262.0, 3), (390.0, 3)], "incomplete", 3, 2, 0),
    ("g070_endpoint_silent_75s", [(82.6, 3), (157.0, 3), (157.3, 4), (162.1, 10)], "ok", 10, 2, 2),
    ("g070_slow_steady", [(78.7, 0), (78.8, 1), (107.3, 4), (161.7, 6), (171.1, 8)], "ok", 8, 0, 0),
]


def completed(root: Path) -> int:
    state = read_run(str(root), check_processes=False).state
    return sum(1 for t in state.trials.values() if t.status == T_COMPLETED)


@pytest.mark.parametrize("case, moments, final, done, held, released", CASES, ids=[c[0] for c in CASES])
def test_replayed_stall_grows_as_recorded(tmp_path, case, moments, final, done, held, released):
    src, dst = STALLS / case, tmp_path / case
    rp = Replayer(src, dst)
    for t, rows in moments:
        rp.step_to(t)
        assert completed(dst) == rows, f"t={t}"
    rp.step_to(rp.end)
    for rel in run_files(src):
        assert (dst / rel).read_bytes() == (src / rel).read_bytes(), rel
    state = read_run(str(dst), check_processes=False).state
    assert verdict(state).name == final and completed(dst) == done
    stub = (src / "_stub" / "stub_requests.log").read_text().splitlines()
    assert sum(" HELD #" in x for x in stub) == held and sum(" RELEASED #" in x for x in stub) == released


def test_nothing_is_written_while_the_endpoint_is_silent():
    """Between the last row and Ctrl-C only the collector's progress bar moves (a tqdm redraw)."""
    import json

    steps = [json.loads(x) for x in (STALLS / "g070_endpoint_silent_for_good" / "timeline.jsonl").read_text().splitlines()]
    quiet = [s["file"] for s in steps if 29.1 < s["t"] < 262.2]
    assert quiet == ["gym_eval_run.stderr.log"]
