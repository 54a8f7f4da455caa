"""`gymwatch browse` lists `gym eval submit` submissions: found under the roots (a dir holding
gym-job.json, not walked into) and in Gym's local index (`$XDG_CACHE_HOME/nemo-gym/jobs/`), each
once, a line each with each benchmark's state, from their files alone (Slurm not asked); opening
one in the list opens the submission's screen."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakeslurm import FakeSlurm
from gymwatch.browse.cache import SummaryCache
from gymwatch.browse.fmt import benchmarks_text
from gymwatch.browse.runs import list_runs
from gymwatch.browse.screen import BrowseApp, BrowseState, RunDetail
from submissions import CASES, copy, run_dir

GYM_RUN = Path(__file__).parent / "fixtures" / "gym-0.4.0-cases" / "startup_failed"


@pytest.fixture(autouse=True)
def user_cache(tmp_path, monkeypatch):
    """gymwatch's cache and Gym's index under the test's own dir (none of this machine's)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield tmp_path / "xdg-cache"
    monkeypatch.undo()
    time.tzset()


def tree(tmp_path: Path) -> Path:
    """A plain Gym run and two submissions (one of two benchmarks) under one root."""
    root = tmp_path / "runs"
    shutil.copytree(GYM_RUN, root / "local" / "startup_failed")
    copy("two_benchmarks_one_waits", root / "cluster")
    copy("svc_dies_at_startup", root / "cluster")
    return root


def index_record(xdg: Path, case: str, run_dir_here: Path) -> Path:
    """Gym's index copy of the case's record, its run dir where the copy is."""
    data = json.loads((CASES[case] / "_meta" / "index.json").read_text())
    old = data["run_dir"]
    data["run_dir"] = str(run_dir_here)
    for b in data["benchmarks"]:
        b["job_dir"] = b["job_dir"].replace(old, str(run_dir_here))
    path = xdg / "nemo-gym" / "jobs" / f"{data['gym_job_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def gymwatch(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os
    return subprocess.run([sys.executable, "-m", "gymwatch", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def by_path(runs: list[dict]) -> dict[str, dict]:
    return {r["path"]: r for r in runs}


def test_a_submission_is_one_row_with_each_benchmark_s_state(tmp_path):
    root = tree(tmp_path)
    rows = by_path(list_runs([root], SummaryCache(enabled=False), jobs=1))
    two = str(root / "cluster" / run_dir("two_benchmarks_one_waits").name)
    svc = str(root / "cluster" / run_dir("svc_dies_at_startup").name)
    assert set(rows) == {str(root / "local" / "startup_failed"), two, svc}   # no artifacts/ as a run of its own
    row = rows[two]
    assert row["kind"] == "submission" and row["gym_job_id"] == "gym-job-20261206T063132Z-95654b"
    assert row["verdict"] == "ok" and row["trials"]["completed"] == 20
    assert [(b["name"], b["jobs"], b["phase"], b["state"], b["verdict"]) for b in row["benchmarks"]] == [
        ("mcqa", ["601"], "ended", "completed", "ok"), ("mcqa_again", ["602"], "ended", "completed", "ok")]
    assert row["slurm"] == "not asked (files alone)"
    # each benchmark's mean reward (a mean over several benchmarks would mean nothing: none for the row)
    assert [b["mean_reward"] for b in row["benchmarks"]] == [0.2, 0.2] and row["mean_reward"] is None
    assert "mcqa: completed, ok, mean 0.200 · mcqa_again: completed, ok, mean 0.200" in benchmarks_text(row)
    assert rows[svc]["verdict"] == "startup_failed" and rows[svc]["benchmarks"][0]["state"] == "failed"
    assert rows[svc]["reason"].startswith("service policy (job 201) died during startup")


def test_the_text_list_says_each_benchmark_and_never_asks_slurm(tmp_path, monkeypatch):
    root = tree(tmp_path)
    fake = FakeSlurm(tmp_path, monkeypatch)          # on PATH: a listing must not call it
    res = gymwatch("browse", "--no-cache", "--format", "text", str(root), env=fake.env)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    two = next(ln for ln in lines if ln.startswith("cluster/gym-job-20261206T063132Z-95654b "))
    assert two.split()[1] == "ok" and two.endswith("mcqa: completed, ok, mean 0.200 · mcqa_again: completed, ok, mean 0.200")
    svc = next(ln for ln in lines if ln.startswith("cluster/gym-job-20261206T062747Z-5be5e7 "))
    assert svc.split()[1] == "startup_failed" and svc.endswith("mcqa: failed, startup failed")
    assert lines[-1] == "1 run, 2 submissions (gym eval submit: read from their files, Slurm not asked)"
    assert fake.calls() == []


def test_gym_s_local_index_adds_the_submissions_not_under_the_roots_once(tmp_path, user_cache):
    root = tree(tmp_path)
    elsewhere = copy("pending_cancelled", tmp_path / "elsewhere")
    index_record(user_cache, "pending_cancelled", elsewhere)
    index_record(user_cache, "two_benchmarks_one_waits", root / "cluster" / run_dir("two_benchmarks_one_waits").name)
    gone = index_record(user_cache, "completed", tmp_path / "not-here" / "gym-job-20261206T062549Z-b0e64d")
    rows = list_runs([root], SummaryCache(enabled=False), jobs=1)
    subs = [r for r in rows if r.get("kind") == "submission"]
    assert sorted(r["gym_job_id"] for r in subs) == [
        "gym-job-20261206T062549Z-b0e64d", "gym-job-20261206T062747Z-5be5e7", "gym-job-20261206T062818Z-6bb1b7",
        "gym-job-20261206T063132Z-95654b"]
    pending = next(r for r in subs if r["gym_job_id"] == "gym-job-20261206T062818Z-6bb1b7")
    assert pending["path"] == str(elsewhere) and pending["verdict"] == "queued"
    assert [(b["name"], b["jobs"], b["state"]) for b in pending["benchmarks"]] == [("mcqa", ["301"], "queued")]
    missing = next(r for r in subs if r["gym_job_id"] == "gym-job-20261206T062549Z-b0e64d")
    assert missing["path"] == str(gone) and missing["verdict"] == "error"
    assert missing["reason"].startswith("its files are not on this machine")


def test_json_lists_the_submission_with_its_benchmarks(tmp_path):
    root = tree(tmp_path)
    res = gymwatch("browse", "--no-cache", "--format", "json", str(root))
    doc = json.loads(res.stdout)
    [two] = [r for r in doc["runs"] if r.get("gym_job_id") == "gym-job-20261206T063132Z-95654b"]
    assert two["kind"] == "submission" and two["worst"] in ("mcqa", "mcqa_again")
    assert [b["headline"] for b in two["benchmarks"]] == ["completed", "completed"]


async def test_opening_a_submission_in_the_list_opens_its_screen(tmp_path):
    from gymwatch.tui.subscreen import SubmissionScreen
    from tuihelpers import screen_lines, submission_app, wait_for

    root = tree(tmp_path)
    two = str(root / "cluster" / run_dir("two_benchmarks_one_waits").name)
    app = BrowseApp(BrowseState([str(root)]))
    async with app.run_test(size=(160, 20)) as pilot:
        assert await wait_for(pilot, lambda: app.screen.listing.scanned)
        screen = app.screen
        await pilot.press("slash", *"95654b", "enter")
        assert screen.table.row_count == 1 and screen.shown[0]["path"] == two
        line = next(ln for ln in screen_lines(app) if "95654b" in ln and "▊" not in ln)
        assert "mcqa: completed, ok, mean 0.200 · mcqa_again: completed, ok, mean 0.200" in line
        await pilot.press("d")                              # the detail screen: the submission's report
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunDetail))
        assert await wait_for(pilot, lambda: "submission: gym-job-20261206T063132Z-95654b" in "\n".join(screen_lines(app)))
        await pilot.press("escape", "enter")
        await pilot.pause()
    assert app.return_value == two
    live = submission_app(two)                              # what run_browser opens it in
    async with live.run_test(size=(120, 20)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(live.screen, SubmissionScreen) and live.sub_screen.shown)
