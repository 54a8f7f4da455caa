"""`gymwatch report --format json` on real `gym eval submit` runs (nemo-gym 0.7.0) on the real test
Slurm (tests/slurmrig.py), while they run and after: a service that dies during startup, a job
that stays queued (and `gymwatch stop` cancelling it), a driver that aborts, and a resume chain
whose first link hits its walltime and whose next link completes the run (the completed run: its
normal end is no failure). Each with Slurm asked, and once from the files alone. Never skipped
(`make test` installs Slurm and Gym 0.7.0). Kept short: one submission a case, a two-minute walltime."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest_slurm import slurm_gym, slurm_rig  # noqa: F401

pytestmark = [pytest.mark.realslurm, pytest.mark.timeout(900)]


def report(slurm_gym, path: Path, *args: str) -> tuple[int, dict]:
    res = subprocess.run([sys.executable, "-m", "gymwatch", "report", "--format", "json", *args, str(path)],
                         env=slurm_gym.env, capture_output=True, text=True, timeout=120)
    assert res.returncode in (0, 1, 2), res.stderr
    return res.returncode, json.loads(res.stdout)


def watched(slurm_gym, sub, timeout: float, every: float = 3.0) -> list[str]:
    """The verdicts `gymwatch report` gave while the submission ran, each change once, until
    every job ended."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        sub.poll()
        if sub.run_dir is not None and (sub.run_dir / "gym-job.json").is_file() and sub.jobs:
            _, d = report(slurm_gym, sub.run_dir)
            if not seen or seen[-1] != d["verdict"]:
                seen.append(d["verdict"])
        if sub.done(settle=2):
            return seen
        assert time.monotonic() < deadline, f"still running after {timeout:.0f}s: {sub.states()}; seen {seen}"
        time.sleep(every)


def test_a_service_that_dies_during_startup(slurm_gym):
    sub = slurm_gym.submit("watch-dies", {"services": {"policy": {"extra_args": "--stub-mode die"}}})
    seen = watched(slurm_gym, sub, 300)
    [jid] = sub.job_ids()
    code, d = report(slurm_gym, sub.run_dir)
    assert code == 2 and d["verdict"] == "startup_failed" and seen[-1] == "startup_failed"
    assert d["reason"] == (f"service policy (job {jid}) died during startup: exit code 1: RuntimeError: stand-in "
                           "vllm: told to die during startup (--stub-mode die)")
    assert d["evidence"]["file"] == f"mcqa/logs/policy-{jid}.log"
    [link] = d["job"]["links"]
    assert (link["state"], link["source"], link["exit_code"]) == ("FAILED", "slurm", 1)
    [policy] = [s for s in d["servers"] if s["kind"] == "service"]
    assert (policy["name"], policy["state"]) == ("policy", "failed")
    code, alone = report(slurm_gym, sub.run_dir, "--no-slurm")
    assert code == 2 and alone["reason"] == d["reason"] + " (Slurm state inferred from files)"


def test_a_queued_job_then_stopped(slurm_gym):
    sub = slurm_gym.submit("watch-held", {"compute": {"local": {"extra_args": {"begin": "now+1hour"}}}})
    sub.wait(lambda s: any(f["STATE"] == "PENDING" and f["REASON"] == "BeginTime" for f in s.jobs.values()),
             120, "the job to wait for its begin time")
    [jid] = sub.job_ids()
    code, d = report(slurm_gym, sub.run_dir)
    assert code == 0 and d["verdict"] == "queued", d["reason"]
    assert d["reason"].startswith(f"job {jid} queued ") and ": waiting for its begin time; Slurm expects it to " \
        "start at " in d["reason"]
    assert d["job"]["conclusion"]["phase"] == "queued" and not d["job"]["conclusion"]["inferred"]
    assert [s["state"] for s in d["servers"]] == ["pending"]
    stop = subprocess.run([sys.executable, "-m", "gymwatch", "stop", str(sub.run_dir)], env=slurm_gym.env,
                          capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0, stop.stderr
    sub.wait_done(timeout=120, settle=2)
    code, d = report(slurm_gym, sub.run_dir)
    assert (code, d["verdict"], d["reason"]) == (1, "incomplete", f"job {jid} was cancelled before it started")
    code, alone = report(slurm_gym, sub.run_dir, "--no-slurm")      # no output: it never ran, as far as files say
    assert (code, alone["verdict"]) == (0, "queued") and alone["job"]["conclusion"]["inferred"]


def test_a_driver_that_aborts(slurm_gym):
    sub = slurm_gym.submit("watch-aborts", {"services": {"policy": {"extra_args": "--stub-mode fail --stub-fail-after 4"}}})
    seen = watched(slurm_gym, sub, 400)
    [jid] = sub.job_ids()
    assert "starting" in seen and seen[-1] == "collection_aborted", seen
    code, d = report(slurm_gym, sub.run_dir)
    assert code == 2 and d["verdict"] == "collection_aborted"
    assert d["reason"].startswith("the collector aborted: ") and f"; job {jid} failed" in d["reason"]
    assert "stand-in vllm: told to fail every request" in d["reason"]
    [link] = d["job"]["links"]
    assert (link["state"], link["source"]) == ("FAILED", "slurm")
    assert d["evidence"]["file"] == f"mcqa/logs/driver-{jid}.log"
    assert 0 < d["counts"]["completed"] < 10


def test_a_walltime_timeout_resumed_by_the_next_link_that_completes_the_run(slurm_gym):
    """A resumable benchmark with a two-minute walltime (Gym's own start takes about one) and a
    slow model: its first link hits its time limit; the model is made fast then (the stand-in
    reads its delay from a file), and the next link, resuming, completes the run."""
    delay = slurm_gym.ws.root / "watch-chain-delay"
    delay.write_text("30")
    sub = slurm_gym.submit("watch-chain", {
        "compute": {"local": {"walltime": "00:02:00"}},
        "services": {"policy": {"extra_args": f"--stub-reply-delay-file {delay}"}},
        "driver": {"benchmarks": {"mcqa": {"resumable": {"max_retries": 2}}}}})
    seen: list[str] = []

    def timed_out(s) -> bool:
        if s.run_dir is not None and (s.run_dir / "gym-job.json").is_file() and s.jobs:
            _, d = report(slurm_gym, s.run_dir)
            if not seen or seen[-1] != d["verdict"]:
                seen.append(d["verdict"])
        return "TIMEOUT" in s.states().values()
    sub.wait(timed_out, 300, "the first link to hit its time limit")
    delay.write_text("0")
    for v in watched(slurm_gym, sub, 400):
        if not seen or seen[-1] != v:
            seen.append(v)
    code, d = report(slurm_gym, sub.run_dir)
    assert code == 0 and d["verdict"] == "ok" and d["reason"] == "10 trials completed", d["reason"]
    assert "starting" in seen and seen[-1] == "ok", seen
    links = d["job"]["links"]
    states = [ln["state"] for ln in links]
    assert states[0] == "TIMEOUT" and "COMPLETED" in states and all(ln["source"] == "slurm" for ln in links)
    done = states.index("COMPLETED")
    assert links[done]["action"].startswith(f"resumed job {links[done - 1]['job_id']} (TIMEOUT)")
    assert all(ln["not_needed"] for ln in links[done + 1:])           # the successor cancelled: not needed
    assert d["job"]["conclusion"]["phase"] == "ended" and not d["job"]["conclusion"]["failed"]
    assert d["job"]["services"][0]["state"] == "ended"                  # killed by the job's end: no failure
    assert sum(ln["rows_written"] or 0 for ln in links) == 10
    code, alone = report(slurm_gym, sub.run_dir, "--no-slurm")
    assert (code, alone["verdict"]) == (0, "ok") and alone["job"]["links"][0]["state"] == "TIMEOUT"


async def test_the_submission_screen_shows_a_held_benchmark_queued_and_the_other_running(slurm_gym, monkeypatch):
    """Two benchmarks, each job asking for both CPUs of the node: one runs, the other waits; that one
    is then held for an hour (its begin time). The submission's screen, headless (Pilot) with Slurm
    asked as on a cluster, shows one row queued with its reason and one running."""
    import asyncio

    from gymwatch.tui.app import GymwatchApp
    from gymwatch.tui.subscreen import SubmissionScreen
    from gymwatch.tui.watch import queue_source
    from tuihelpers import screen_lines, wait_for

    sub = slurm_gym.submit("watch-screen", {"compute": {"local": {"extra_args": {"cpus-per-task": "2"}}},
                                            "driver": {"benchmarks": {"mcqa_again": {"run": {}}}}})
    sub.wait(lambda s: sorted(s.states().values()) == ["PENDING", "RUNNING"], 120, "one job running, one queued")
    held = next(j for j, st in sub.states().items() if st == "PENDING")
    sub.act("held for an hour", "scontrol", "update", f"JobId={held}", "StartTime=now+1hour")
    sub.wait(lambda s: s.jobs[held]["REASON"] == "BeginTime", 60, "the queued job to wait for its begin time")
    names = {j: f["NAME"].removeprefix("gym-") for j, f in sub.jobs.items()}
    running = next(j for j in names if j != held)
    for key, value in slurm_gym.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("GYMWATCH_NO_SLURM", raising=False)
    app = GymwatchApp(str(sub.run_dir), change_source=queue_source(asyncio.Queue()), tick=0.5, animations=False)

    def row(name: str) -> str:
        return next((ln for ln in screen_lines(app) if ln.startswith(f"│ {name} ")), "")

    try:
        async with app.run_test(size=(200, 50)) as pilot:
            assert isinstance(app.screen, SubmissionScreen)
            assert await wait_for(pilot, lambda: "running on " in row(names[running])
                                  and "waiting for its begin time" in row(names[held]), tries=1500), \
                "\n".join(screen_lines(app))
            queued = row(names[held])
            assert f" {held} " in queued and "queued " in queued and "◌ QUEUED" in queued
            assert "Slurm expects it to start at " in queued
            up = row(names[running])
            assert f" {running} " in up and " of 20:00" in up
            assert "QUEUED" not in up and "(from files)" not in up
    finally:
        sub.act("cancelled at the end of the test", "scancel", *sub.job_ids())
        sub.wait_done(timeout=120, settle=2)
