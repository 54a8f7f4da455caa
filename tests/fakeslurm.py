"""A fake Slurm client on PATH for the tests of `gymwatch stop SUBMISSION`: `squeue` (jobs and
`--steps`), `scancel` (plain and `--signal=`), `sacct`, `scontrol` and `ssh` (which runs the remote
command here) read and change one JSON state file, and log every call.

    fake = FakeSlurm(tmp_path, monkeypatch)       # PATH set; `fake.env` for a child process
    fake.job("12", "RUNNING", work_dir=..., steps={"0": "vllm", "1": "gym"}, on_int="ends")
    fake.calls() -> ["squeue ...", "scancel 13", ...]

A job's `on_int`: what its driver does on SIGINT: "ends" (job.sh exits 1: FAILED), "ignores".
`completing`: how many squeue answers show a cancelled job COMPLETING before CANCELLED.
`spawn_on_int`: a job queued (PENDING) when the driver gets SIGINT: a chain's next link queued meanwhile.
Run as a program (`fakeslurm.py TOOL ARGS...`) it is that tool.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

FIELDS = ("job_id", "name", "state", "reason", "elapsed", "limit", "nodes", "cpus", "nodelist", "start", "submit",
          "dependency", "work_dir")


class FakeSlurm:
    def __init__(self, tmp_path: Path, monkeypatch=None, tools=("squeue", "scancel", "sacct", "scontrol", "ssh")):
        self.dir = tmp_path / "fakebin"
        self.dir.mkdir()
        self.state = tmp_path / "slurm.json"
        self.log = tmp_path / "calls.log"
        self.log.write_text("")
        self.save({"jobs": {}, "ssh_down": False, "no_accounting": True})
        for tool in tools:
            path = self.dir / tool
            path.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} {tool} \"$@\"\n")
            path.chmod(path.stat().st_mode | stat.S_IEXEC)
        self.env = {**os.environ, "PATH": f"{self.dir}:{os.environ['PATH']}", "FAKESLURM_STATE": str(self.state),
                    "FAKESLURM_LOG": str(self.log)}
        if monkeypatch is not None:
            for key in ("PATH", "FAKESLURM_STATE", "FAKESLURM_LOG"):
                monkeypatch.setenv(key, self.env[key])

    def load(self) -> dict:
        return json.loads(self.state.read_text())

    def save(self, data: dict) -> None:
        self.state.write_text(json.dumps(data))

    def job(self, job_id: str, state: str, *, work_dir: str, name: str = "gym-mcqa", reason: str = "None",
            steps: dict | None = None, on_int: str = "ends", dependency: str = "(null)", completing: int = 1,
            spawn_on_int: str = "") -> None:
        data = self.load()
        data["jobs"][job_id] = dict(job_id=job_id, name=name, state=state, reason=reason, work_dir=work_dir,
                                    steps=steps or {}, on_int=on_int, dependency=dependency, completing=completing,
                                    spawn_on_int=spawn_on_int, exit="0:0")
        self.save(data)

    def set(self, **flags) -> None:
        data = self.load()
        data.update(flags)
        self.save(data)

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines()

    def states(self) -> dict[str, str]:
        return {j: v["state"] for j, v in self.load()["jobs"].items()}


# ---- the tools, run as a program

def _row(job: dict) -> str:
    values = dict(elapsed="1:00", limit="20:00", nodes="1", cpus="1", nodelist="vm", start="N/A",
                  submit="2026-12-06T07:00:00", **job)
    return "|".join(str(values[f]) for f in FIELDS)


def _squeue(data: dict, args: list[str]) -> int:
    jobs = data["jobs"]
    if "--steps" in args:
        wanted = next(a.split("=", 1)[1].split(",") for a in args if a.startswith("--jobs="))
        for job_id in wanted:
            job = jobs.get(job_id)
            if job and job["state"] == "RUNNING":
                for step, name in {**job["steps"], "batch": "batch"}.items():
                    print(f"{job_id}.{step}|{name}")
        return 0
    for job in jobs.values():
        if job["state"] == "COMPLETING" and job.get("completing", 0) <= 0:
            job["state"] = job.pop("then", "CANCELLED")
        elif job["state"] == "COMPLETING":
            job["completing"] -= 1
        print(_row({k: v for k, v in job.items() if k in FIELDS}))
    return 0


def _end(job: dict, state: str, reason: str, exit_code: str) -> None:
    job.update(state="COMPLETING", then=state, reason=reason, exit=exit_code)


def _scancel(data: dict, args: list[str]) -> int:
    signal = next((a.split("=", 1)[1] for a in args if a.startswith("--signal=")), "")
    jobs = data["jobs"]
    for target in (a for a in args if not a.startswith("-")):
        job_id, _, step = target.partition(".")
        job = jobs.get(job_id)
        if job is None or job["state"] in ("CANCELLED", "FAILED", "COMPLETED"):
            print(f"scancel: error: Kill job error on job id {target}: Job/step already completing or completed",
                  file=sys.stderr)
            continue
        if not signal:
            if job["state"] == "PENDING":
                job.update(state="CANCELLED", reason="None", exit="0:0")
            else:
                _end(job, "CANCELLED", "None", "0:15")
        elif signal == "INT" and job["state"] == "RUNNING" and (not step or step in job["steps"]):
            if job["on_int"] == "ends":
                _end(job, "FAILED", "NonZeroExitCode", "1:0")
            if job.get("spawn_on_int"):
                jobs[job["spawn_on_int"]] = dict(job, job_id=job["spawn_on_int"], state="PENDING", reason="Dependency",
                                                 dependency=f"afternotok:{job_id}(unfulfilled)", spawn_on_int="",
                                                 steps={}, then="")
    return 0


def _sacct(data: dict, args: list[str]) -> int:
    if data.get("no_accounting"):
        print("sacct: error: Slurm accounting storage is disabled", file=sys.stderr)
        return 1
    ids = args[args.index("-j") + 1].split(",")
    print("JobID|JobName|State|ExitCode|Reason|Submit|Start|End|ElapsedRaw|Timelimit|NodeList|WorkDir")
    for job_id in ids:
        job = data["jobs"].get(job_id)
        if job:
            print(f"{job_id}|{job['name']}|{job['state']}|{job['exit']}|{job['reason']}|a|b|c|60|00:20:00|vm|"
                  f"{job['work_dir']}")
    return 0


def main(argv: list[str]) -> int:
    tool, args = argv[0], argv[1:]
    with open(os.environ["FAKESLURM_LOG"], "a") as log:
        log.write(" ".join([tool, *args]) + "\n")
    state = Path(os.environ["FAKESLURM_STATE"])
    data = json.loads(state.read_text())
    if tool == "ssh":
        if data.get("ssh_down"):
            print(f"ssh: connect to host {args[-2]} port 22: Connection refused", file=sys.stderr)
            return 255
        os.execvp("sh", ["sh", "-c", args[-1]])
    code = {"squeue": _squeue, "scancel": _scancel, "sacct": _sacct}.get(tool, lambda d, a: 1)(data, args)
    state.write_text(json.dumps(data))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
