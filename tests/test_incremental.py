"""Feeding a run's files in random-sized chunks gives the same model as reading them whole."""

import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import CASES, CASES07, FIXTURES, MCQA, RECORDED0506, RECORDED070
from gymwatch.core.session import RunSession, read_run
from gymwatch.core.verdict import verdict
from gymwatch.report import to_json

CASE_NAMES = ["aborted_500", "some_never_ran", "startup_failed", "evaluator_bundle", "live_timeline"]
# Every recorded run of every Gym version, for the chunked-read property.
CHUNKED = [CASES / c for c in CASE_NAMES] + sorted(CASES07.glob("g07_*")) + \
    sorted(p for p in (FIXTURES / "gym-0.4.0-recorded").iterdir() if p.is_dir()) + \
    sorted(p for p in RECORDED0506.iterdir() if p.is_dir()) + sorted(p for p in RECORDED070.iterdir() if p.is_dir()) + \
    [MCQA / c for c in ("run_ok", "run_fail", "startup_failure")]


def normalised(state) -> dict:
    data = to_json(state)
    data.pop("root")
    data["servers"] = sorted(data["servers"], key=lambda s: s["name"])
    data["malformed"]["lines"].sort(key=lambda m: (m["file"], m["line"]))
    return data


def files_of(src):
    return sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(src=st.sampled_from(CHUNKED), seed=st.randoms(use_true_random=False),
       steps=st.integers(min_value=1, max_value=40))
def test_chunked_equals_whole(tmp_path_factory, src, seed, steps):
    whole = normalised(read_run(str(src), check_processes=False).state)

    dst = tmp_path_factory.mktemp("live")
    rels = files_of(src)
    contents = {r: (src / r).read_bytes() for r in rels}
    # Directories and manifests first (as Gym makes them), then bytes appended in random pieces.
    for r in rels:
        (dst / r).parent.mkdir(parents=True, exist_ok=True)
    written = {r: 0 for r in rels}
    session = None
    for _ in range(steps):
        r = seed.choice(rels)
        left = len(contents[r]) - written[r]
        if left <= 0:
            continue
        n = seed.randint(1, left)
        with open(dst / r, "ab") as fh:
            fh.write(contents[r][written[r]:written[r] + n])
        written[r] += n
        if session is None:
            try:
                session = RunSession.open(str(dst), check_processes=False)
            except Exception:
                continue
        session.poll()
    for r in rels:
        with open(dst / r, "ab") as fh:
            fh.write(contents[r][written[r]:])
    if session is None:
        session = RunSession.open(str(dst), check_processes=False)
    session.poll()
    session.poll(final=True)
    got = normalised(session.state)
    if split_streams(src):
        got, whole = without_last_lines(got), without_last_lines(whole)
    assert got == whole
    shutil.rmtree(dst, ignore_errors=True)


def split_streams(run) -> bool:
    """Each server's output is in Gym's stdout and stderr both (no per-server logs)."""
    return (run / "gym_env_start.stderr.log").exists() and not (run / "logs").exists()


def test_polls_with_a_time_budget_catch_up_to_the_same_model(tmp_path, monkeypatch):
    """The live screen polls with a time budget, so a huge log is read over several polls:
    each poll says what is behind, and the end result is the model of one whole read."""
    import gymwatch.core.session as session_mod
    import gymwatch.core.tail as tail_mod
    monkeypatch.setattr(session_mod, "LIVE_SLICE", 64 << 10)
    monkeypatch.setattr(tail_mod, "CHUNK", 16 << 10)
    run = tmp_path / "run"
    shutil.copytree(CASES / "mixed_ok", run)
    log = run / "logs" / "policy_model.log"
    with log.open("a") as fh:
        for i in range(20_000):
            fh.write(f'(policy_model) INFO:     127.0.0.1:{i} - "POST /v1/responses HTTP/1.1" 200 OK\n')
            if i % 997 == 0:
                fh.write("(policy_model) [model_retry url=http://x/v1 status=500 kind=server attempt=1]\n")
    whole = read_run(str(run), check_processes=False)
    session = RunSession.open(str(run), check_processes=False, clock=lambda: 1000.0)
    polls, seen = 0, []
    while True:
        session.poll(budget=0.0)       # one slice of each file per poll
        polls += 1
        if not session.behind:
            break
        seen.append(session.behind["logs/policy_model.log"][0])
        assert session.state.servers["policy_model"].ready_at is None     # catching up: untimed
    assert polls > 10 and seen == sorted(seen) and len(set(seen)) == len(seen)
    session.poll(final=True)
    assert normalised(session.state) == normalised(whole.state)


def test_no_trial_is_missing_while_rows_are_still_being_read(tmp_path, monkeypatch):
    """A finished run read over budgeted polls: until its rows are all read, the pending trials
    are not missing and the verdict is not concluded."""
    import gymwatch.core.session as session_mod
    import gymwatch.core.tail as tail_mod
    monkeypatch.setattr(session_mod, "LIVE_SLICE", 2 << 10)
    monkeypatch.setattr(tail_mod, "CHUNK", 2 << 10)
    run = tmp_path / "run"
    shutil.copytree(CASES / "mixed_ok", run)
    session = RunSession.open(str(run), check_processes=False)
    session.poll(budget=0.0)
    assert session.behind and session.state.reading
    assert verdict(session.state).name == "collecting"
    assert not any(t.status == "missing" for t in session.state.trials.values())
    while session.behind:
        session.poll(budget=0.0)
    assert not session.state.reading and verdict(session.state).name == "ok"


@pytest.mark.parametrize("case", CASE_NAMES + ["mixed_ok"])
def test_logs_read_after_gyms_own_output_give_the_same_model(tmp_path, case):
    """Files are tailed separately, so Gym's report of a server (its banner, `Process X finished
    unexpectedly!`) can be read before the server's own lines: the model must not depend on it."""
    src = CASES / case
    whole = normalised(read_run(str(src), check_processes=False).state)
    dst = tmp_path / case
    shutil.copytree(src, dst)
    assert read_held_back(dst, lambda p: p.parent.name == "logs" and p.suffix == ".log") == whole


def read_held_back(dst, held_back) -> dict:
    """The model of the run in `dst` read in two polls: first without the files `held_back(path)`
    picks (emptied), then with them whole again, last written when they were (a collection's pace
    is judged by its files' last writes: core/pace.py)."""
    held = {p: p.read_bytes() for p in dst.rglob("*") if p.is_file() and held_back(p)}
    times = {p: p.stat() for p in held}
    for p in held:
        p.write_bytes(b"")
        os.utime(p, ns=(times[p].st_atime_ns, times[p].st_mtime_ns))
    session = RunSession.open(str(dst), check_processes=False)
    session.poll()
    for p, data in held.items():
        p.write_bytes(data)
        os.utime(p, ns=(times[p].st_atime_ns, times[p].st_mtime_ns))
    session.poll()
    session.poll(final=True)
    return normalised(session.state)


LOGGED = [CASES / c for c in ("aborted_500", "live_timeline", "mixed_ok", "some_never_ran", "startup_failed")] + \
    sorted(CASES07.glob("g07_*"))


@pytest.mark.parametrize("src", LOGGED, ids=lambda p: p.name)
def test_any_one_server_log_read_first_gives_the_same_model(tmp_path, src):
    """What a server's log says of the whole run (its access lines bound Gym's version) must not
    depend on which server's log happened to be read first."""
    whole = normalised(read_run(str(src), check_processes=False).state)
    logs = sorted(p.name for p in (src / "logs").glob("*.log"))
    assert len(logs) >= 2
    for first in logs:
        dst = tmp_path / first
        shutil.copytree(src, dst)
        assert read_held_back(dst, lambda p, first=first: p.name != first) == whole, first


@pytest.mark.parametrize("src", sorted(p for d in (RECORDED0506, RECORDED070, FIXTURES / "gym-0.4.0-recorded")
                                       for p in d.iterdir() if (p / "gym_eval_run.stderr.log").exists()),
                         ids=lambda p: p.name)
def test_any_one_captured_stream_read_first_gives_the_same_model(tmp_path, src):
    """Without per-server logs a server's output is split between Gym's stdout and stderr: uvicorn's
    `Shutting down` on stderr must not silence the errors it printed on stdout before, whichever
    file is read first (stderr sorts first: a run's every model error was lost)."""
    whole = without_last_lines(normalised(read_run(str(src), check_processes=False).state))
    streams = sorted(p.name for p in src.glob("gym_*.log"))
    assert len(streams) == 4
    for first in streams:
        dst = tmp_path / first
        shutil.copytree(src, dst)
        got = read_held_back(dst, lambda p, first=first: p.name != first and p.name in streams)
        assert without_last_lines(got) == whole, first


def without_last_lines(data: dict) -> dict:
    """A server's last line is the last one to arrive: between two files with no timestamps, that
    is the order they are read in, and rightly so; so are the related lines and trial causes that
    are one."""
    lasts = [s.pop("last_line") for s in data["servers"]]

    def other(e) -> bool:
        return not (e and any(last and e["text"].endswith(last) for last in lasts))
    data["related"] = [e for e in data["related"] if other(e)]
    for t in data["trials"]:         # a trial whose cause is its agent's last line (nothing else explains it)
        t["cause_chain"] = [e for e in t["cause_chain"] if other(e)]
        t["cause"] = t["cause"] if other(t["cause"]) else None
    return data


def test_trials_that_turn_missing_are_reported_as_changed(tmp_path):
    """Reducer.settle() marks pending trials missing once the collector has ended: a view updating
    only changed trials must hear of them."""
    src = CASES / "aborted_500"
    run = tmp_path / "run"
    shutil.copytree(src, run)
    # the collector's traceback comes later, and so does Gym's `NeMo Gym finished!` (its servers gone,
    # no row can come either)
    later = [run / "gym_eval_run.stderr.log", run / "gym_env_start.stdout.log"]
    held = [p.read_bytes() for p in later]
    for p in later:
        p.write_bytes(b"")
    session = RunSession.open(str(run), check_processes=False)
    session.poll()
    pending = {k for k, t in session.state.trials.items() if t.status == "pending"}
    assert pending
    for p, data in zip(later, held, strict=True):
        p.write_bytes(data)
    changes = session.poll()
    missing = {k for k, t in session.state.trials.items() if t.status == "missing"}
    assert missing == pending and missing <= changes.trials


def test_what_settle_concludes_about_servers_is_reported_as_a_change():
    """A server Gym names as dead is failed by Reducer.settle: views that redraw only what
    changed must hear of it, and a second settle changes nothing."""
    from gymwatch.core.layout import ENV
    from gymwatch.core.model import RunState
    from gymwatch.core.reducer import Reducer

    st = RunState(root="/r")
    r = Reducer(st)
    r.server_log_line("mcqa", "logs/mcqa.log", 1, "INFO:     Started server process [41]")
    r.stream_line(ENV, "gym_env_start.stderr.log", 1, "RuntimeError: Process `mcqa` finished unexpectedly!")
    r.take_changes()
    r.settle(5.0)
    changes = r.take_changes()
    assert st.servers["mcqa"].state == "failed" and "mcqa" in changes.servers and changes.run
    r.settle(5.0)
    assert not r.take_changes()
