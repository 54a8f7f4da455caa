"""core/stamps.py: a run's times from what it records (log-line stamps, Hydra dirs, metadata)."""

from __future__ import annotations

import calendar
import shutil
import time
from pathlib import Path

import pytest

from gymwatch.core import stamps
from gymwatch.core.layout import discover
from gymwatch.core.session import read_run

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def utc_epoch(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S")))


@pytest.mark.parametrize("line, expect", [
    ("2026-12-01 06:36:06,330\tINFO worker.py:1821 -- Started a local Ray instance.", "2026-12-01 06:36:06"),
    ("[2026-12-01 06:31:30,423][nemo_gym.global_config][INFO] - hello", "2026-12-01 06:31:30"),
    ("[2026-11-29 13:30:45,905 W 30925 30925] rpc_client.h:203", "2026-11-29 13:30:45"),
])
def test_line_stamps_of_ray_and_gym_lines(line, expect):
    assert int(stamps.line_stamp(line)) == utc_epoch(expect)


@pytest.mark.parametrize("line", ["INFO:     Started server process [9564]", "2026 was a year", "[12/01] x",
                                  "2026-13-01 06:36:06 month 13", ""])
def test_lines_without_a_stamp(line):
    assert stamps.line_stamp(line) is None


def test_a_zone_makes_a_stamp_exact():
    assert stamps.iso_stamp("2026-11-29T10:23:52Z") == utc_epoch("2026-11-29 10:23:52")
    assert stamps.iso_stamp("2026-11-29T12:23:52+02:00") == utc_epoch("2026-11-29 10:23:52")
    assert stamps.iso_stamp(True) is None and stamps.iso_stamp(12) is None      # not an epoch


def test_hydra_dir_names():
    assert stamps.hydra_dir_stamp("/x/outputs/2026-12-01/06-31-30") == utc_epoch("2026-12-01 06:31:30")
    assert stamps.hydra_dir_stamp("/x/hydra/env_start") is None


def test_the_reducer_keeps_the_first_and_last_stamped_line():
    st = read_run(str(FIXTURES / "gym-0.7.0-cases" / "g07_mixed_ok"), check_processes=False).state
    assert st.first_stamp is not None and st.last_stamp is not None and st.first_stamp < st.last_stamp


def test_an_evaluator_bundle_records_its_own_start_and_duration():
    lay = discover(str(FIXTURES / "gym-0.4.0-cases" / "evaluator_bundle"))
    st = read_run(str(lay.root), check_processes=False).state
    t = stamps.run_times(st, lay, (), [time.time()] * 5)
    assert t.started == pytest.approx(utc_epoch("2026-11-29 10:23:52") + 0.398383)
    assert t.duration == pytest.approx(41.525821) and t.started_from == "evaluator metadata"


def test_file_times_only_as_the_last_resort_and_never_a_copys(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "rollouts.jsonl").write_text("")
    (run / "rollouts_failures.jsonl").write_text("")
    lay = discover(str(run))
    st = read_run(str(run), check_processes=False).state
    spread = [1_780_000_000.0, 1_780_000_100.0, 1_780_000_200.0]
    t = stamps.run_times(st, lay, (), spread)
    assert (t.started, t.ended, t.started_from) == (spread[0], spread[-1], "file times")
    copy = [1_780_000_000.0, 1_780_000_000.5, 1_780_000_001.0]       # cp -r: all written at once
    t = stamps.run_times(st, lay, (), copy)
    assert t.started is None and t.duration is None


def test_responses_that_precede_the_logs_mean_the_zone_is_wrong(tmp_path, monkeypatch):
    """Log stamps read in the wrong zone: a model answered hours before Gym's first line."""
    src = FIXTURES / "gym-0.7.0-cases" / "g07_mixed_ok"
    run = tmp_path / "r"
    shutil.copytree(src, run)
    lay = discover(str(run))
    st = read_run(str(run), check_processes=False).state
    first, _ = stamps.rows_span(lay.rollouts)
    if first is None:
        pytest.skip("no response times in this fixture")
    st.first_stamp, st.last_stamp = first + 6 * 3600, first + 6 * 3600 + 60
    t = stamps.run_times(st, lay, (), [])
    assert t.started_from != "log lines"


def _row(created: float, pad: int = 0) -> bytes:
    return (b'{"responses_create_params":{"input":"' + b"x" * pad + b'"},"response":{"id":"r","created_at":'
            + str(created).encode() + b',"output":[]},"reward":1.0}')


@pytest.mark.parametrize("pads, end", [
    ([0], b"\n"), ([0, 0, 0], b"\n"), ([0, 0], b""),                  # small; no newline at the end
    ([100_000, 10, 100_000], b"\n"),                                  # rows longer than a first read
    ([5_000_000, 10], b"\n"), ([10, 5_000_000], b"\r\n"), ([10, 5_000_000, 10], b"\n"),   # over 4 MB
])
def test_rows_span_is_the_first_and_last_rows_response_times(tmp_path, pads, end):
    times = [1_780_000_000.0 + 60 * i for i in range(len(pads))]
    p = tmp_path / "rollouts.jsonl"
    p.write_bytes(b"\n".join(_row(t, pad) for t, pad in zip(times, pads, strict=True)) + end)
    first, last = stamps.rows_span(p)
    # rows are looked at in their first and last 4 MB: a first row longer has no response time
    # (its `response` comes after the inputs), a last row has it at its end
    assert first == (times[0] if pads[0] < 4_000_000 else None)
    assert last == times[-1]
    assert stamps.rows_span(None) == (None, None)
    p.write_bytes(b"")
    assert stamps.rows_span(p) == (None, None)


def test_scan_file_takes_the_first_and_last_stamps_from_the_ends_of_a_big_file(tmp_path):
    p = tmp_path / "gym_env_start.stdout.log"
    middle = b"".join(b"2026-11-29 10:%02d:00,000\tINFO middle\n" % (m % 60) for m in range(5000))
    p.write_bytes(b"no stamp\n2026-11-29 09:00:00,000\tINFO first\n" + middle + b"2026-11-29 11:00:00,000\tINFO last\nno stamp\n")
    first, last = stamps.scan_file(p)
    assert (first, last) == (utc_epoch("2026-11-29 09:00:00"), utc_epoch("2026-11-29 11:00:00"))
    assert stamps.scan_file(tmp_path / "missing") == (None, None)
