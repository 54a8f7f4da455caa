"""Slurm asked through its own commands, and its answers read (gymwatch/core/cluster/slurmcli.py).

The parsers read what real squeue / scontrol / sacct printed for the recorded submissions; the
poll runs fake `squeue`, `sacct`, `scontrol` and `ssh` scripts put first on PATH."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from gymwatch.core.cluster import record, slurmcli
from gymwatch.core.cluster.slurmcli import SlurmJob, SlurmPoll, parse_sacct, parse_scontrol, parse_squeue, poll

SLURM = Path(__file__).parent / "fixtures" / "gym-0.7.0-slurm"
META = sorted(SLURM.glob("*/_meta"))


def _blocks(text: str) -> list[str]:
    return [b for b in re.split(r"^--- t=.*$", text, flags=re.M) if b.strip()]


@pytest.mark.parametrize("meta", META, ids=lambda p: p.parent.name)
def test_every_recorded_squeue_answer(meta):
    expected = {}
    for line in (meta / "states.log").read_text().splitlines():
        _, job_id, row = line.split(maxsplit=2)
        expected.setdefault(job_id, set()).add(row.split("|")[2])
    seen: dict[str, set[str]] = {}
    for block in _blocks((meta / "squeue_snapshots.log").read_text()) + [(meta / "squeue_final.txt").read_text()]:
        for job in parse_squeue(block):
            seen.setdefault(job.job_id, set()).add(job.state)
            assert job.source == "squeue" and job.name and job.time_limit or job.unlimited
            assert "(null)" not in (job.dependency, job.nodes) and job.reason != "None"
    for job_id, states in expected.items():
        assert states <= seen[job_id]


def test_a_squeue_row_read_in_full():
    [pending, running, dep] = parse_squeue(
        "JOBID|NAME|STATE|REASON|TIME|TIME_LIMIT|CPUS|NODELIST|DEPENDENCY\n"
        "4|gym-mcqa|PENDING|BeginTime|0:00|20:00|1||(null)\n"
        "17|gym-mcqa|RUNNING|None|1-02:03:04|UNLIMITED|8|gpu[1-2]|(null)\n"
        "13|gym-mcqa|PENDING|Dependency|0:00|20:00|1||afternotok:12(unfulfilled)\n")
    assert (pending.state, pending.reason, pending.elapsed, pending.time_limit, pending.nodes) == (
        "PENDING", "BeginTime", 0, 1200, "")
    assert (running.reason, running.elapsed, running.time_limit, running.unlimited, running.nodes, running.cpus) == (
        "", 93784, None, True, "gpu[1-2]", "8")
    assert dep.dependency == "afternotok:12(unfulfilled)"


def test_our_own_squeue_format_has_no_header_and_the_work_dir_last():
    line = "31|gym-aime|PENDING|Priority|0:00|4:00:00|2|4||2026-12-07T11:00:00|2026-12-07T10:00:00|(null)|/l/a|b|c\n"
    [job] = parse_squeue(line)
    assert (job.job_id, job.state, job.reason, job.time_limit, job.node_count, job.cpus) == (
        "31", "PENDING", "Priority", 14400, "2", "4")
    assert (job.start_time, job.submit_time, job.work_dir) == ("2026-12-07T11:00:00", "2026-12-07T10:00:00", "/l/a|b|c")


@pytest.mark.parametrize("path", sorted(SLURM.glob("*/_meta/scontrol/*.txt")), ids=lambda p: p.name)
def test_every_recorded_scontrol_answer(path):
    [job] = parse_scontrol(path.read_text())
    job_id, *rest = path.stem.split("-")
    assert job.job_id == job_id and job.source == "scontrol" and job.work_dir.endswith("/mcqa")
    if rest[-1] != "final":
        assert job.state == rest[-1]
    assert job.exit_code is not None and job.signal is not None and job.time_limit
    assert job.command.split()[0].endswith("/job.sh")


def test_scontrol_s_pending_job_with_its_expected_start_and_a_resumed_link_s_command():
    begin = SLURM / "pending_begintime_cancelled" / "_meta" / "scontrol" / "4-01-PENDING.txt"
    [job] = parse_scontrol(begin.read_text())
    assert (job.state, job.reason, job.start_time, job.nodes, job.dependency) == (
        "PENDING", "BeginTime", "2026-12-06T05:36:13", "", "")
    resumed = SLURM / "resumable_chain_svc_dies_with_sacct" / "_meta" / "scontrol" / "13-01-PENDING.txt"
    [job] = parse_scontrol(resumed.read_text())
    assert job.command.endswith("/job.sh 12") and job.dependency == "afternotok:12(unfulfilled)"
    failed = SLURM / "resumable_chain_svc_dies_with_sacct" / "_meta" / "scontrol" / "12-03-FAILED.txt"
    [job] = parse_scontrol(failed.read_text())
    assert (job.state, job.reason, job.exit_code, job.signal, job.elapsed) == ("FAILED", "NonZeroExitCode", 1, 0, 5)


def test_recorded_sacct_answers_leave_the_steps_out():
    chain = parse_sacct((SLURM / "resumable_chain_svc_dies_with_sacct" / "_meta" / "sacct.txt").read_text())
    assert [(j.job_id, j.state, j.exit_code, j.signal, j.elapsed) for j in chain] == [
        ("12", "FAILED", 1, 0, 5), ("13", "FAILED", 1, 0, 6), ("14", "FAILED", 1, 0, 6), ("15", "FAILED", 1, 0, 1)]
    [done] = parse_sacct((SLURM / "real_mcqa_cold" / "_meta" / "sacct.txt").read_text())
    assert (done.state, done.exit_code, done.nodes, done.source) == ("COMPLETED", 0, "vm", "sacct")


def test_sacct_s_other_spellings():
    jobs = parse_sacct("JobID|JobName|State|ExitCode|Reason|Submit|Start|End|ElapsedRaw|Timelimit|NodeList|WorkDir\n"
                       "40|gym-a|CANCELLED by 1000|0:15|None|2026-12-07T10:00:00|Unknown|2026-12-07T10:01:00|0|"
                       "UNLIMITED|None assigned|/x\n"
                       "41|gym-a|FAILED|0:11|None|2026-12-07T10:00:00|2026-12-07T10:00:01|2026-12-07T10:01:00|59|"
                       "01:00:00|n1|/x\n")
    assert [(j.state, j.exit_code, j.signal, j.unlimited, j.start_time, j.nodes) for j in jobs] == [
        ("CANCELLED", 0, 15, True, "", ""), ("FAILED", 0, 11, False, "2026-12-07T10:00:01", "n1")]


# --- the poll, against fake Slurm commands ---

class FakeSlurm:
    """`squeue`, `sacct`, `scontrol` and `ssh` scripts on PATH that answer from files and log each call."""

    def __init__(self, tmp_path: Path, monkeypatch):
        self.dir = tmp_path / "fakebin"
        self.dir.mkdir()
        self.log = tmp_path / "calls.log"
        self.log.write_text("")
        for tool in ("squeue", "sacct", "scontrol"):
            self._script(tool, f'echo "{tool} $*" >> {self.log}\n'
                               f'[ -f {self.dir}/{tool}.err ] && cat {self.dir}/{tool}.err >&2\n'
                               f'cat {self.dir}/{tool}.out 2>/dev/null\nexit $(cat {self.dir}/{tool}.rc 2>/dev/null || echo 0)')
        # ssh: log the call, then run the remote command here (the last argument).
        self._script("ssh", f'echo "ssh $*" >> {self.log}\n'
                            f'[ -f {self.dir}/ssh.rc ] && {{ echo "ssh: connect to host $5 port 22: Connection refused" >&2;'
                            f' exit $(cat {self.dir}/ssh.rc); }}\n'
                            'for last; do :; done\nexec sh -c "$last"')
        monkeypatch.setenv("PATH", f"{self.dir}:{os.environ['PATH']}")

    def _script(self, name: str, body: str) -> None:
        path = self.dir / name
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)

    def answer(self, tool: str, out: str = "", rc: int = 0, err: str = "") -> None:
        (self.dir / f"{tool}.out").write_text(out)
        (self.dir / f"{tool}.rc").write_text(str(rc))
        (self.dir / f"{tool}.err").write_text(err)

    def remove(self, tool: str) -> None:
        (self.dir / tool).unlink()

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines()


def sq(job_id, state, reason="None", work_dir="/runs/g/mcqa", dep="(null)", name="gym-mcqa", elapsed="0:05"):
    return f"{job_id}|{name}|{state}|{reason}|{elapsed}|20:00|1|1|vm|N/A|2026-12-06T04:41:31|{dep}|{work_dir}\n"


SACCT_HEAD = "JobID|JobName|State|ExitCode|Reason|Submit|Start|End|ElapsedRaw|Timelimit|NodeList|WorkDir\n"


def test_one_squeue_call_finds_the_chain_s_links_by_their_work_dir(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    fake.answer("squeue", sq(12, "RUNNING") + sq(13, "PENDING", "Dependency", dep="afternotok:12(unfulfilled)")
                + sq(99, "RUNNING", work_dir="/runs/other/mcqa"))
    got = poll(["gym-mcqa"], ["/runs/g/mcqa/"], ["12"])
    assert sorted(got.jobs) == ["12", "13"] and got.error == "" and got.forgotten == frozenset()
    assert got.jobs["13"].dependency == "afternotok:12(unfulfilled)"
    assert fake.calls() == [f"squeue --noheader --states=all --format={slurmcli.SQUEUE_FORMAT} --name=gym-mcqa"]


def test_an_ended_job_s_exit_code_comes_from_one_sacct_call(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    fake.answer("squeue", sq(12, "FAILED", "NonZeroExitCode") + sq(13, "RUNNING"))
    fake.answer("sacct", SACCT_HEAD + "12|gym-mcqa|FAILED|2:0|None|a|b|c|5|00:20:00|vm|/runs/g/mcqa\n"
                                      "11|gym-mcqa|TIMEOUT|0:0|None|a|b|c|1200|00:20:00|vm|/runs/g/mcqa\n")
    got = poll(["gym-mcqa"], ["/runs/g/mcqa"], ["11", "12"])
    assert got.accounting is True
    assert (got.jobs["12"].state, got.jobs["12"].exit_code, got.jobs["12"].source) == ("FAILED", 2, "squeue+sacct")
    # 11 is gone from squeue (older than MinJobAge): only sacct remembers it.
    assert got.jobs["11"].state == "TIMEOUT" and got.forgotten == frozenset()
    assert [c.split()[0] for c in fake.calls()] == ["squeue", "sacct"]
    assert "sacct -X -P -j 11,12 -o " in fake.calls()[1]
    # Known to the end: not asked again.
    poll(["gym-mcqa"], ["/runs/g/mcqa"], ["11", "12"], final={"11", "12"})
    assert [c.split()[0] for c in fake.calls()] == ["squeue", "sacct", "squeue"]


def test_without_accounting_scontrol_tells_an_ended_job_s_exit_code(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    fake.answer("squeue", sq(18, "FAILED", "NonZeroExitCode", work_dir="/tmp/slurmrec/runs/x/mcqa"))
    fake.answer("sacct", "", rc=1, err="sacct: error: Slurm accounting storage is disabled\n")
    fake.answer("scontrol", (SLURM / "svc_never_healthy_timeout" / "_meta" / "scontrol" / "18-final.txt").read_text())
    got = poll(["gym-mcqa"], ["/tmp/slurmrec/runs/x/mcqa"], ["18"])
    assert got.accounting is False and (got.jobs["18"].exit_code, got.jobs["18"].signal) == (1, 0)
    assert [c.split()[0] for c in fake.calls()] == ["squeue", "sacct", "scontrol"]
    assert fake.calls()[2] == "scontrol show job -o 18"


def test_a_job_slurm_forgot(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    fake.answer("squeue", "")
    fake.answer("sacct", SACCT_HEAD)
    got = poll(["gym-mcqa"], ["/runs/g/mcqa"], ["7"])
    assert got.jobs == {} and got.forgotten == frozenset({"7"}) and got.error == ""


def test_no_slurm_client_here_is_an_answer_not_an_exception(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    fake.remove("squeue")
    monkeypatch.setenv("PATH", str(fake.dir))
    got = poll(["gym-mcqa"], ["/runs/g/mcqa"], ["7"])
    assert got.error == "no `squeue` here (no Slurm client on this machine)" and got.jobs == {}


def test_a_failing_squeue_says_why(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    fake.answer("squeue", "", rc=1, err="squeue: error: Unable to contact slurm controller (connect failure)\n")
    assert poll(["gym-mcqa"], [], ["7"]).error == (
        "`squeue` failed: squeue: error: Unable to contact slurm controller (connect failure)")


def test_a_command_that_hangs_is_given_up_on(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    (fake.dir / "squeue").write_text("#!/bin/sh\nexec sleep 30\n")
    got = poll(["gym-mcqa"], [], ["7"], timeout=0.5)
    assert got.error == "`squeue` failed: squeue: no answer within 0.5s"


def test_a_submission_from_another_host_is_polled_over_ssh(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    fake.answer("squeue", sq(4242, "PENDING", "Resources", work_dir="/lustre/u/runs/g/aime", name="gym-aime"))
    root = tmp_path / "gym-job-20261207T100000Z-abcdef"
    (root / "aime").mkdir(parents=True)
    (root / "aime" / "job.sh").write_text("")
    (root / "gym-job.json").write_text(
        '{"gym_job_id": "gym-job-20261207T100000Z-abcdef", "gym_version": "0.7.0", "run_dir": "/lustre/u/runs/g",'
        ' "cluster": "big", "executor": "slurm", "hostname": "login.example.org", "submitted_by": "me",'
        ' "benchmarks": [{"benchmark": "aime", "job_dir": "/lustre/u/runs/g/aime", "job_id": "4242"}],'
        ' "schema_version": 1}')
    got = slurmcli.poll_submission(record.resolve(root))
    assert got.jobs["4242"].reason == "Resources" and got.host == "login.example.org"
    [call, remote] = fake.calls()
    assert call.startswith("ssh -o BatchMode=yes -o ConnectTimeout=10 login.example.org squeue ")
    assert remote.startswith("squeue --noheader --states=all") and remote.endswith("--name=gym-aime")


def test_an_unreachable_host_says_so(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    (fake.dir / "ssh.rc").write_text("255")
    got = poll(["gym-aime"], [], ["4242"], host="login.example.org")
    assert got.error.startswith("cannot reach login.example.org over SSH: ssh: connect to host")


def test_this_machine_s_own_hostname_is_asked_here(tmp_path, monkeypatch):
    fake = FakeSlurm(tmp_path, monkeypatch)
    fake.answer("squeue", "")
    import socket
    poll(["gym-a"], [], [], host=socket.gethostname())
    assert fake.calls()[0].startswith("squeue ")


def test_a_submission_of_another_executor_or_with_nothing_queued_asks_nothing(tmp_path):
    def runner(argv, timeout):
        raise AssertionError("no command may run")
    sub = record.Submission(gym_job_id="g", version="", submitted_at="", cluster="k", executor="kubernetes",
                            hostname=None, submitted_by="", run_dir="/r", root=None, record=None, benchmarks=())
    assert "not Slurm" in slurmcli.poll_submission(sub, runner=runner).error
    rejected = record.Benchmark("a", "/r/a", None, None, "sbatch: error: bad")
    sub = record.Submission(gym_job_id="g", version="", submitted_at="", cluster="k", executor="slurm",
                            hostname=None, submitted_by="", run_dir="/r", root=None, record=None,
                            benchmarks=(rejected,))
    assert slurmcli.poll_submission(sub, runner=runner).error == "no benchmark of it was queued"


def test_merged_polls_keep_an_ended_job_slurm_has_since_forgotten():
    first = SlurmPoll(jobs={"12": SlurmJob("12", state="FAILED", exit_code=1, signal=0, source="scontrol"),
                            "13": SlurmJob("13", state="PENDING", reason="Dependency")})
    later = SlurmPoll(jobs={"13": SlurmJob("13", state="RUNNING", elapsed=3)}, forgotten=frozenset({"12"}),
                      accounting=False)
    both = first.merged(later)
    assert both.jobs["12"].exit_code == 1 and both.jobs["13"].state == "RUNNING" and both.jobs["13"].reason == ""
    assert both.forgotten == frozenset() and both.accounting is False
    failed = both.merged(SlurmPoll(error="`squeue` failed: x"))
    assert failed.error and failed.jobs == both.jobs
