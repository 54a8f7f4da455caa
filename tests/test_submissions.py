"""Submitted runs (`gym eval submit`) through the commands and the session: every recorded
submission read from its files alone with the right verdict and facts; what the user names
(a submission dir, a job dir, a record, a gym job id); Slurm asked through its own commands (a fake
squeue / sacct on PATH: tests/fakeslurm.py), once per poll for a whole submission; the report of a
submission of several benchmarks in every format; diff per benchmark; attach on one benchmark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fakeslurm import FakeSlurm
from gymwatch.core import target
from gymwatch.core.cluster import record
from gymwatch.core.cluster.slurmcli import Ran
from gymwatch.core.joblayout import SLURM_JOB
from gymwatch.core.jobsession import SubmissionSession, read_submission
from gymwatch.core.layout import BOTH, NotARun
from gymwatch.core.model import (
    EXITED,
    FAILED,
    K_SERVICE,
    PENDING,
    T_COMPLETED,
    V_COLLECTION_ABORTED,
    V_INCOMPLETE,
    V_OK,
    V_QUEUED,
    V_STARTUP_FAILED,
)
from gymwatch.core.session import RunSession, read_run
from gymwatch.core.slurmfeed import NO_SLURM_ENV, SlurmFeed
from gymwatch.core.verdict import verdict
from submissions import copy, final_poll, grown, run_dir

# (case, verdict, exit code, the chain's link states, the service's state) from files alone
FROM_FILES = [
    ("completed", V_OK, 0, ["COMPLETED"], EXITED),
    ("real_mcqa_cold", V_OK, 0, ["COMPLETED"], EXITED),
    ("svc_dies_at_startup", V_STARTUP_FAILED, 2, ["FAILED"], FAILED),
    ("svc_never_healthy_timeout", V_STARTUP_FAILED, 2, ["FAILED"], FAILED),
    ("resumable_chain_svc_dies_with_sacct", V_STARTUP_FAILED, 2, ["FAILED", "FAILED", "FAILED", "FAILED"], FAILED),
    ("driver_aborts", V_COLLECTION_ABORTED, 2, ["FAILED"], EXITED),
    ("pending_cancelled", V_QUEUED, 0, [""], PENDING),
    ("pending_begintime_cancelled", V_QUEUED, 0, [""], PENDING),
    ("sbatch_refused", V_STARTUP_FAILED, 2, [], PENDING),
    ("timeout_resumed", V_OK, 0, ["TIMEOUT", "TIMEOUT", "TIMEOUT", "COMPLETED", "CANCELLED"], EXITED),
]


@pytest.fixture(autouse=True)
def no_slurm_unless_faked(monkeypatch):
    """Files alone unless a test gives a fake Slurm (this machine's own Slurm is not asked)."""
    monkeypatch.setenv(NO_SLURM_ENV, "1")


@pytest.mark.parametrize("case, want, code, links, service", FROM_FILES, ids=[c[0] for c in FROM_FILES])
def test_every_recorded_submission_from_its_files_alone(case, want, code, links, service):
    session = read_run(str(run_dir(case)))
    state = session.state
    v = verdict(state)
    assert (state.kind, v.name, v.exit_code) == (SLURM_JOB, want, code), v.reason
    assert [ln.state for ln in state.job.links] == links
    assert state.servers["policy"].kind == K_SERVICE and state.servers["policy"].state == service
    assert list(state.servers)[0] == "policy"          # the job's service steps come first
    assert state.job_conclusion.inferred is bool(links) or not links
    if links:
        assert v.reason.endswith("(Slurm state inferred from files)") or v.name == V_OK
    assert not state.malformed, state.malformed[:3]
    if want == V_OK:
        assert sum(t.status == T_COMPLETED for t in state.trials.values()) == 10
        assert state.servers["policy_model"].kind == "model"       # Gym's own servers, from the driver log
    assert not session.is_live() or want == V_QUEUED


def test_the_evidence_names_files_relative_to_the_submission_dir():
    state = read_run(str(run_dir("driver_aborts"))).state
    v = verdict(state)
    assert v.evidence.file == "mcqa/logs/driver-401.log"
    assert {t.evidence.file for t in state.trials.values() if t.evidence} == {
        "mcqa/artifacts/rollouts.jsonl", "mcqa/logs/driver-401.log"}     # rows, and the lines naming failures
    assert state.root == str(run_dir("driver_aborts"))


def test_a_job_s_logs_dir_is_never_read_as_gym_s_server_logs():
    """The issue's first complaint: `logs/driver-17.log` read as a server named `driver-17`."""
    session = read_run(str(run_dir("real_mcqa_cold") / "mcqa"))
    assert session.layout.kind == SLURM_JOB and session.layout.logs_dir is None
    assert not any(n.startswith(("driver", "policy-")) for n in session.state.servers)
    assert [(s.path.name, s.role) for s in session.layout.streams] == [("driver-17.log", BOTH)]
    assert session.layout.own_log("policy").name == "policy-17.log"


@pytest.mark.parametrize("how", ["dir", "job dir", "manifest", "index record", "gym job id"])
def test_what_the_user_names_resolves_to_the_same_run(tmp_path, monkeypatch, how):
    sub_dir = copy("completed", tmp_path)
    rec = json.loads((sub_dir / "gym-job.json").read_text())
    rec["run_dir"] = str(sub_dir)
    index = tmp_path / "xdg" / "nemo-gym" / "jobs"
    index.mkdir(parents=True)
    (index / f"{sub_dir.name}.json").write_text(json.dumps(rec))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path / "xdg")            # a gym job id is no path here
    named = {"dir": str(sub_dir), "job dir": str(sub_dir / "mcqa"), "manifest": str(sub_dir / "gym-job.json"),
             "index record": str(index / f"{sub_dir.name}.json"), "gym job id": sub_dir.name}[how]
    layout = target.run_layout(named)
    assert layout.kind == SLURM_JOB and layout.root == sub_dir
    assert layout.rollouts == sub_dir / "mcqa" / "artifacts" / "rollouts.jsonl"
    assert verdict(read_run(named).state).name == V_OK


def test_a_gym_run_is_still_a_gym_run():
    some = Path(__file__).parent / "fixtures" / "gym-0.7.0-cases" / "g07_some_never_ran"
    assert not target.is_submission(str(some))
    assert target.run_layout(str(some)).kind != SLURM_JOB


def test_a_gym_job_id_not_in_the_index_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotARun, match="no record of it in Gym's job index"):
        target.run_layout("gym-job-20261206T000000Z-abcdef")


# --- a submission of several benchmarks --------------------------------------------------------

def gymwatch(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    import os
    return subprocess.run([sys.executable, "-m", "gymwatch", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=cwd)


def test_a_submission_of_two_benchmarks_reports_the_whole_and_each():
    sub = run_dir("two_benchmarks_one_waits")
    res = gymwatch("report", "--format", "json", str(sub))
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["submission"]["gym_job_id"] == sub.name and d["submission"]["benchmarks"] == ["mcqa", "mcqa_again"]
    assert d["verdict"] == {"name": "ok", "reason": "mcqa: 10 trials completed", "exit_code": 0, "benchmark": "mcqa"}
    assert [b["job"]["benchmark"] for b in d["benchmarks"]] == ["mcqa", "mcqa_again"]
    assert [b["job"]["links"][0]["job_id"] for b in d["benchmarks"]] == ["601", "602"]
    assert all(b["kind"] == "slurm_job" and b["verdict"] == "ok" for b in d["benchmarks"])
    text = gymwatch("report", str(sub)).stdout.splitlines()
    assert text[0] == "OK: mcqa: 10 trials completed"
    assert "  mcqa        OK: 10 trials completed" in text and "=== mcqa_again ===" in text
    md = gymwatch("report", "--format", "md", str(sub)).stdout
    assert md.startswith(f"# gymwatch report: submission {sub.name}: OK") and "\n## mcqa_again: OK\n" in md
    junit = gymwatch("report", "--format", "junit", str(sub)).stdout
    assert junit.count("<testsuite ") == 2 and 'name="mcqa_again"' in junit


def test_the_whole_verdict_is_the_worst_benchmark_s(tmp_path):
    sub = copy("two_benchmarks_one_waits", tmp_path)
    (sub / "mcqa_again" / "artifacts" / "rollouts.jsonl").write_text("")        # its rows lost
    (sub / "mcqa_again" / "artifacts" / "rollouts_aggregate_metrics.json").unlink()
    log = sub / "mcqa_again" / "logs" / "driver-602.log"
    log.write_text(log.read_text().replace("Finished rollout collection!", "Collecting went on"))
    res = gymwatch("report", "--format", "json", str(sub))
    d = json.loads(res.stdout)
    assert res.returncode == 1 and d["verdict"]["benchmark"] == "mcqa_again"
    assert d["verdict"]["name"] == V_INCOMPLETE and d["verdict"]["reason"].startswith("mcqa_again: ")
    assert [b["verdict"] for b in d["benchmarks"]] == ["ok", "incomplete"]


def test_diff_compares_two_submissions_benchmark_by_benchmark(tmp_path):
    a = run_dir("two_benchmarks_one_waits")
    b = copy("two_benchmarks_one_waits", tmp_path)
    rows = b / "mcqa" / "artifacts" / "rollouts.jsonl"
    lines = rows.read_text().splitlines()
    first = json.loads(lines[0])
    assert first["reward"] == 1.0
    first["reward"] = 0.0
    rows.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    res = gymwatch("diff", "--format", "json", str(a), str(b))
    d = json.loads(res.stdout)
    assert res.returncode == 1, res.stderr
    assert [x["benchmark"] for x in d["benchmarks"]] == ["mcqa", "mcqa_again"]
    assert [x["exit_code"] for x in d["benchmarks"]] == [1, 0]
    assert d["only_in_a"] == d["only_in_b"] == []
    one = gymwatch("diff", str(a), str(run_dir("completed")))
    assert one.returncode == 3 and "a submission of 2 benchmarks" in one.stderr


# --- Slurm asked: its own commands (fake ones on PATH) --------------------------------------------

def fake_from_recording(tmp_path, monkeypatch, case: str) -> FakeSlurm:
    """A fake Slurm that knows the recorded case's jobs as its last answers said them."""
    monkeypatch.delenv(NO_SLURM_ENV, raising=False)
    fake = FakeSlurm(tmp_path, monkeypatch)
    fake.set(no_accounting=False)
    for job in final_poll(case).jobs.values():
        fake.job(job.job_id, job.state, work_dir=job.work_dir, name=job.name or "gym-mcqa",
                 reason=job.reason or "None")
    data = fake.load()
    for job in final_poll(case).jobs.values():
        data["jobs"][job.job_id].update(exit=f"{job.exit_code or 0}:{job.signal or 0}", nodelist=job.nodes,
                                        elapsed=f"{(job.elapsed or 0) // 60}:{(job.elapsed or 0) % 60:02d}",
                                        elapsed_raw=job.elapsed or 0)
    fake.save(data)
    return fake


def test_slurm_s_answer_decides_where_the_files_cannot(tmp_path, monkeypatch):
    fake = fake_from_recording(tmp_path, monkeypatch, "pending_cancelled")
    res = gymwatch("report", "--format", "json", str(run_dir("pending_cancelled")), env=fake.env)
    d = json.loads(res.stdout)
    assert (res.returncode, d["verdict"], d["reason"]) == (1, V_INCOMPLETE, "job 301 was cancelled before it started")
    [link] = d["job"]["links"]
    assert (link["state"], link["source"], link["reason"]) == ("CANCELLED", "slurm", "BeginTime")
    assert d["job"]["slurm"] == {"asked": True, "error": None, "accounting": True}
    assert d["job"]["conclusion"]["inferred"] is False
    # one squeue (the whole submission), one sacct (for the job that ended)
    calls = fake.calls()
    assert [c.split()[0] for c in calls] == ["squeue", "sacct"]
    assert "--name=gym-mcqa" in calls[0] and calls[1].startswith("sacct -X -P -j 301 ")


def test_one_slurm_call_for_a_submission_of_two_benchmarks(tmp_path, monkeypatch):
    fake = fake_from_recording(tmp_path, monkeypatch, "two_benchmarks_one_waits")
    res = gymwatch("report", "--format", "json", str(run_dir("two_benchmarks_one_waits")), env=fake.env)
    d = json.loads(res.stdout)
    assert res.returncode == 0
    assert [b["job"]["links"][0]["source"] for b in d["benchmarks"]] == ["slurm", "slurm"]
    calls = fake.calls()
    assert [c.split()[0] for c in calls] == ["squeue", "sacct"], calls
    assert "--name=gym-mcqa,gym-mcqa_again" in calls[0] and "-j 601,602 " in calls[1]


def test_slurm_that_cannot_be_asked_is_said_and_the_files_decide(tmp_path, monkeypatch):
    fake = fake_from_recording(tmp_path, monkeypatch, "svc_dies_at_startup")
    (fake.dir / "squeue").unlink()
    env = {**fake.env, "PATH": f"{fake.dir}:/nonexistent"}
    res = gymwatch("report", "--format", "json", str(run_dir("svc_dies_at_startup")), env=env)
    d = json.loads(res.stdout)
    assert d["verdict"] == V_STARTUP_FAILED and d["reason"].endswith("(Slurm state inferred from files)")
    assert d["job"]["slurm"]["error"] == "no `squeue` here (no Slurm client on this machine)"
    assert d["job"]["conclusion"]["details"] == [
        "state inferred from files: Slurm could not be asked: no `squeue` here (no Slurm client on this machine)"]


def test_no_slurm_reads_files_alone_and_says_so(tmp_path, monkeypatch):
    fake = fake_from_recording(tmp_path, monkeypatch, "pending_cancelled")
    res = gymwatch("report", "--format", "json", "--no-slurm", str(run_dir("pending_cancelled")), env=fake.env)
    d = json.loads(res.stdout)
    assert fake.calls() == []
    assert d["verdict"] == V_QUEUED and d["job"]["conclusion"]["details"] == [
        "state inferred from files: Slurm was not asked"]


class CountingRunner:
    """Slurm's commands answered from a recorded squeue snapshot, each call counted."""

    def __init__(self, squeue: str):
        self.squeue, self.calls = squeue, []

    def __call__(self, argv, timeout):
        self.calls.append(argv[0])
        return Ran(tuple(argv), 0, self.squeue if argv[0] == "squeue" else "", "")


def test_a_live_submission_asks_slurm_once_per_interval_for_all_its_benchmarks():
    sub = record.resolve(run_dir("two_benchmarks_one_waits"))
    rows = "\n".join(f"{j}|gym-{b.name}|RUNNING|None|0:10|20:00|1|1|vm|N/A|N/A|(null)|{b.job_dir}"
                     for j, b in zip(("601", "602"), sub.benchmarks, strict=True))
    runner, now = CountingRunner(rows), [0.0]
    feed = SlurmFeed(sub, interval=30.0, runner=runner, clock=lambda: now[0])
    feed.answer = _synchronously(feed)
    ss = SubmissionSession(sub, feed=feed)
    for t in (0.0, 5.0, 10.0, 31.0, 40.0):
        now[0] = t
        ss.poll()
    assert runner.calls == ["squeue", "squeue"]          # t=0 and t=31, one call for both benchmarks
    for s in ss.sessions.values():
        assert s.state.job.links[0].source == "slurm" and s.state.job.links[0].state == "RUNNING"


def _synchronously(feed: SlurmFeed):
    """The feed's answer() with its call made at once (a screen's is made in a thread)."""
    ask = feed.answer

    def answer():
        interval, feed.interval = feed.interval, None
        try:
            due = feed._asked is None or feed.clock() - feed._asked >= interval
            if due:
                feed._asked = None
            return ask()
        finally:
            feed.interval = interval
    return answer


def test_a_screen_s_feed_asks_in_the_background():
    sub = record.resolve(run_dir("completed"))
    import threading
    gate = threading.Event()

    def slow(argv, timeout):
        gate.wait(5)
        return Ran(tuple(argv), 0, "", "")
    feed = SlurmFeed(sub, interval=30.0, runner=slow)
    assert feed.answer() is None          # asked, not waited for
    gate.set()
    for _ in range(100):
        if feed.answer() is not None:
            break
        import time
        time.sleep(0.02)
    assert feed.answer() is not None and feed.calls == 1


# --- a run as it grows: the chain's next link takes over -------------------------------------------

def test_a_newer_link_s_driver_log_is_read_afresh(tmp_path):
    """timeout_resumed, one live session as the files grew: 701's driver first; once 702's driver
    log has output, the run is read afresh from it (each link's driver is another Gym)."""
    sub = grown("timeout_resumed", 140.0, tmp_path)
    session = RunSession.open(str(sub), clock=lambda: 0.0)
    session.poll()
    assert [s.path.name for s in session.layout.streams] == ["driver-701.log"]
    written = sum(t.status == T_COMPLETED for t in session.state.trials.values())
    assert written == 2 and verdict(session.state).name != V_OK
    grown("timeout_resumed", 600.0, tmp_path)
    changes = session.poll()
    assert changes.reset and [s.path.name for s in session.layout.streams] == ["driver-704.log"]
    assert [ln.job_id for ln in session.state.job.links] == ["701", "702", "703", "704", "705"]
    assert verdict(session.state).name == V_OK


def test_a_running_job_is_live_until_it_ends(tmp_path):
    sub = grown("completed", 60.0, tmp_path)
    session = RunSession.open(str(sub))
    session.poll()
    assert session.is_live()                   # RUNNING, inferred from its files
    assert session.state.parent.alive is None and not session.state.activity.processes_checked


def test_a_submission_session_reads_each_benchmark_as_its_own_run():
    ss = read_submission(record.resolve(run_dir("two_benchmarks_one_waits")), slurm=False)
    assert {n: verdict(s.state).name for n, s in ss.sessions.items()} == {"mcqa": V_OK, "mcqa_again": V_OK}
    assert ss.sessions["mcqa_again"].state.job.links[0].job_id == "602"


# --- the live screen on a submission of one benchmark -------------------------------------------

async def test_attach_on_a_submission_opens_its_benchmark_s_run_with_its_service_steps():
    from tuihelpers import fixture_app, screen_lines, wait_for

    app = fixture_app(run_dir("svc_dies_at_startup"))
    async with app.run_test(size=(120, 30)) as pilot:
        assert await wait_for(pilot, lambda: app.started)
        assert await wait_for(pilot, lambda: "mcqa/logs/policy-201.log:9" in "\n".join(screen_lines(app)))
        lines = screen_lines(app)
        text = "\n".join(lines)
        assert "STARTUP FAILED" in text and "service policy (job 201) died during startup" in text
        row = next(ln for ln in lines if "│ policy" in ln)
        assert "svc" in row and "✗ failed" in row and "died during startup: exit code 1" in row
        assert "RuntimeError: stand-in vllm: told to die during startup" in text     # its log, at the line
