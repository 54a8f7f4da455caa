"""The screen of a submission of several benchmarks (Pilot): a row per benchmark with its Slurm
job in words, its verdict and trials, the whole's verdict on top (the report's); enter opens a
benchmark's own screen, escape comes back. Slurm's answers come from fake squeue / sacct on PATH
(tests/fakeslurm.py) over the recorded files as they were at a moment (tests/submissions.py)."""

from __future__ import annotations

import pytest

from fakeslurm import FakeSlurm
from gymwatch.core.cluster import record
from gymwatch.core.jobsession import read_submission
from gymwatch.core.slurmfeed import NO_SLURM_ENV, SlurmFeed
from gymwatch.core.verdict import verdict
from gymwatch.report import whole
from gymwatch.tui.app import GymwatchApp
from gymwatch.tui.livesub import LiveSubmission
from gymwatch.tui.screen import MainScreen
from gymwatch.tui.subscreen import SubmissionScreen
from submissions import PENDING_RUNNING, grown, pending_running, run_dir
from tuihelpers import FakeClock, pending_running_app, screen_lines, submission_app, wait_for

WIDE = (200, 50)


@pytest.fixture(autouse=True)
def no_slurm_unless_faked(monkeypatch):
    """Files alone unless a test gives a fake Slurm (this machine's own Slurm is not asked)."""
    monkeypatch.setenv(NO_SLURM_ENV, "1")


def faked(tmp_path, monkeypatch, **jobs) -> tuple[GymwatchApp, FakeSlurm]:
    """The recorded two-benchmark submission 61 s in (mcqa's job running, mcqa_again's queued for
    resources), Slurm faked as it answered then; `jobs`: a job's answer changed (by id)."""
    monkeypatch.delenv(NO_SLURM_ENV, raising=False)
    fake = FakeSlurm(tmp_path, monkeypatch)
    app = pending_running_app(tmp_path / "runs", fake)
    if jobs:
        data = fake.load()
        for job_id, change in jobs.items():
            data["jobs"][job_id.lstrip("j")].update(change)
        fake.save(data)
    return app, fake


def row(lines: list[str], name: str) -> str:
    return next(ln for ln in lines if ln.startswith(f"│ {name} "))


async def test_a_queued_and_a_running_benchmark_each_in_a_row_with_the_whole_verdict_on_top(tmp_path, monkeypatch):
    app, fake = faked(tmp_path, monkeypatch)
    async with app.run_test(size=WIDE) as pilot:
        screen = app.screen
        assert isinstance(screen, SubmissionScreen)
        assert await wait_for(pilot, lambda: screen.mounted.is_set())
        lines = screen_lines(app)
        running = row(lines, "mcqa")
        assert "601" in running and "running on vm for 1:00 of 20:00" in running and "▶ COLLECTING" in running
        queued = row(lines, "mcqa_again")
        assert "602" in queued and "◌ QUEUED" in queued
        assert ("queued 1:01: waiting for resources: the nodes it needs are busy; Slurm expects it to start at "
                "2026-12-06T06:51:33") in queued
        # the whole's verdict is the report's (its worst benchmark's), with that benchmark named
        name, v = whole(live_benchmarks(app))
        assert (name, v.name) == ("mcqa", "collecting")
        assert lines[0].startswith("  ▶ COLLECTING   gym-job-20261206T063132Z-95654b  2 benchmarks  queued 1  running 1")
        assert lines[1].strip() == v.reason and v.reason.startswith("mcqa: ")
    # Slurm asked once for the whole submission
    assert [c.split()[0] for c in fake.calls()] == ["squeue"]
    assert "--name=gym-mcqa,gym-mcqa_again" in fake.calls()[0]


def live_benchmarks(app: GymwatchApp):
    assert app.submission is not None
    return app.submission.benchmarks()


async def test_at_80x24_the_row_is_cut_and_the_selected_benchmark_s_line_says_it_whole(tmp_path, monkeypatch):
    app, _ = faked(tmp_path, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        assert await wait_for(pilot, lambda: app.sub_screen.mounted.is_set())
        await pilot.press("down")
        lines = screen_lines(app)
        assert all(len(ln) == 80 for ln in lines)
        queued = row(lines, "mcqa_again")
        assert "◌ QUEUED" in queued and "Slurm expects" not in queued     # cut to fit ...
        text = " ".join(ln.strip("│ ") for ln in lines)
        assert "mcqa_again  ◌ QUEUED job 602 queued 1:01: waiting for resources" in text   # ... whole under the table
        assert "Slurm expects it to start at 2026-12-06T06:51:33" in text
        assert "⏎ Open" in lines[-1]


async def test_a_job_near_its_time_limit_is_flagged_and_an_ended_one_says_how(tmp_path, monkeypatch):
    app, _ = faked(tmp_path, monkeypatch, j601=dict(elapsed="18:30"),
                   j602=dict(state="FAILED", reason="NonZeroExitCode", exit="1:0", elapsed="0:03", nodelist="vm",
                             start="2026-12-06T06:32:30"))
    async with app.run_test(size=WIDE) as pilot:
        assert await wait_for(pilot, lambda: app.sub_screen.mounted.is_set())
        lines = screen_lines(app)
        assert "⚠ running on vm for 18:30 of 20:00: near its time limit, 1:30 left" in row(lines, "mcqa")
        ended = row(lines, "mcqa_again")
        state = app.submission.session.sessions["mcqa_again"].state
        assert state.job_conclusion.headline in ended and "failed: exit code 1" in ended
        assert "? INCOMPLETE" in ended and verdict(state).name == "incomplete"
        assert "ended 1" in lines[0] and "running 1" in lines[0]


async def test_enter_opens_the_benchmark_s_own_screen_and_escape_comes_back(tmp_path, monkeypatch):
    app, _ = faked(tmp_path, monkeypatch)
    async with app.run_test(size=(120, 30)) as pilot:
        assert await wait_for(pilot, lambda: app.sub_screen.mounted.is_set())
        await pilot.press("enter")                 # the first row: mcqa
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen) and app.run_shown)
        lines = screen_lines(app)
        text = "\n".join(lines)
        assert "mcqa · gym-job-20261206T063132Z-95654b" in lines[0]
        assert "esc: back to the submission" in text
        policy = next(ln for ln in lines if "│ policy " in ln)
        assert "svc" in policy and "● ready" in policy          # its service step on the board
        assert "mcqa_environment_server" in text                  # and Gym's own servers
        await pilot.press("l")                                     # a server's log opens as for any run
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: app.screen is app.sub_screen)
        assert "mcqa_again" in "\n".join(screen_lines(app))
        await pilot.press("down", "enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen) and app.run_shown)
        assert "mcqa_again · gym-job" in screen_lines(app)[0]
        assert "QUEUED" in screen_lines(app)[0]


async def test_a_maximized_pane_is_restored_by_escape_before_it_goes_back(tmp_path, monkeypatch):
    app, _ = faked(tmp_path, monkeypatch)
    async with app.run_test(size=(120, 30)) as pilot:
        assert await wait_for(pilot, lambda: app.sub_screen.mounted.is_set())
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen) and app.run_shown)
        await pilot.press("z")
        assert await wait_for(pilot, lambda: app.screen.maximized is not None)
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: app.screen.maximized is None)
        assert isinstance(app.screen, MainScreen)
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: app.screen is app.sub_screen)


async def test_attach_on_a_submission_of_several_benchmarks_opens_the_submission_screen():
    """From files alone, through the path the user names (gymwatch attach DIR)."""
    sub = run_dir("two_benchmarks_one_waits")
    app = submission_app(str(sub))
    async with app.run_test(size=WIDE) as pilot:
        assert await wait_for(pilot, lambda: app.sub_screen is not None and app.sub_screen.mounted.is_set())
        lines = screen_lines(app)
        assert "completed (from files)" in row(lines, "mcqa") and "10/10" in row(lines, "mcqa")
        assert "✓ OK" in row(lines, "mcqa_again")
        ss = read_submission(record.resolve(sub), slurm=False)
        _, v = whole([(n, s.state, verdict(s.state)) for n, s in ss.sessions.items()])
        assert lines[0].startswith("  ✓ OK ") and lines[1].strip() == v.reason
        await pilot.press("question_mark")                     # the help lists the submission's keys
        assert await wait_for(pilot, lambda: "open one benchmark's own screen" in "\n".join(screen_lines(app)))


async def test_the_screen_follows_the_files_and_slurm_as_they_change(tmp_path, monkeypatch):
    """Polls of the live screen (a worker, on the watcher's hints) read the benchmarks' new lines,
    and Slurm's new answers (asked in the background, taken by the next poll)."""
    monkeypatch.delenv(NO_SLURM_ENV, raising=False)
    fake = FakeSlurm(tmp_path, monkeypatch)
    root = pending_running(tmp_path / "runs", fake)
    feed = SlurmFeed(record.resolve(root), interval=0.0)
    live = LiveSubmission(record.resolve(root), clock=FakeClock(), feed=feed)
    app = submission_app(live)

    async def polled_until(cond) -> bool:
        for _ in range(100):
            if cond():
                return True
            app.hints.put_nowait({root / "x"})
            await pilot.pause(0.05)
        return cond()

    async with app.run_test(size=WIDE) as pilot:
        assert await polled_until(lambda: "running on vm for 1:00" in row(screen_lines(app), "mcqa"))
        grown(PENDING_RUNNING, 80.0, tmp_path / "runs")         # mcqa wrote its rows; mcqa_again started
        data = fake.load()
        data["jobs"]["601"].update(state="COMPLETED", elapsed="1:14")
        data["jobs"]["602"].update(state="RUNNING", reason="None", nodelist="vm", elapsed="0:03")
        fake.save(data)
        assert await polled_until(lambda: "running on vm for 0:03 of 20:00" in row(screen_lines(app), "mcqa_again"))
        assert await polled_until(lambda: "10/10" in row(screen_lines(app), "mcqa"))
        assert "completed" in row(screen_lines(app), "mcqa")
