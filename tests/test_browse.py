"""`gymwatch browse`: the walk, summaries (same verdicts as the report), the cache, the CLI, the screen."""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import record_made
from gymwatch.browse import runs as runs_mod, screen as screen_mod, summary as summary_mod, workers as workers_mod
from gymwatch.browse.cache import SummaryCache, cache_dir
from gymwatch.browse.compare import CompareScreen, EvidenceScreen
from gymwatch.browse.fmt import COLUMNS, RUN_MIN, fit, shorten
from gymwatch.browse.runs import list_runs
from gymwatch.browse.scan import Found, discover_found, signature, walk
from gymwatch.browse.screen import BrowseApp, BrowseScreen, BrowseState, RunDetail, sort_value
from gymwatch.browse.workers import WorkerPool
from gymwatch.cli import main
from gymwatch.core.layout import Listings, NotARun, RunLayout, discover, list_dir
from gymwatch.core.session import read_run
from gymwatch.core.verdict import counts, mean_reward, verdict
from gymwatch.tui.card import TrialCard
from runbuilder import scored_pair

FIXTURES = Path(__file__).parent / "fixtures"
CASES = FIXTURES / "gym-0.4.0-cases"
CASE_NAMES = ("aborted_500", "evaluator_bundle", "mixed_ok", "some_never_ran", "startup_failed")
T0 = 1_780_000_000      # a fixed clock for file times (2026-05-28 20:26:40 UTC)


def find_runs(roots) -> list[tuple[Found, RunLayout]]:
    """Every run the walk finds under `roots` that discover() recognises, as the browser sees it."""
    out = []
    for found in walk(roots):
        try:
            out.append((found, discover_found(found)))
        except NotARun:
            continue
    return out


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


def test_discovery_from_the_walks_listing_is_discovery_from_scratch():
    """The walk hands discover() its listing of each run dir: the layouts are the same."""
    found = list(walk([FIXTURES]))
    assert len(found) > 20 and all(f.real for f in found)
    for f in found:
        assert discover_found(f) == discover(f.path), f.path


def test_under_a_symlink_discovery_resolves_the_run_afresh(tmp_path):
    shutil.copytree(CASES / "mixed_ok", tmp_path / "real" / "mixed_ok")
    os.symlink(tmp_path / "real", tmp_path / "link")
    (f,) = walk([tmp_path / "link"])
    assert not f.real and f.path == tmp_path / "link" / "mixed_ok"
    assert discover_found(f).root == tmp_path / "real" / "mixed_ok"


def test_discovery_lists_each_directory_once(tmp_path, monkeypatch):
    """A run's shape is asked about a dozen times; each directory is listed once (on a network
    filesystem every listing is a round trip)."""
    shutil.copytree(CASES / "evaluator_bundle", tmp_path / "bundle")
    shutil.copytree(CASES / "mixed_ok", tmp_path / "mixed_ok")
    listed: list[str] = []
    real_scandir, real_listdir = os.scandir, os.listdir

    def scandir(path="."):
        listed.append(os.fspath(path))
        return real_scandir(path)

    def listdir(path="."):
        listed.append(os.fspath(path))
        return real_listdir(path)
    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)
    for run in ("bundle", "mixed_ok"):
        listed.clear()
        discover(tmp_path / run)
        assert listed and len(listed) == len(set(listed)), listed
        (f,) = walk([tmp_path / run])
        listed.clear()
        discover_found(f)
        assert str(tmp_path / run) not in listed       # the walk's own listing


def test_a_summary_made_from_the_listings_is_one_made_from_scratch():
    """A listing's summary takes its files' facts and its logs from the listings the walk and
    the signature took: the same summary as one that looks at the run afresh."""
    for f in walk([FIXTURES]):
        sig = signature(f)
        assert f.subs or not set(f.dirs) & {"logs", "gym_run"}, f.path
        made = workers_mod.made(f.dir, sig, None, f)
        fresh = workers_mod.made(f.dir, sig, None)
        for s in (made, fresh):
            if s[1] and s[1].get("liveness"):
                s[1]["liveness"].pop("last_write")       # (a live run's files: read a moment apart)
        assert made == fresh, f.path


def test_a_summary_lists_no_directory_its_signature_listed(tmp_path, monkeypatch):
    shutil.copytree(CASES / "startup_failed", tmp_path / "run")       # its logs/ are read
    (f,) = walk([tmp_path / "run"])
    listed: list[str] = []
    real_scandir = os.scandir

    def scandir(path="."):
        listed.append(os.fspath(path))
        return real_scandir(path)
    monkeypatch.setattr(os, "scandir", scandir)
    answer = workers_mod.made(f.dir, signature(f), None, f)
    assert answer[1]["logs_read"] and answer[1]["servers"]
    assert str(tmp_path / "run" / "logs") not in listed[1:], listed     # (the signature's own, first)


def test_listings_stat_a_file_as_its_listing_has_it(tmp_path):
    (tmp_path / "a.log").write_text("x")
    entries = list_dir(tmp_path)
    assert entries["a.log"].stat().st_size == 1                # as a signature stats it
    ls = Listings({str(tmp_path): entries})
    (tmp_path / "a.log").write_text("grown")
    (tmp_path / "b.log").write_text("new")
    assert ls.stat(tmp_path / "a.log").st_size == 1          # the signature's look at it
    with pytest.raises(FileNotFoundError):
        ls.stat(tmp_path / "b.log")                            # not in the listing
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.log").write_text("abc")
    assert ls.stat(tmp_path / "sub" / "c.log").st_size == 3   # a directory not listed: now


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


def all_fixture_runs() -> list[str]:
    return sorted(str(f.path.relative_to(FIXTURES)) for f, _ in find_runs([FIXTURES]))


@pytest.mark.parametrize("rel", all_fixture_runs())
def test_browser_and_report_agree_on_every_recorded_run(rel):
    """One truth: the list's verdict, counts and servers are the report's, for every run under
    tests/fixtures (finished or not), read through the same walk a listing makes."""
    path = FIXTURES / rel
    (found, layout), = list(find_runs([path]))
    s = summary_mod.summarize(found.path, layout, signature(found))
    state = read_run(str(path)).state
    assert (s["verdict"], s["trials"], s["servers"]) == (verdict(state).name, counts(state), len(state.servers))
    assert s["mean_reward"] == mean_reward(state)


def test_a_killed_collector_is_incomplete_in_the_list_as_in_the_report(tmp_path):
    """A collection whose collector was killed midway (no end line, no aggregate, files quiet for
    long): not 'collecting' with nothing missing, but what the report says."""
    run = tmp_path / "killed"
    shutil.copytree(CASES / "mixed_ok", run, ignore=shutil.ignore_patterns("timeline.jsonl"))
    (run / "rollouts_aggregate_metrics.json").unlink()
    rows = (run / "rollouts.jsonl").read_text().splitlines(keepends=True)
    (run / "rollouts.jsonl").write_text("".join(rows[:4]))
    out = (run / "gym_eval_run.stdout.log").read_text()
    (run / "gym_eval_run.stdout.log").write_text(out[:out.index("Finished rollout collection!")])
    for p in run.rglob("*"):
        os.utime(p, (T0, T0))
    (found, layout), = list(find_runs([run]))
    s = summary_mod.summarize(found.path, layout, signature(found))
    state = read_run(str(run)).state
    assert s["verdict"] == verdict(state).name == "incomplete"
    assert s["trials"] == counts(state) and s["trials"]["missing"] == 6


def copy_fresh(src: Path, dst: Path) -> Path:
    """`cp -r` / `rsync -r`: file times are the copy's."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    return dst


@pytest.mark.parametrize("case, started, took", [
    ("gym-0.4.0-cases/mixed_ok", "2026-11-29 10:11:21", 23),
    ("gym-0.4.0-cases/evaluator_bundle", "2026-11-29 10:23:52", 41),     # its metadata.json
    ("gym-0.7.0-cases/g07_mixed_ok", "2026-12-01 06:30:46", 44),
])
def test_a_copy_lists_its_recorded_start_not_the_copy_time(tmp_path, case, started, took):
    run = copy_fresh(FIXTURES / case, tmp_path / "copy")
    (found, layout), = list(find_runs([run]))
    s = summary_mod.summarize(found.path, layout, signature(found))
    assert time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(s["started"])) == started
    assert s["started_from"] != "file times" and int(s["duration"]) == took


def test_a_run_that_records_no_time_lists_none_not_the_copy_time(tmp_path):
    run = tmp_path / "bare"
    run.mkdir()
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl", "rollouts_failures.jsonl"):
        (run / name).write_text("")
    (found, layout), = list(find_runs([run]))
    s = summary_mod.summarize(found.path, layout, signature(found))
    assert s["started"] is None and s["duration"] is None


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
    old = user_cache / "gymwatch" / "browse.json"          # an older gymwatch's cache: gone on a save
    old.parent.mkdir(parents=True)
    old.write_text("{}")
    cache = SummaryCache()
    assert cache.path.parent == cache_dir() == user_cache / "gymwatch"
    first = list_runs([root], cache)
    assert (cache.hits, cache.misses) == (0, len(CASE_NAMES)) and not old.exists()
    again = SummaryCache()
    assert list_runs([root], again) == first and (again.hits, again.misses) == (len(CASE_NAMES), 0)
    assert tree_state(root) == before                                  # nothing written into a run
    rollouts = root / "exp0" / "mixed_ok" / "rollouts.jsonl"
    with rollouts.open("a") as fh:
        fh.write("not json\n")
    third = SummaryCache()
    list_runs([root], third)
    assert (third.hits, third.misses) == (len(CASE_NAMES) - 1, 1)


def test_cache_keeps_summaries_exactly_and_survives_a_bad_file(tmp_path):
    path = tmp_path / "cache" / "browse.msgpack"
    sig = [["logs/a.log", 10, 1_700_000_000_123_456_789], ["rollouts.jsonl", None, None]]
    summary = {"path": "/r", "mean_reward": float("nan"), "trials": {"completed": 3}, "reason": "é"}
    path.parent.mkdir()
    (path.parent / "browse.json").write_text("{}")          # beside a file a caller named: not ours
    first = SummaryCache(path)
    first.put("/r", sig, summary)
    first.save()
    assert (path.parent / "browse.json").exists()
    again = SummaryCache(path)
    got = again.get("/r", [list(x) for x in sig])
    assert got is not None and math.isnan(got.pop("mean_reward"))
    assert got == {"path": "/r", "trials": {"completed": 3}, "reason": "é"}
    assert again.get("/r", sig[:1]) is None and again.get("/r", None) is None and again.knows("/r")
    assert (again.hits, again.misses) == (1, 2)
    for bad in (b"", b"\xc1not msgpack", b"{}", b"\x92\x01\x02"):
        path.write_bytes(bad)
        assert not SummaryCache(path).knows("/r")        # a cache it cannot read is an empty one


def age_dirs(root: Path, when: float = T0) -> None:
    """Every dir's mtime set to `when` (long ago: a warm listing trusts their names)."""
    for p in [root, *root.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            os.utime(p, (when, when))


def mounted_as(monkeypatch, tmp_path: Path, fstype: str) -> None:
    """The mount table says tmp_path's filesystem is `fstype` (the host's may be anything)."""
    from gymwatch.browse import scan

    dev = tmp_path.stat().st_dev
    table = tmp_path / "mountinfo"
    table.write_text(f"27 1 {os.major(dev)}:{os.minor(dev)} / / rw,relatime - {fstype} /dev/x rw\n"
                     f"28 27 0:99 / /proc rw - proc proc rw\n")
    monkeypatch.setattr(scan, "MOUNTINFO", str(table))


def count_listings(monkeypatch) -> list[str]:
    """The dirs the walk and the signatures list from now on."""
    from gymwatch.browse import scan

    listed: list[str] = []
    for name in ("_listing", "_entries"):
        real = getattr(scan, name)
        monkeypatch.setattr(scan, name, lambda d, real=real: listed.append(os.fspath(d)) or real(d))
    return listed


@pytest.mark.parametrize("split", [False, True])
def test_a_warm_listing_lists_no_run_whose_dirs_are_unchanged(tmp_path, monkeypatch, split):
    """A cached run whose dirs' mtimes are what they were (and were old then) has the same names:
    its files are stat'ed, not its dirs listed; a file appended to is still seen, and a name added
    changes its dir's mtime: listed again. (`split`: with a forked child checking half the runs.)"""
    from gymwatch.browse import fresh

    if split:
        monkeypatch.setattr(fresh, "SPLIT_MIN", 2)
    mounted_as(monkeypatch, tmp_path, "ext4")
    root = make_tree(tmp_path / "runs")
    age_dirs(root)
    first = list_runs([root], SummaryCache(), jobs=1)
    listed = count_listings(monkeypatch)
    cache = SummaryCache()
    assert list_runs([root], cache, jobs=1) == first and cache.hits == len(CASE_NAMES)
    runs = {str(p) for p in root.glob("exp*/*") if p.name in CASE_NAMES}
    assert len(runs) == len(CASE_NAMES) and not [d for d in listed if d.startswith(tuple(runs))]
    mixed = root / "exp0" / "mixed_ok"
    with (mixed / "rollouts.jsonl").open("a") as fh:         # the dir's mtime stays as it was
        fh.write("not json\n")
    bundle = root / "exp1" / "evaluator_bundle" / "gym_run"
    (bundle / "gym_env.log").rename(bundle / "gym_env.log.old")       # a name changed in gym_run/
    (root / "exp0" / "aborted_500" / "logs" / "extra.log").write_text("[INFO] hello\n")
    listed.clear()
    cache = SummaryCache()
    assert list_runs([root], cache, jobs=1) == list_runs([root], SummaryCache(enabled=False), jobs=1)
    assert (cache.hits, cache.misses) == (len(CASE_NAMES) - 3, 3)
    assert {str(mixed), str(bundle), str(root / "exp0" / "aborted_500" / "logs")} <= set(listed)
    listed.clear()          # made again, its entry keeps how its dirs were: not listed next time
    assert list_runs([root], SummaryCache(), jobs=1) and not [d for d in listed if d.startswith(str(mixed))]


def test_a_dir_changed_in_the_same_clock_tick_as_its_listing_is_listed_again(tmp_path, monkeypatch):
    """A name added right after a listing may leave its dir's mtime as it was (a coarse clock): a
    dir whose mtime was within seconds of its listing is not trusted."""
    mounted_as(monkeypatch, tmp_path, "ext4")
    root = make_tree(tmp_path / "runs")
    age_dirs(root, time.time() - 1)
    logs = root / "exp0" / "mixed_ok" / "logs"
    list_runs([root], SummaryCache(), jobs=1)
    was = logs.stat().st_mtime_ns
    (logs / "extra.log").write_text("[INFO] hello\n")
    os.utime(logs, ns=(was, was))                       # as a coarse clock would have left it
    listed = count_listings(monkeypatch)
    cache = SummaryCache()
    assert list_runs([root], cache, jobs=1) == list_runs([root], SummaryCache(enabled=False), jobs=1)
    assert str(logs) in listed and cache.misses == 1


def test_a_cached_run_whose_dirs_were_listed_again_is_trusted_next_time(tmp_path, monkeypatch):
    """A run cached while its dirs had just changed (too close to trust), or whose dirs' times
    changed with its names the same, is listed and still a hit; the cache then keeps how its dirs
    are now, and the next listing does not list them."""
    mounted_as(monkeypatch, tmp_path, "ext4")
    root = make_tree(tmp_path / "runs")
    first = list_runs([root], SummaryCache(), jobs=1)          # its dirs just made: not trusted
    runs = tuple(str(p) for p in root.glob("exp*/*") if p.name in CASE_NAMES)
    age_dirs(root)
    listed = count_listings(monkeypatch)
    cache = SummaryCache()
    assert list_runs([root], cache, jobs=1) == first and cache.hits == len(CASE_NAMES)
    assert set(runs) <= set(listed)
    listed.clear()
    assert list_runs([root], SummaryCache(), jobs=1) == first
    assert not [d for d in listed if d.startswith(runs)]


@pytest.mark.parametrize("fstype", ["fuse.gcsfuse", "cifs"])
def test_runs_on_a_filesystem_not_known_to_keep_dir_mtimes_are_always_listed(tmp_path, monkeypatch, fstype):
    """An object store's FUSE mount makes its directories' times up: a name added there may leave
    them as they were, so its runs are listed every time."""
    mounted_as(monkeypatch, tmp_path, fstype)
    root = make_tree(tmp_path / "runs")
    age_dirs(root)
    logs = root / "exp0" / "mixed_ok" / "logs"
    list_runs([root], SummaryCache(), jobs=1)
    (logs / "extra.log").write_text("[INFO] hello\n")
    age_dirs(root)                                       # the same made-up times as before
    listed = count_listings(monkeypatch)
    cache = SummaryCache()
    assert list_runs([root], cache, jobs=1) == list_runs([root], SummaryCache(enabled=False), jobs=1)
    assert str(logs) in listed and cache.misses == 1
    assert {str(p) for p in root.glob("exp*/*") if p.name in CASE_NAMES} <= set(listed)


@pytest.mark.parametrize("child", ["answers", "dies"])
def test_a_warm_listing_split_with_a_forked_child_sees_what_changed(tmp_path, monkeypatch, child):
    """Many cached runs: every other one is checked by a forked child (fresh.py); a run changed in
    either half is made again, and a child that dies has its half checked here."""
    import signal

    from gymwatch.browse import fresh

    root = make_tree(tmp_path / "runs")
    first = list_runs([root], SummaryCache(), jobs=1)
    (root / "exp0" / "mixed_ok" / "rollouts.jsonl").open("a").write("not json\n")
    (root / "exp1" / "evaluator_bundle" / "gym_run" / "rollouts.jsonl").open("a").write("not json\n")
    alone = list_runs([root], SummaryCache(enabled=False), jobs=1)
    assert alone != first
    monkeypatch.setattr(fresh, "SPLIT_MIN", 2)
    forks = record_made(monkeypatch, fresh.fork, "Child")
    if child == "dies":
        parent, real = os.getpid(), SummaryCache.matches

        def matches_then_die(self, run, sig):
            if os.getpid() != parent:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(self, run, sig)
        monkeypatch.setattr(SummaryCache, "matches", matches_then_die)
    answers = record_made(monkeypatch, fresh, "_answer")
    for hits in (len(CASE_NAMES) - 2, len(CASE_NAMES)):      # then all hits: the two were made again
        cache = SummaryCache()
        assert list_runs([root], cache, jobs=1) == alone
        assert (cache.hits, cache.misses) == (hits, len(CASE_NAMES) - hits)
    assert len(forks) == 2
    assert answers == ([None, None] if child == "dies" else [[False, False], [True, True]])   # its half: the two changed runs


@pytest.fixture
def pools(monkeypatch):
    """Pool even a few runs, and record every pool made: the `python -m` workers, as a process
    with other threads has them (the browse screen's; a single-threaded one forks: forked_pools)."""
    return pooling(monkeypatch, "WorkerPool")


@pytest.fixture
def forked_pools(monkeypatch):
    return pooling(monkeypatch, "ForkPool")


def pooling(monkeypatch, kind: str) -> list:
    monkeypatch.setattr(runs_mod, "POOL_MIN_RUNS", 2)
    monkeypatch.setattr(runs_mod, "can_fork", lambda: kind == "ForkPool")
    return record_made(monkeypatch, runs_mod, kind)


@pytest.mark.parametrize("kind", ["WorkerPool", "ForkPool"])
def test_a_pool_lists_the_same_runs_in_the_same_order(tmp_path, monkeypatch, kind):
    made = pooling(monkeypatch, kind)
    root = make_tree(tmp_path / "runs")
    alone = list_runs([root], SummaryCache(enabled=False), jobs=1)
    assert not made
    streamed = []
    pooled = list_runs([root], SummaryCache(enabled=False), on_run=streamed.append, jobs=3)
    assert len(made) == 1 and pooled == alone == streamed and len(alone) == len(CASE_NAMES)
    pool = made[0]
    reaped = not pool.pids if kind == "ForkPool" else pool.proc.returncode is not None
    assert reaped


def test_workers_process_starts_during_the_walk_only_when_runs_are_new(tmp_path, pools, monkeypatch, user_cache):
    """A caller with threads (the browse screen) starts its workers' process once the walk has
    found POOL_MIN_RUNS runs the cache never saw, so that it imports while the walk goes on;
    a listing of cached runs, or with one job, starts none."""
    root = make_tree(tmp_path / "runs")
    alone = list_runs([root], SummaryCache(enabled=False), jobs=1)
    assert not pools
    real_walk, seen = runs_mod.walk, []

    def walk(roots, known=None, submissions=None):
        for found in real_walk(roots, known, submissions):
            seen.append(len(pools))           # pools made before this run was found
            yield found
    monkeypatch.setattr(runs_mod, "walk", walk)
    assert list_runs([root], SummaryCache(), jobs=2) == alone
    assert seen == [0, 0] + [1] * (len(CASE_NAMES) - 2) and len(pools) == 1
    assert pools[0].proc.returncode is not None
    assert list_runs([root], SummaryCache(), jobs=2) == alone and len(pools) == 1     # all cached


def test_a_dead_forked_worker_is_made_up_for_in_process(tmp_path, forked_pools, monkeypatch):
    import os
    import signal

    from gymwatch.browse import workers

    root = make_tree(tmp_path / "runs")
    alone = list_runs([root], SummaryCache(enabled=False), jobs=1)
    real_make = workers.make
    parent = os.getpid()

    def make_then_die(path, sig, sweep=None, found=None):
        if os.getpid() != parent:          # a worker, at its first run (this process goes on)
            (tmp_path / f"died-{os.getpid()}").touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return real_make(path, sig, sweep, found)
    monkeypatch.setattr(workers, "make", make_then_die)
    assert list_runs([root], SummaryCache(enabled=False), jobs=3) == alone
    # each worker dies at its first run; one may get none (this process takes runs too, and under a
    # busy machine can take them all before it starts)
    assert 1 <= len(list(tmp_path.glob("died-*"))) <= 2


def test_a_forked_pool_makes_runs_here_too(tmp_path, monkeypatch):
    """ForkPool(n) forks n - 1 workers: this process takes runs from their queue whenever no
    answer is waiting, and answers come in walk order all the same."""
    from gymwatch.browse import workers

    root = make_tree(tmp_path / "runs")
    found = list(walk([root]))
    alone = [workers.made(f.dir, None, None, f) for f in walk([root])]
    here = record_made(monkeypatch, workers, "made")
    pool = workers.ForkPool(2)
    try:
        answers = list(pool.map([(f.dir, None) for f in found], found))
        forked = len(pool.pids)
    finally:
        pool.close()
    assert answers == alone and forked == 1
    assert 1 <= len(here) <= len(found)


def test_a_dead_worker_is_made_up_for_in_process(tmp_path, pools, monkeypatch):
    """WorkerPool's process dies before it answers: every run is made here."""
    root = make_tree(tmp_path / "runs")
    alone = list_runs([root], SummaryCache(enabled=False), jobs=1)
    real_map = WorkerPool.map

    def map_after_a_death(self, items, found=None):
        self.proc.kill()
        self.proc.wait()
        return real_map(self, items, found)
    monkeypatch.setattr(WorkerPool, "map", map_after_a_death)
    assert list_runs([root], SummaryCache(enabled=False), jobs=2) == alone
    assert pools[0].proc.returncode == -9


def test_worker_pool_process_answers_in_order_and_stops_at_a_death(tmp_path):
    """`python -m gymwatch.browse.workers N` forks N workers and answers in walk order; a
    worker that dies ends it with status 1 (its caller makes the rest)."""
    import subprocess
    import sys

    import msgspec

    from gymwatch.browse import workers

    root = make_tree(tmp_path / "runs")
    paths = [f.dir for f in walk([root])]
    expected = list_runs([root], SummaryCache(enabled=False), jobs=1)
    out = subprocess.run([sys.executable, "-m", "gymwatch.browse.workers", "2"], capture_output=True,
                         input=msgspec.msgpack.encode([[p, None] for p in paths]), check=True).stdout
    got, at = [], 0
    while at < len(out):
        i, size = workers.ForkPool.FRAME.unpack_from(out, at)
        at += workers.ForkPool.FRAME.size
        assert i == len(got)
        got.append(msgspec.msgpack.decode(out[at:at + size])[1])
        at += size
    assert got == expected
    died = subprocess.run([sys.executable, "-m", "gymwatch.browse.workers", "2"], capture_output=True,
                          input=msgspec.msgpack.encode([[p, ["not", "a", "signature"]] for p in paths]))
    assert died.returncode == 1 and not died.stdout


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
    assert lines[0].split()[:3] == ["run", "verdict", "started"]          # the run and its verdict first
    row = next(line for line in lines if line.startswith("gym-0.4.0-cases/some_never_ran "))
    assert "some_never_ran" in row and " 0.833 " in row
    runs, _, rest = lines[-1].partition(" runs, ")          # the recorded gym eval submit runs listed apart
    assert int(runs) + int(rest.split()[0]) == len(lines) - 2 and rest.split()[1] == "submissions"


def test_cli_rejects_a_missing_root(tmp_path, capsys):
    assert main(["browse", str(tmp_path / "nope"), "--format", "text"]) == 3
    assert "nope: no such file or directory" in capsys.readouterr().err


async def wait_scanned(pilot, app):
    for _ in range(250):
        if isinstance(app.screen, BrowseScreen) and app.screen.listing.scanned:
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
        await pilot.press("s")                                          # sort by the next column
        assert screen.listing.sort == "completed"
        await pilot.press("v")                                          # any problem: all but ok
        assert screen.listing.verdict == "problem" and screen.table.row_count == len(CASE_NAMES) - 2
        assert all(r["verdict"] != "ok" for r in screen.shown)
        await pilot.press("v")                                          # then the first verdict present
        assert screen.listing.verdict == "startup_failed" and screen.table.row_count == 1
        await pilot.press("escape")
        assert screen.listing.verdict is None and screen.table.row_count == len(CASE_NAMES)
        await pilot.press("slash", *"never", "enter")
        assert screen.table.row_count == 1 and screen.shown[0]["verdict"] == "some_never_ran"
        await pilot.press("d")                                          # the read-only detail screen
        await pilot.pause()
        assert isinstance(app.screen, RunDetail)
        await pilot.press("escape")
        assert app.screen is screen
        await pilot.press("enter")                                      # the live app: exit with the path
        await pilot.pause()
    assert app.return_value == str(root / "exp1" / "some_never_ran")
    assert app.listing.cursor_path == app.return_value                      # the list comes back there


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
        await pilot.press("s", "s")     # by failed count, newest first among equals: a stable order

    assert snap_compare(app, terminal_size=(150, 14), run_before=run_before)


def test_snapshot_browser_at_80_columns(snap_compare, tmp_path, monkeypatch):
    """Narrow: the run and its verdict first, columns dropped by priority, no sideways scroll."""
    make_tree(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    app = BrowseApp(BrowseState(["runs"]))

    async def run_before(pilot):
        await wait_scanned(pilot, app)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 14), run_before=run_before)


def test_run_browser_loops_through_the_live_app(tmp_path, monkeypatch):
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


async def test_browser_columns_sorts_both_ways_and_keys(tmp_path):
    root = make_tree(tmp_path / "runs")
    app = BrowseApp(BrowseState([str(root)]))
    async with app.run_test(size=(80, 20)) as pilot:
        await wait_scanned(pilot, app)
        screen = app.screen
        assert screen.columns[:2] == ["run", "verdict"] and "name" not in screen.columns      # 80 columns
        assert sum(screen._width(k) + 2 for k in screen.columns) <= 78
        assert screen.table.cursor_row == 0                               # the first row
        await pilot.press("G")
        assert screen.table.cursor_row == len(CASE_NAMES) - 1
        await pilot.press("g")
        assert screen.table.cursor_row == 0
        await pilot.press("end")
        assert screen.table.cursor_row == len(CASE_NAMES) - 1
        await pilot.press("home")
        assert screen.table.cursor_row == 0
        for key in [k for k, _ in COLUMNS]:                               # every column, both ways
            screen.listing.sort, screen.listing.reverse = key, False
            screen.resort()
            down = [r["path"] for r in screen.shown]
            screen.listing.reverse = True
            screen.resort()
            up = [r["path"] for r in screen.shown]
            table_order = [str(r.key.value) for r in screen.table.ordered_rows]
            assert table_order == up
            known = [r for r in screen.shown if sort_value(r, key)[0] is not None]
            if len({sort_value(r, key) for r in known}) == len(known) == len(CASE_NAMES):
                assert up == down[::-1], key
        screen.listing.sort, screen.listing.reverse = "missing", False
        screen.resort()
        assert screen.shown[0]["trials"]["missing"] == 6
        screen.listing.reverse = True
        screen.resort()
        assert screen.shown[-1]["trials"]["missing"] == 6
        await pilot.resize_terminal(200, 20)
        await pilot.pause()
        assert screen.columns == [k for k, _ in COLUMNS]                  # wide: every column


def test_fit_cuts_a_long_run_column_before_dropping_columns():
    widths = {k: len(h) + 2 for k, h in COLUMNS} | {"run": 60, "verdict": 18, "started": 18}
    cols, run = fit(widths, 78)
    assert cols[:2] == ["run", "verdict"] and {"failed", "never_ran", "missing"} <= set(cols)
    assert RUN_MIN <= run < 60 and sum((run if k == "run" else widths[k]) + 2 for k in cols) <= 78
    assert fit(widths, 400) == ([k for k, _ in COLUMNS], 60)                  # room: nothing cut
    cols, run = fit(widths | {"run": 10}, 78)
    assert run == 10                                                          # short: never widened
    cols, run = fit(widths, 30)
    assert cols == ["run", "verdict"] and run == 8                            # no room: cut, not dropped


def test_shorten_keeps_both_ends_of_a_run_path():
    assert shorten("exp_007/runs/a_long_run_name", 100) == "exp_007/runs/a_long_run_name"
    cut = shorten("exp_007/some/deep/path/to/run_0042", 20)
    assert len(cut) == 20 and cut.startswith("exp_0") and cut.endswith("run_0042") and "…" in cut


async def test_a_long_run_path_is_cut_at_80_columns_and_whole_when_wide(tmp_path):
    """At 80 columns the problem counts stay: the run's path is cut in its middle, not the columns dropped."""
    long = tmp_path / "runs" / "experiments_of_the_week" / "a_rather_long_sweep_name" / "trial_group"
    for name in ("mixed_ok", "aborted_500"):
        shutil.copytree(CASES / name, long / f"{name}_seed_1234")
    app = BrowseApp(BrowseState([str(tmp_path / "runs")]))
    async with app.run_test(size=(80, 20)) as pilot:
        await wait_scanned(pilot, app)
        screen = app.screen
        assert {"verdict", "failed", "never_ran", "missing"} <= set(screen.columns)
        assert sum(screen._width(k) + 2 for k in screen.columns) <= 78
        cells = [str(screen.table.get_cell(str(long / f"{n}_seed_1234"), "run")) for n in ("mixed_ok", "aborted_500")]
        assert all("…" in c and c.startswith("experim") and c.endswith("_seed_1234") for c in cells), cells
        await pilot.press("m")                                                # a mark is cut to fit too
        marked = str(screen.table.get_cell(screen.shown[0]["path"], "run"))
        assert marked.startswith("A ") and len(marked) <= screen._width("run")
        await pilot.resize_terminal(250, 20)
        await pilot.pause()
        assert screen.columns == [k for k, _ in COLUMNS]
        whole = str(screen.table.get_cell(str(long / "mixed_ok_seed_1234"), "run"))
        assert "…" not in whole and whole.endswith("trial_group/mixed_ok_seed_1234")


async def test_every_sorted_column_shows_its_arrow_and_s_cycles_them_all(tmp_path):
    """The arrow was cut off in columns as narrow as their label (ok, failed, reward, duration)."""
    root = make_tree(tmp_path / "runs")
    app = BrowseApp(BrowseState([str(root)]))
    async with app.run_test(size=(200, 20)) as pilot:
        await wait_scanned(pilot, app)
        screen = app.screen
        labels = dict(COLUMNS)
        seen = []
        for _ in COLUMNS:
            await pilot.press("s")
            await pilot.pause()
            seen.append(screen.listing.sort)
            header = screen.table.render_line(0).text
            assert header.count("▼") == 1 and f"{labels[screen.listing.sort]} ▼" in header, screen.listing.sort
            await pilot.press("S")
            await pilot.pause()
            header = screen.table.render_line(0).text
            assert "▼" not in header and f"{labels[screen.listing.sort]} ▲" in header, screen.listing.sort
        assert sorted(seen) == sorted(k for k, _ in COLUMNS)          # s visits every column


async def test_compare_rows_drawn_before_the_tables_idle_are_whole():
    """The cursor row can be drawn between the rows going in and the table measuring its
    columns; it then stayed cut (`complete`, `never_ra`) in the table's line cache."""
    from textual.app import App
    from textual.widgets import DataTable

    trials = [{"task_index": 1, "rollout_index": r, "a_status": "completed", "a_reward": 0.0,
               "b_status": "never_ran", "b_reward": None, "change": "worse"} for r in (0, 1)]

    class One(App):
        def compose(self):
            yield DataTable(cursor_type="row")

    app = One()
    async with app.run_test(size=(100, 10)) as pilot:
        table = app.query_one(DataTable)
        CompareScreen._fill(table, trials)
        first = table.render_line(1).text                   # before the table's idle
        await pilot.pause()
        assert table.render_line(1).text == first
        assert "completed" in first and "never_ran" in first and "worse" in first


async def test_runs_drawn_before_the_tables_idle_are_whole(tmp_path):
    """A batch bringing a longer run name than any before: a row drawn between the rows going in
    and the table measuring them stayed cut in the table's line cache (`exp0/startup_fai`)."""
    root = make_tree(tmp_path / "runs")
    runs = sorted(list_runs([root], SummaryCache(enabled=False), jobs=1), key=lambda r: len(r["path"]))
    app = BrowseApp(BrowseState([str(tmp_path / "empty")]))
    async with app.run_test(size=(150, 20)) as pilot:
        await wait_scanned(pilot, app)
        screen, table = app.screen, app.screen.table
        screen._arrived(runs[:1])
        await pilot.pause()
        screen._arrived(runs[1:])                            # the longest name comes last
        longest = screen._cells(runs[-1])["run"].plain
        drawn = table.render_line(len(runs)).text            # before the table's idle
        await pilot.pause()
        assert longest in drawn and table.render_line(len(runs)).text == drawn


async def test_a_scan_hands_runs_over_in_few_batches(tmp_path, monkeypatch):
    """Each batch redraws every visible row: the first run at once, the screen filled soon
    after, then a batch every FLUSH_EVERY seconds (not one every 0.1 s: 22 for 1,000 runs)."""
    now = [1000.0]

    def listing(roots, cache, on_run, stop):       # 100 runs, one every 1/64 s
        for i in range(100):
            on_run({"path": f"/runs/r{i:03d}", "verdict": "ok"})
            now[0] += 1 / 64
    monkeypatch.setattr(screen_mod, "list_runs", listing)
    monkeypatch.setattr(screen_mod, "monotonic", lambda: now[0])
    sizes: list[int] = []
    real = BrowseScreen._arrived
    monkeypatch.setattr(BrowseScreen, "_arrived", lambda self, runs: (sizes.append(len(runs)), real(self, runs)))
    app = BrowseApp(BrowseState([str(tmp_path)]))
    async with app.run_test(size=(150, 20)) as pilot:
        await wait_scanned(pilot, app)
        assert app.screen.table.row_count == 100
    assert sizes == [1, 7, 32, 32, 28]


def test_browse_cells_are_not_measured_by_the_table():
    """The screen sets its columns' widths; DataTable measuring each new cell (much of the UI's
    time in a cold scan) is skipped: the measure asks for no console options at all, and the cell
    still renders as its text."""
    from rich.console import Console
    from textual.render import measure

    from gymwatch.browse.screen import Cell

    class NoOptions(Console):
        @property
        def options(self):
            raise AssertionError("measured")
    assert measure(NoOptions(), Cell("exp1/some_never_ran"), 1) == 1
    console = Console(width=40, record=True)
    console.print(Cell("exp1/some_never_ran", no_wrap=True))
    assert console.export_text().strip() == "exp1/some_never_ran"


async def test_a_mark_widens_the_run_column(tmp_path, monkeypatch):
    make_tree(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    app = BrowseApp(BrowseState(["runs"]))
    async with app.run_test(size=(150, 20)) as pilot:
        await wait_scanned(pilot, app)
        await pilot.press("slash", *"evaluator", "enter", "m")     # the longest name, marked
        await pilot.pause()
        assert "A exp1/evaluator_bundle " in app.screen.table.render_line(1).text


async def test_compare_two_marked_runs_and_open_a_changed_trial(tmp_path):
    root = make_tree(tmp_path / "runs")
    app = BrowseApp(BrowseState([str(root)]))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scanned(pilot, app)
        screen = app.screen
        await pilot.press("slash", *"mixed_ok", "enter", "m")
        await pilot.press("escape", "slash", *"some_never", "enter", "space")
        assert [Path(p).name for p in screen.listing.marked] == ["mixed_ok", "some_never_ran"]
        await pilot.press("escape", "c")
        cmp = app.screen
        assert isinstance(cmp, CompareScreen)
        for _ in range(250):
            if cmp.loaded:
                break
            await pilot.pause(0.02)
        table = cmp.query_one("#cmp-trials")
        assert table.row_count == 4 and cmp.result["worse"] == 4
        assert {(t["task_index"], t["rollout_index"]) for t in cmp.result["trials"]} == {(1, 0), (1, 1), (4, 0), (4, 1)}
        await pilot.press("a")                                          # the trial's card in run A
        await pilot.pause()
        assert isinstance(app.screen, TrialCard) and app.screen.card.status == "completed"
        assert "run A" in str(app.screen.query_one("Vertical").border_subtitle)
        await pilot.press("r")                                          # its row, one key away
        await pilot.pause()
        text = app.screen.text.plain
        assert "run A" in text and "completed" in text and '"_ng_task_index": 1' in text
        await pilot.press("escape", "b")                                # the same trial in run B
        await pilot.pause()
        assert isinstance(app.screen, TrialCard) and app.screen.card.status == "never_ran"
        assert app.screen.card.lines, "a never-ran trial's card lists the lines that show it"
        await pilot.press("enter")                                      # a listed line: its log at that line
        await pilot.pause()
        assert isinstance(app.screen, EvidenceScreen)
        assert app.screen.ev == app.screen.ev and app.screen.query_one("LogView").border_title
        await pilot.press("escape")
        assert app.screen is cmp
        await pilot.press("escape")
        assert app.screen is screen


async def test_around_it_on_a_compared_trials_card_opens_its_line(tmp_path):
    """`t` on a card (every server's log around the trial, on the live screen) opens, on the
    compare screen, the highlighted line of the trial in its log: the card hands back an AroundIt,
    not an Evidence, and that must not reach the line screen as one."""
    root = make_tree(tmp_path / "runs")
    app = BrowseApp(BrowseState([str(root)]))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_scanned(pilot, app)
        cmp = await open_compare(pilot, app, root / "exp0" / "mixed_ok", root / "exp1" / "some_never_ran", [str(root)])
        await pilot.press("b")                                          # a never-ran trial's card in run B
        await pilot.pause()
        card = app.screen
        assert isinstance(card, TrialCard) and card.card.lines
        first = card.card.lines[0]
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, EvidenceScreen) and app.screen.ev is first
        assert app.screen.query_one("LogView").border_title == first.where()
        await pilot.press("escape")
        assert app.screen is cmp


def test_snapshot_compare_screen(snap_compare, tmp_path, monkeypatch):
    make_tree(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "runs"
    app = BrowseApp(BrowseState([str(root)]))

    async def run_before(pilot):
        await wait_scanned(pilot, app)
        cmp = CompareScreen(str(root / "exp0" / "mixed_ok"), str(root / "exp1" / "some_never_ran"), [str(root)])
        app.push_screen(cmp)
        for _ in range(250):
            if cmp.loaded:
                break
            await pilot.pause(0.02)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(110, 30), run_before=run_before)


async def open_compare(pilot, app, a: Path, b: Path, roots: list[str]) -> CompareScreen:
    cmp = CompareScreen(str(a), str(b), roots)
    app.push_screen(cmp)
    for _ in range(250):
        if cmp.loaded:
            break
        await pilot.pause(0.02)
    await pilot.pause()
    return cmp


async def test_compare_screen_shows_the_statistics_with_the_flipped_tasks_first(tmp_path):
    from textual.app import App

    a, b = scored_pair(tmp_path / "runs")
    app = App()
    async with app.run_test(size=(120, 40)) as pilot:
        cmp = await open_compare(pilot, app, a, b, [str(tmp_path / "runs")])
        st = cmp.result["stats"]
        head = cmp.query_one("#cmp-head").render().plain
        assert st["verdict"] in head and st["verdict"].startswith("B is worse on 7 of 50 tasks, better on 2; mean -0.061 [")
        more = cmp.query_one("#cmp-tasks").render().plain.splitlines()
        assert more[0] == "flipped: tasks 3, 11, 27 passed -> failed; task 8 failed -> passed"
        assert "  McNemar exact (0/1 rewards): 19 passed in A only, 7 in B only; p = 0.03" in more
        assert "  counted apart: 3 scored in A only (B: 1 failed, 2 never ran), 0 in B only" in more
        first = more.index(next(line for line in more if line.startswith("tasks, flipped first")))
        assert more[first + 1].split() == ["task", "change", "A", "->", "B", "paired", "(n)", "flipped", "A", "trials",
                                           "B", "trials"]
        order = [int(line.split()[0]) for line in more[first + 2:first + 11]]
        assert order == [3, 11, 27, 8, 5, 14, 33, 19, 21]      # flipped, then worse by how much, then better
        assert more[first + 2].split() == ["3", "-1.000", "1.000", "->", "0.000", "4", "passed", "->", "failed",
                                           "4/0/0/0", "4/0/0/0"]
        tasks_shown = more[first + 2:more.index("servers: time to ready and state")]
        assert len(tasks_shown) == 50 and "none scored in both" not in "".join(tasks_shown)


async def test_compare_screen_shows_gyms_own_report_and_where_it_disagrees(tmp_path):
    from textual.app import App

    fx = FIXTURES / "gym-0.7.0-cases"
    b = tmp_path / "g07_some_never_ran"
    shutil.copytree(fx / "g07_some_never_ran", b)
    shutil.copy(FIXTURES / "gym-0.7.0-compare" / "g07_mixed_ok-vs-g07_some_never_ran" / "compare_report.json", b)
    app = App()
    async with app.run_test(size=(160, 50)) as pilot:
        cmp = await open_compare(pilot, app, fx / "g07_mixed_ok", b, [])
        more = cmp.query_one("#cmp-tasks").render().plain
        assert f"Gym's own comparison ({b / 'compare_report.json'}, nemo-gym 0.7.0)" in more
        assert "    - tasks compared: Gym 5 (in both runs' metrics), gymwatch 3 (with a trial both runs scored)" in more
        assert "(no interval: 3 tasks scored in both runs, 10 needed)" in cmp.query_one("#cmp-head").render().plain
        assert any(line.split()[:5] == ["1", "none", "scored", "in", "both"] for line in more.splitlines())


def compare_snapshot(snap_compare, tmp_path, monkeypatch, size):
    from textual.app import App

    a, b = scored_pair(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    app = App()

    async def run_before(pilot):
        await open_compare(pilot, app, a, b, [str(tmp_path / "runs")])

    return snap_compare(app, terminal_size=size, run_before=run_before)


def test_snapshot_compare_statistics_80x24(snap_compare, tmp_path, monkeypatch):
    assert compare_snapshot(snap_compare, tmp_path, monkeypatch, (80, 24))


def test_snapshot_compare_statistics_200x50(snap_compare, tmp_path, monkeypatch):
    assert compare_snapshot(snap_compare, tmp_path, monkeypatch, (200, 50))


@pytest.mark.parametrize("screen", ["detail", "compare", "line"])
@pytest.mark.parametrize("closed_by", ["escape", "quit"])
async def test_a_screen_closed_before_it_was_set_up_sets_nothing_up(screen, closed_by, monkeypatch):
    """Enter then escape (or q) in one burst can pop the screen (or quit the app) before the
    screen's Mount is handled: it then sets nothing up (it raised NoMatches, ending the app with
    exit code 1, or read runs nobody would see)."""
    from textual.app import App

    from gymwatch.core.model import Evidence
    from gymwatch.tui.logview import LogView

    started: list[str] = []
    for cls, name in ((LogView, "open"), (LogView, "open_merged"), (CompareScreen, "load")):
        monkeypatch.setattr(cls, name, lambda *a, _n=name, **k: started.append(_n))
    made = {"detail": lambda: RunDetail(str(CASES / "aborted_500")),
            "compare": lambda: CompareScreen(str(CASES / "aborted_500"), str(CASES / "some_never_ran")),
            "line": lambda: EvidenceScreen(str(CASES / "aborted_500"), Evidence("logs/policy_model.log", 3))}
    app = App()
    async with app.run_test(size=(120, 30)) as pilot:
        app.push_screen(made[screen]())
        if closed_by == "quit":
            app.exit()
            await pilot.pause()
        else:
            app.pop_screen()                      # handled before the screen's Mount
            for _ in range(5):
                await pilot.pause()
            assert app.return_code is None and len(app.screen_stack) == 1
        assert started == []
    assert app.return_code == (0 if closed_by == "quit" else None)


# --- what a new user hits (issue 33) ---------------------------------------------------------
PROBLEM_COUNTS = ("failed", "never_ran", "missing")


def _unused(widths: dict[str, int], cols: list[str], run: int, room: int) -> int:
    return room - sum((run if k == "run" else widths[k]) + 2 for k in cols)


def test_fit_keeps_the_problem_counts_and_leaves_no_room_a_dropped_column_fits():
    """At 80 columns the list kept `run verdict ok missing` and dropped failed and never ran while
    ~18 columns stayed empty: a column dropped for the run's room was never taken back."""
    widths = {k: len(h) + 2 for k, h in COLUMNS} | {"run": 30, "verdict": 18, "started": 16, "name": 30,
                                                     "servers": 12}
    for room, run_natural in ((78, 30), (78, 22), (78, 40), (98, 30), (118, 30)):
        w = widths | {"run": run_natural}
        cols, run = fit(w, room)
        assert cols[:2] == ["run", "verdict"] and set(PROBLEM_COUNTS) <= set(cols), (room, cols)
        left = _unused(w, cols, run, room)
        assert left >= 0, (room, cols)
        if run == run_natural:          # the run whole: no other column would have fitted as well
            assert all(w[k] + 2 > left for k, _ in COLUMNS if k not in cols), (room, run_natural, cols, left)
        else:                           # the run cut: every column it is cut for is one that fits
            assert run >= RUN_MIN and left == 0, (room, cols, run)


async def test_at_80_columns_the_problem_counts_show_and_the_width_is_used(tmp_path):
    long = tmp_path / "runs" / "sweep_a"
    for name in CASE_NAMES[:4]:
        shutil.copytree(CASES / name, long / f"{name}_seed_1")
    app = BrowseApp(BrowseState([str(tmp_path / "runs")]))
    async with app.run_test(size=(80, 20)) as pilot:
        await wait_scanned(pilot, app)
        await pilot.pause()
        screen = app.screen
        assert set(PROBLEM_COUNTS) <= set(screen.columns), screen.columns
        header = screen.table.render_line(0).text
        for label in ("failed", "never ran", "missing"):
            assert label in header, header
        used = sum(screen._width(k) + 2 for k in screen.columns)
        dropped = [k for k, _ in COLUMNS if k not in screen.columns]
        assert used <= 78 and all(screen._widths[k] + 2 > 78 - used for k in dropped), (used, screen.columns)


async def test_the_title_names_the_sort_as_the_header_does(tmp_path):
    """The title said `sort: completed` over a column headed `ok` (and `never_ran` over `never ran`)."""
    root = make_tree(tmp_path / "runs")
    app = BrowseApp(BrowseState([str(root)]))
    async with app.run_test(size=(200, 20)) as pilot:
        await wait_scanned(pilot, app)
        screen = app.screen
        title = lambda: str(screen.query_one("#browse-title").render())   # noqa: E731
        labels = dict(COLUMNS)
        for _ in COLUMNS:
            await pilot.press("s")
            await pilot.pause()
            header = screen.table.render_line(0).text
            label = labels[screen.listing.sort]
            assert f"sort: {label}" in title() and f"{label} ▼" in header, (title(), header)
        assert labels["completed"] == "completed"       # the trials' status, as the live screen and report say


async def test_j_and_k_move_down_and_up_the_list(tmp_path):
    root = make_tree(tmp_path / "runs")
    app = BrowseApp(BrowseState([str(root)]))
    async with app.run_test(size=(150, 20)) as pilot:
        await wait_scanned(pilot, app)
        table = app.screen.table
        assert table.cursor_row == 0
        await pilot.press("j", "j")
        assert table.cursor_row == 2
        await pilot.press("k")
        assert table.cursor_row == 1


async def test_a_filter_that_matches_nothing_says_so_and_how_to_clear_it(tmp_path):
    root = make_tree(tmp_path / "runs")
    app = BrowseApp(BrowseState([str(root)]))
    async with app.run_test(size=(100, 20)) as pilot:
        await wait_scanned(pilot, app)
        screen = app.screen
        empty = screen.query_one("#browse-empty")
        assert not empty.display
        await pilot.press("slash", *"xyz[b]", "enter")
        await pilot.pause()
        assert screen.table.row_count == 0 and empty.display
        said = str(empty.render())
        assert "no run matches `xyz[b]`" in said and "escape" in said, said
        await pilot.press("escape")
        await pilot.pause()
        assert screen.table.row_count == len(CASE_NAMES) and not empty.display
        await pilot.press("v", "v", "slash", *"mixed", "enter")         # startup_failed, and a word it lacks
        await pilot.pause()
        said = str(empty.render())
        assert empty.display and "no run matches `mixed`" in said and "startup_failed" in said, said


async def test_a_root_without_runs_says_so(tmp_path):
    (tmp_path / "empty").mkdir()
    app = BrowseApp(BrowseState([str(tmp_path / "empty")]))
    async with app.run_test(size=(100, 20)) as pilot:
        await wait_scanned(pilot, app)
        await pilot.pause()
        empty = app.screen.query_one("#browse-empty")
        assert empty.display and "no run found under" in str(empty.render()) and "r rescans" in str(empty.render())


def test_a_sampled_logs_tail_lines_are_numbered_from_its_end(tmp_path):
    """A big log is read in part (its head and tail): the head's lines are numbered from the
    start, the tail's from the end (-1: the last line), never made-up numbers from the start."""
    from gymwatch.browse.summary import HEAD, TAIL, HeadTail
    from gymwatch.core.model import Evidence

    lines = [f"line {i:07d} " + "x" * 60 for i in range(1, 20001)]
    path = tmp_path / "big.log"
    path.write_text("\n".join(lines) + "\n")
    assert path.stat().st_size > HEAD + TAIL
    batch = HeadTail(str(path)).read(final=True)
    numbered = {n: raw.decode() for n, raw in batch.lines}
    assert numbered[1] == lines[0] and numbered[-1] == lines[-1] and numbered[-2] == lines[-2]
    assert all(lines[n - 1] == text if n > 0 else lines[n] == text for n, text in numbered.items())
    blocks = HeadTail(str(path)).read(final=True, blocks=True).blocks
    assert [first for first, _ in blocks] == [1, min(n for n in numbered if n < 0)]
    assert Evidence("big.log", -1).where() == "big.log (its last line)"
    assert Evidence("big.log", -3).where() == "big.log (3 lines from its end)"
