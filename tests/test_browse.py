"""`gymwatch browse`: the walk, summaries (same verdicts as the report), the cache, the CLI, the screen."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import record_made
from gymwatch.browse import runs as runs_mod
from gymwatch.browse import summary as summary_mod
from gymwatch.browse.cache import SummaryCache, cache_dir
from gymwatch.browse.runs import list_runs
from gymwatch.browse.scan import find_runs, signature, walk
from gymwatch.browse.workers import WorkerPool
from gymwatch.browse.screen import BrowseApp, BrowseScreen, BrowseState, RunDetail
from gymwatch.cli import main
from gymwatch.core.session import read_run
from gymwatch.core.verdict import counts, mean_reward, verdict

FIXTURES = Path(__file__).parent / "fixtures"
CASES = FIXTURES / "gym-0.4.0-cases"
CASE_NAMES = ("aborted_500", "evaluator_bundle", "mixed_ok", "some_never_ran", "startup_failed")
T0 = 1_780_000_000      # a fixed clock for file times (2026-05-28 20:26:40 UTC)


@pytest.fixture(autouse=True)
def user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield tmp_path / "xdg-cache"
    monkeypatch.undo()
    time.tzset()


def make_tree(root: Path) -> Path:
    """Fixture runs in an experiments tree with noise the walk must skip; fixed file times."""
    for i, name in enumerate(CASE_NAMES):
        shutil.copytree(CASES / name, root / f"exp{i % 2}" / name, ignore=shutil.ignore_patterns("timeline.jsonl"))
    shutil.copytree(CASES / "mixed_ok", root / ".venv" / "lib" / "mixed_ok")       # hidden, a venv
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    shutil.copytree(CASES / "mixed_ok", root / "node_modules" / "x")
    (root / "exp0" / "__pycache__").mkdir()
    (root / "exp0" / "notes").mkdir()
    (root / "exp0" / "notes" / "readme.txt").write_text("not a run\n")
    os.symlink(root, root / "exp1" / "loop")                                      # a symlink loop
    for k, p in enumerate(sorted(root.rglob("*"))):
        if p.is_file() and not p.is_symlink():
            os.utime(p, (T0 + k, T0 + k))
    return root


def tree_state(root: Path) -> dict:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if not p.is_symlink()}


def test_walk_finds_runs_and_skips_noise(tmp_path):
    root = make_tree(tmp_path / "runs")
    found = sorted(f.path.relative_to(root).as_posix() for f in walk([root]))
    assert found == sorted(f"exp{i % 2}/{n}" for i, n in enumerate(CASE_NAMES))


def test_walk_over_all_fixtures():
    names = {f.path.name for f, _ in find_runs([FIXTURES])}
    assert set(CASE_NAMES) | {"live_timeline"} <= names
    assert "gym_run" not in names and "logs" not in names          # never descends into a run


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if p.is_dir()))
def test_summary_agrees_with_report(case):
    (found, layout), = list(find_runs([CASES / case]))
    s = summary_mod.summarize(found.path, layout, signature(found))
    state = read_run(str(CASES / case), check_processes=False).state
    assert s["verdict"] == verdict(state).name
    assert s["trials"] == counts(state)
    assert s["mean_reward"] == mean_reward(state)
    if s["servers"] is None:             # servers only in a merged log that was not needed
        assert not s["logs_read"] and layout.logs_dir is None
    else:
        assert s["servers"] == len(state.servers)
    assert s["environment"] == (state.info.environment or None)
    assert s["agent"] == (state.info.agent or None)


def test_big_logs_are_sampled_head_and_tail(tmp_path, monkeypatch):
    run = tmp_path / "startup_failed"
    shutil.copytree(CASES / "startup_failed", run)
    monkeypatch.setattr(summary_mod, "HEAD", 512)
    monkeypatch.setattr(summary_mod, "TAIL", 1024)
    (found, layout), = list(find_runs([run]))
    s = summary_mod.summarize(found.path, layout, signature(found))
    assert s["sampled"] and s["verdict"] == "startup_failed"


def test_cache_hits_misses_and_never_writes_into_runs(tmp_path, user_cache):
    root = make_tree(tmp_path / "runs")
    before = tree_state(root)
    cache = SummaryCache()
    assert cache.path.parent == cache_dir() == user_cache / "gymwatch"
    first = list_runs([root], cache)
    assert (cache.hits, cache.misses) == (0, len(CASE_NAMES))
    again = SummaryCache()
    assert list_runs([root], again) == first and (again.hits, again.misses) == (len(CASE_NAMES), 0)
    assert tree_state(root) == before                                  # nothing written into a run
    rollouts = root / "exp0" / "mixed_ok" / "rollouts.jsonl"
    with rollouts.open("a") as fh:
        fh.write("not json\n")
    third = SummaryCache()
    list_runs([root], third)
    assert (third.hits, third.misses) == (len(CASE_NAMES) - 1, 1)


@pytest.fixture
def pools(monkeypatch):
    """Pool even a few runs, and record every pool made."""
    monkeypatch.setattr(runs_mod, "POOL_MIN_RUNS", 2)
    return record_made(monkeypatch, runs_mod, "WorkerPool")


def test_a_pool_lists_the_same_runs_in_the_same_order(tmp_path, pools):
    root = make_tree(tmp_path / "runs")
    alone = list_runs([root], SummaryCache(enabled=False), jobs=1)
    assert not pools
    streamed = []
    pooled = list_runs([root], SummaryCache(enabled=False), on_run=streamed.append, jobs=2)
    assert len(pools) == 1 and pooled == alone == streamed and len(alone) == len(CASE_NAMES)


def test_a_dead_worker_is_made_up_for_in_process(tmp_path, pools, monkeypatch):
    root = make_tree(tmp_path / "runs")
    alone = list_runs([root], SummaryCache(enabled=False), jobs=1)
    real_map = WorkerPool.map

    def map_after_a_death(self, items):
        self.procs[1].kill()
        self.procs[1].wait()
        return real_map(self, items)
    monkeypatch.setattr(WorkerPool, "map", map_after_a_death)
    assert list_runs([root], SummaryCache(enabled=False), jobs=2) == alone
    assert pools[0].procs[1].returncode == -9


def test_workers_work_without_a_real_stderr(tmp_path, pools, monkeypatch):
    """Inside a Textual app sys.stderr is a capture whose fileno() is -1."""
    class Captured:
        def fileno(self):
            return -1

        def write(self, text):
            return len(text)

        def flush(self):
            pass
    root = make_tree(tmp_path / "runs")
    monkeypatch.setattr("sys.stderr", Captured())
    monkeypatch.setattr("sys.stdout", Captured())
    assert len(list_runs([root], SummaryCache(enabled=False), jobs=2)) == len(CASE_NAMES) and pools


def test_no_cache_writes_nothing(tmp_path, user_cache):
    root = make_tree(tmp_path / "runs")
    assert main(["browse", str(root), "--format", "json", "--no-cache"]) == 0
    assert not user_cache.exists()


def test_cli_json_over_generated_tree(tmp_path, capsys):
    root = make_tree(tmp_path / "runs")
    assert main(["browse", str(root), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by = {Path(r["path"]).name: r for r in doc["runs"]}
    assert set(by) == set(CASE_NAMES) and doc["roots"] == [str(root)]
    assert by["aborted_500"]["verdict"] == "collection_aborted"
    assert by["aborted_500"]["trials"]["missing"] == 6 and by["aborted_500"]["trials"]["completed"] == 4
    assert by["some_never_ran"]["trials"]["never_ran"] == 4
    assert by["startup_failed"]["servers_failed"] == 1
    assert by["mixed_ok"]["mean_reward"] == 0.5 and by["mixed_ok"]["environment"] == "mcqa"
    starts = [r["started"] for r in doc["runs"]]
    assert starts == sorted(starts, reverse=True)                     # newest first


def test_cli_text_over_fixtures(capsys, monkeypatch):
    monkeypatch.chdir(FIXTURES)
    assert main(["browse", "--format", "text"]) == 0                  # default root: cwd
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["started", "environment"]
    row = next(line for line in lines if line.endswith("gym-0.4.0-cases/some_never_ran"))
    assert "some_never_ran" in row and " 0.833 " in row
    assert lines[-1].startswith(f"{len(lines) - 2} runs")


def test_cli_rejects_a_missing_root(tmp_path, capsys):
    assert main(["browse", str(tmp_path / "nope"), "--format", "text"]) == 3
    assert "not a directory" in capsys.readouterr().err


async def wait_scanned(pilot, app):
    for _ in range(250):
        if isinstance(app.screen, BrowseScreen) and app.screen.st.scanned:
            return
        await pilot.pause(0.02)
    raise AssertionError("scan did not finish")


async def test_browser_sort_filter_open(tmp_path, monkeypatch):
    root = make_tree(tmp_path / "runs")
    app = BrowseApp(BrowseState([str(root)]))
    async with app.run_test(size=(150, 20)) as pilot:
        await wait_scanned(pilot, app)
        screen = app.screen
        assert screen.table.row_count == len(CASE_NAMES)
        await pilot.press("s")                                          # sort by name
        assert screen.st.sort == "name"
        await pilot.press("v")                                          # first verdict present
        assert screen.st.verdict == "startup_failed" and screen.table.row_count == 1
        await pilot.press("escape")
        assert screen.st.verdict is None and screen.table.row_count == len(CASE_NAMES)
        await pilot.press("slash", *"never", "enter")
        assert screen.table.row_count == 1 and screen.shown[0]["verdict"] == "some_never_ran"
        monkeypatch.setattr("gymwatch.browse.screen.live_app_available", lambda: False)
        await pilot.press("enter")                                      # no live app: the detail screen
        await pilot.pause()
        assert isinstance(app.screen, RunDetail)
        await pilot.press("escape")
        assert app.screen is screen
        monkeypatch.setattr("gymwatch.browse.screen.live_app_available", lambda: True)
        await pilot.press("enter")                                      # the live app: exit with the path
        await pilot.pause()
    assert app.return_value == str(root / "exp1" / "some_never_ran")
    assert app.st.cursor_path == app.return_value                      # the list comes back there


async def test_detail_screen_shows_report_and_logs(tmp_path):
    root = make_tree(tmp_path / "runs")
    app = BrowseApp(BrowseState([str(root)]))
    async with app.run_test(size=(150, 30)) as pilot:
        await wait_scanned(pilot, app)
        await pilot.press("slash", *"aborted", "enter", "d")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, RunDetail)
        from gymwatch.tui.logview import LogView
        view = detail.query_one(LogView)
        assert view.logs is not None and len(view.logs.labels) >= 3
        assert "policy_model" in view.logs.labels


def test_snapshot_browser(snap_compare, tmp_path, monkeypatch):
    make_tree(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)         # a relative root: no temp path on screen
    app = BrowseApp(BrowseState(["runs"]))

    async def run_before(pilot):
        await wait_scanned(pilot, app)
        await pilot.press("s")          # by name: a stable order

    assert snap_compare(app, terminal_size=(150, 14), run_before=run_before)


def test_run_browser_loops_through_the_live_app(tmp_path, monkeypatch):
    from gymwatch.browse import screen as screen_mod
    from gymwatch.tui import app as app_mod

    picks = iter([str(tmp_path / "a-run"), None])
    opened = []
    monkeypatch.setattr(screen_mod.BrowseApp, "run", lambda self: next(picks))

    class FakeLive:
        def __init__(self, path):
            opened.append(path)

        def run(self):
            return None

    monkeypatch.setattr(app_mod, "GymwatchApp", FakeLive)
    assert screen_mod.run_browser([str(tmp_path)]) == 0
    assert opened == [str(tmp_path / "a-run")]


def test_a_stopped_listing_returns_what_it_has_and_caches_it(tmp_path, user_cache):
    root = make_tree(tmp_path / "runs")
    seen = []
    part = list_runs([root], SummaryCache(), on_run=seen.append, stop=lambda: len(seen) >= 2, jobs=1)
    assert part == seen and len(part) == 2
    again = SummaryCache()
    list_runs([root], again, jobs=1)
    assert (again.hits, again.misses) == (2, len(CASE_NAMES) - 2)
