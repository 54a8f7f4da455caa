"""gymwatch replay: recorded timelines re-written over time; synthesized ones for runs without."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CASES
from gymwatch.cli import main
from gymwatch.core.layout import REPLAY_MARKER
from gymwatch.replay import Replayer, ReplayError, load_timeline, run_files, synthesize


def same_tree(src: Path, dst: Path) -> None:
    for rel in run_files(src):
        assert (dst / rel).read_bytes() == (src / rel).read_bytes(), rel


def test_timeline_replay_ends_with_the_recorded_files(tmp_path: Path):
    rp = Replayer(CASES / "live_timeline", tmp_path / "out")
    assert rp.steps and rp.steps[0].t <= rp.steps[-1].t
    rp.step_to(10.0)
    assert (tmp_path / "out" / "gym_env_start.stdout.log").exists()
    assert not (tmp_path / "out" / "rollouts.jsonl").exists()          # files appear late
    rp.step_to(rp.end)
    assert rp.done
    same_tree(CASES / "live_timeline", tmp_path / "out")
    assert (tmp_path / "out" / REPLAY_MARKER).is_file()


def test_refuses_a_destination_with_files(tmp_path: Path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("keep me")
    with pytest.raises(ReplayError):
        Replayer(CASES / "mixed_ok", tmp_path / "busy")
    assert main(["replay", str(CASES / "mixed_ok"), str(tmp_path / "busy")]) == 3
    assert (tmp_path / "busy" / "x").read_text() == "keep me"


def test_synthesized_timeline_appends_rows_with_partial_lines(tmp_path: Path):
    src = CASES / "evaluator_bundle"
    steps = synthesize(src)
    assert steps == load_timeline(src)                     # no timeline.jsonl there
    rollouts = [s for s in steps if s.file == "gym_run/rollouts.jsonl"]
    data = (src / rollouts[0].file).read_bytes()
    partial = [s for s in rollouts if 0 < s.size < len(data) and data[s.size - 1:s.size] != b"\n"]
    assert partial, "some steps end mid-line"
    logs = [s.t for s in steps if s.file.endswith(".log")]
    assert min(logs) < min(s.t for s in rollouts if s.size)   # logs first
    rp = Replayer(src, tmp_path / "b", steps)
    rp.step_to(rp.end)
    same_tree(src, tmp_path / "b")


def test_cli_replay_runs_to_the_end(tmp_path: Path):
    assert main(["replay", str(CASES / "startup_failed"), str(tmp_path / "r"), "--speed", "1000"]) == 0
    same_tree(CASES / "startup_failed", tmp_path / "r")


def test_a_replay_says_its_speed_in_what_it_writes(tmp_path: Path):
    """The screen reads it to show the run's own time (at 5x, 60 s of Gym's limit pass in 12 s)."""
    import json

    assert main(["replay", str(CASES / "startup_failed"), str(tmp_path / "r"), "--speed", "5", "--until", "0"]) == 0
    marker = json.loads((tmp_path / "r" / REPLAY_MARKER).read_text())
    assert marker["speed"] == 5.0 and marker["src"] == str(CASES / "startup_failed")
    Replayer(CASES / "mixed_ok", tmp_path / "one")                       # stepped by hand: the run's pace
    assert json.loads((tmp_path / "one" / REPLAY_MARKER).read_text())["speed"] == 1.0
