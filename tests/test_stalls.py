"""Stalls on the recorded real Gym 0.7.0 runs (tests/fixtures/gym-0.7.0-stalls, their README says
what happened when), replayed live on a fake clock: an endpoint silent for good, one silent for
75 s, a slow steady run. The flag appears, clears and never appears as the rule says (core/pace.py);
the live screen shows it and rings; `gymwatch report` on a live or killed run carries it, judged
from the files alone."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, json_report
from gymwatch.core import pace
from gymwatch.core.model import STALL_ENDED, STALL_RECOVERED, ongoing_stall
from gymwatch.core.verdict import verdict
from gymwatch.replay import Replayer, load_timeline
from gymwatch.tui.live import LiveRun
from gymwatch.tui.notify import StageNotifier
from test_tui_app import summary_plain
from tuihelpers import EPOCH, FakeClock, make_app, staged_live, wait_for

STALLS = FIXTURES / "gym-0.7.0-stalls"
FOR_GOOD = STALLS / "g070_endpoint_silent_for_good"
FOR_75S = STALLS / "g070_endpoint_silent_75s"
SLOW = STALLS / "g070_slow_steady"
SIZE = (120, 40)

pytestmark = pytest.mark.usefixtures("shape_check_every_poll")


def poll_times(case: Path, every: float = 1.0) -> list[float]:
    """Each recorded change's own time, and a poll every `every` seconds between: results are seen
    when they were written."""
    steps = sorted({s.t for s in load_timeline(case)})
    grid = [i * every for i in range(int(steps[-1] / every) + 2)]
    return sorted(set(steps) | set(grid))


def watch(case: Path, tmp: Path) -> list[tuple[float, str, bool, list]]:
    """The run replayed and polled at each of `poll_times` (no process to be seen: its files alone):
    (t, verdict, stalled now, the stalls kept) at each poll."""
    clock = FakeClock()
    rp = Replayer(case, tmp / case.name)
    live = None
    seen = []
    for t in poll_times(case):
        rp.step_to(t)
        clock.t = EPOCH + t
        if live is None:
            live = LiveRun(str(tmp / case.name), clock=clock, check_processes=False)
        live.poll()
        if live.state is not None:
            st = live.state
            seen.append((t, verdict(st).name, ongoing_stall(st) is not None, list(st.stalls)))
    return seen


def test_an_endpoint_silent_for_75s_stalls_a_minute_after_its_last_row_and_recovers(tmp_path):
    seen = watch(FOR_75S, tmp_path)
    stalled = [t for t, _, now, _ in seen if now]
    # rows at 80.8 and 82.5 (about 2 s apart), then none until 157.3: a minute of silence is a stall
    assert stalled[0] > 82.5 + pace.FLOOR and not any(now for t, _, now, _ in seen if t <= 82.5 + pace.FLOOR)
    assert stalled[-1] < 157.3 and all(82.5 + pace.FLOOR < t < 157.3 for t in stalled)
    t, name, now, stalls = seen[-1]
    assert name == "ok" and not now
    (stall,) = stalls
    assert stall.how == STALL_RECOVERED and stall.since == EPOCH + 82.5 and stall.end == EPOCH + 157.275
    assert stall.in_flight == 2 and stall.scale is not None and stall.scale < 2.0 and not stall.files
    assert pace.note(stall) == f"stalled 1m15s at {pace.clock(EPOCH + 82.5, seconds=False)}, recovered"
    assert [w.name for w in stall.waits][:2] == ["policy_model", "mcqa_simple_agent"]


def test_an_endpoint_silent_for_good_stays_stalled_until_the_collection_ends(tmp_path):
    seen = watch(FOR_GOOD, tmp_path)
    stalled = [t for t, _, now, _ in seen if now]
    assert stalled[0] > 29.0 + pace.FLOOR and stalled[0] <= 29.0 + pace.FLOOR + 1
    # the tqdm redraw at 95.8, Ctrl-C (262.2) and SIGTERM (322.2) to the collector print nothing:
    # with no process to be seen, only gym env start stopping its servers (from 325.3) ends it
    end = next(t for t, name, _, _ in seen if t > stalled[0] and name != "collecting")
    assert end > 325.3 and all(now for t, _, now, _ in seen if stalled[0] <= t < end)
    t, name, now, stalls = seen[-1]
    assert name == "incomplete" and not now
    (stall,) = stalls
    assert stall.how == STALL_ENDED and stall.end is None and stall.since == EPOCH + 29.001
    assert stall.until == EPOCH + end and pace.note(stall).endswith("then the collection ended")


def test_a_slow_steady_run_is_never_stalled(tmp_path):
    """Every call answered after 20-40 s, two at a time: up to 35.5 s between rows."""
    seen = watch(SLOW, tmp_path)
    assert not any(now for _, _, now, _ in seen) and not seen[-1][3]
    assert seen[-1][1] == "ok"


# --- the live screen --------------------------------------------------------------------------
async def screen(case: Path, tmp: Path, until: float, check=None) -> tuple[list[str], list, list[str]]:
    """The live screen on `case` replayed to `until`, one refresh a recorded second: the summary
    at each (and `check(t, summary)`), the notifications fired, what was written to the terminal."""
    clock = FakeClock()
    live, rp = staged_live(case, tmp / case.name, [1.0], clock)
    app = make_app(live, clock)
    out: list[str] = []
    app.notifier = StageNotifier(app, enabled=True, emit=out.append)
    summaries = []
    async with app.run_test(size=SIZE) as pilot:
        assert await wait_for(pilot, lambda: app.started)
        for t in poll_times(case):
            if t <= 1.0 or t > until:
                continue
            rp.step_to(t)
            clock.t = EPOCH + t
            app.refresh_run()
            await pilot.pause(0)
            summaries.append((t, summary_plain(app)))
            if check is not None:
                check(t, summaries[-1][1])
        fired = list(app.notifier.fired)
    return summaries, fired, out


async def test_the_screen_says_stalled_then_recovered_and_rings_each_time(tmp_path):
    summaries, fired, out = await screen(FOR_75S, tmp_path, 160.0)
    flagged = [t for t, s in summaries if "‖ STALLED" in s]
    assert flagged and flagged[0] > 82.5 + pace.FLOOR and flagged[-1] < 157.3
    at = dict(summaries)
    during = at[flagged[-1]]
    assert "COLLECTING" not in during and "stalled: no result for" in during and "2 trials in flight" in during
    assert "waiting on policy_model (last line" in during
    after = at[160.0]
    assert "COLLECTING" in after and "STALLED" not in after
    assert f"stalled 1m15s at {pace.clock(EPOCH + 82.5, seconds=False)}, recovered" in after
    stages = [e for e in fired if e.stage in ("stalled", "recovered")]
    assert [e.stage for e in stages] == ["stalled", "recovered"] and stages[0].bad and not stages[1].bad
    assert stages[1].text == f"results again: stalled 1m15s at {pace.clock(EPOCH + 82.5, seconds=False)}, recovered"
    rung = [o for o in out if "stalled: no result for" in o]
    assert len(rung) == 1 and rung[0].startswith("\a\x1b]9;gymwatch g070_endpoint_silent_75s: stalled: no result for")


async def test_the_screen_never_says_stalled_on_a_slow_steady_run(tmp_path):
    def never(t, summary):
        assert "STALLED" not in summary and "stalled" not in summary, t
    summaries, fired, _ = await screen(SLOW, tmp_path, 172.0, never)
    assert "OK" in summaries[-1][1] and [e.stage for e in fired] == ["all_ready", "finished"]


# --- gymwatch report: from the files alone ---------------------------------------------------------
def replayed_as_of(case: Path, dst: Path, t: float) -> float:
    """`case` replayed to its recorded second `t`, each file last written when the recording wrote
    it, now being `t`: a run on a shared filesystem seen from another machine. The wall time of `t`."""
    Replayer(case, dst).step_to(t)
    now = time.time()
    last: dict[str, float] = {}
    for step in load_timeline(case):
        if step.t <= t:
            last[step.file] = step.t
    for rel, when in last.items():
        if (dst / rel).exists():
            os.utime(dst / rel, (now - (t - when), now - (t - when)))
    return now - t


def test_report_on_a_live_stalled_run_carries_the_stall(tmp_path):
    t0 = replayed_as_of(FOR_GOOD, tmp_path / "run", 200.0)
    data, code = json_report(tmp_path / "run")
    assert data["verdict"] == "collecting" and code == 0 and data["reason"].startswith("stalled: no result for 2m")
    (stall,) = data["stalls"]
    assert stall["ongoing"] and stall["outcome"] == "ongoing" and stall["end"] is None
    assert stall["judged_by"] == "files" and stall["trials_in_flight"] == 2
    assert abs(stall["start"] - (t0 + 29.001)) < 0.01 and 170 <= stall["seconds"] <= 172
    servers = {s["name"]: s for s in stall["servers"]}
    assert servers["policy_model"]["kind"] == "model" and servers["policy_model"]["evidence"]["file"] == "logs/policy_model.log"
    assert servers["policy_model"]["last_line"].startswith("INFO:     Uvicorn running on")
    assert servers["policy_model"]["age_seconds"] > 120


def test_report_on_a_killed_run_carries_the_stall_it_ended_in(tmp_path):
    t0 = replayed_as_of(FOR_GOOD, tmp_path / "run", 400.0)
    data, code = json_report(tmp_path / "run")
    assert data["verdict"] == "incomplete" and code == 1
    (stall,) = data["stalls"]
    # from the last row (29.0) to the collector's own last write (its tqdm redraw at 95.8): at least
    assert not stall["ongoing"] and stall["outcome"] == "ended" and stall["end"] is None
    assert abs(stall["start"] - (t0 + 29.001)) < 0.01 and abs(stall["seconds"] - (95.751 - 29.001)) < 0.01
    assert stall["trials_in_flight"] == 2 and stall["servers"] == []      # they shut down since
    text = _report_text(tmp_path / "run", "text")
    assert f"stalled at least 1m07s at {pace.clock(t0 + 29.001, seconds=False)}, then the collection ended; " \
           "2 trials in flight" in text
    assert "then the collection ended" in _report_text(tmp_path / "run", "md")


def test_report_on_a_run_that_recovered_or_kept_pace_has_no_stall(tmp_path):
    replayed_as_of(FOR_75S, tmp_path / "a", 170.0)
    replayed_as_of(SLOW, tmp_path / "b", 160.0)
    for run in ("a", "b"):
        data, _ = json_report(tmp_path / run)
        assert data["stalls"] == [], run


def _report_text(run: Path, fmt: str) -> str:
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "gymwatch", "report", str(run), "--format", fmt, "--no-process-check"],
                          capture_output=True, text=True, timeout=120).stdout
