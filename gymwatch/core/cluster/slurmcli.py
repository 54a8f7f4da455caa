"""Asking Slurm about a submission's jobs with its own commands, here or over SSH, and reading the answers.

One poll costs one `squeue` for every job of the submission (selected by job name, kept by work
dir, so a resume chain's links are found without knowing their ids). Only for jobs that ended, or
that squeue no longer lists, a second call asks for their exit codes: one `sacct` for all of
them (when Slurm keeps accounting), else one `scontrol show job` per ended job still in Slurm's
memory. A job asked once to the end need not be asked again (`final`).

`running_steps()` lists the running steps of some jobs (`squeue --steps`), for `gymwatch stop`.

The parsers are pure (`parse_squeue`, `parse_steps`, `parse_scontrol`, `parse_sacct`) and read the `(null)`,
`None`, `N/A`, `Unknown` spellings of "not set" as empty. The runner is replaceable (tests give
a fake); the default runs the command with a timeout, through `ssh -o BatchMode=yes <host>` when
the record says the jobs were submitted from another host.
"""

from __future__ import annotations

import shlex
import socket
import subprocess
from dataclasses import dataclass, field, fields, replace
from typing import Callable, Collection, Iterable, Mapping, Optional, Sequence

from . import slurmtime
from .record import Submission
from .words import ENDED_STATES

# squeue's fields, in order; the work dir last, as a path may hold the separator.
SQUEUE_FIELDS = (("%i", "JOBID"), ("%j", "NAME"), ("%T", "STATE"), ("%r", "REASON"), ("%M", "TIME"),
                 ("%l", "TIME_LIMIT"), ("%D", "NODES"), ("%C", "CPUS"), ("%N", "NODELIST"),
                 ("%S", "START_TIME"), ("%V", "SUBMIT_TIME"), ("%E", "DEPENDENCY"), ("%Z", "WORK_DIR"))
SQUEUE_FORMAT = "|".join(code for code, _ in SQUEUE_FIELDS)
SQUEUE_HEADER = tuple(name for _, name in SQUEUE_FIELDS)
SACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "Reason", "Submit", "Start", "End", "ElapsedRaw",
                "Timelimit", "NodeList", "WorkDir")
TIMEOUT = 30.0              # seconds for one command, SSH included
SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=10")
MAX_SCONTROL = 16           # per poll, when there is no accounting to ask all at once
# A recommended pace for polling: Slurm's own tools poll no faster (squeue --iterate, sacct users).
POLL_INTERVAL = 30.0


@dataclass(frozen=True)
class SlurmJob:
    """One job as Slurm told it. Empty / None: not told."""

    job_id: str
    name: str = ""
    state: str = ""                 # Slurm's word: PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, ...
    reason: str = ""                # why it is pending, or why it ended (NonZeroExitCode, TimeLimit, ...)
    elapsed: Optional[int] = None   # seconds it has run
    time_limit: Optional[int] = None  # seconds; None with `unlimited`, or unknown
    unlimited: bool = False
    nodes: str = ""                 # its node list
    node_count: str = ""
    cpus: str = ""
    dependency: str = ""            # e.g. afternotok:12(unfulfilled)
    submit_time: str = ""
    start_time: str = ""            # when it started; while PENDING, when Slurm expects it to
    end_time: str = ""
    work_dir: str = ""
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    command: str = ""               # the batch script and its arguments (a resumed link's: job.sh <previous>)
    source: str = ""                # which command told it: squeue, scontrol, sacct

    def merged(self, other: "SlurmJob") -> "SlurmJob":
        """This job with what `other` (a later or fuller answer) told filled in over it."""
        changes = {f.name: getattr(other, f.name) for f in fields(other) if _told(getattr(other, f.name))}
        if "source" in changes and self.source and self.source != other.source:
            changes["source"] = f"{self.source}+{other.source}"
        return replace(self, **changes)

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES


def _told(value: object) -> bool:
    """Whether an answer told this field: 0 is told (exit code 0), "" / None / False are not."""
    return value is not None and value is not False and value != ""


@dataclass(frozen=True)
class SlurmPoll:
    """What one poll learned. `error` says why Slurm could not be asked (then nothing was learned)."""

    jobs: Mapping[str, SlurmJob] = field(default_factory=dict)
    forgotten: frozenset[str] = frozenset()   # asked about, but no Slurm command knows them any more
    error: str = ""
    accounting: Optional[bool] = None         # sacct answered / failed / was not needed
    host: Optional[str] = None                # where Slurm was asked (None: here)

    def merged(self, newer: "SlurmPoll") -> "SlurmPoll":
        """This poll's knowledge updated by a newer poll; an ended job's answer is kept once Slurm forgets it."""
        jobs = dict(self.jobs)
        for job_id, job in newer.jobs.items():
            jobs[job_id] = jobs[job_id].merged(job) if job_id in jobs and jobs[job_id].ended else job
        accounting = newer.accounting if newer.accounting is not None else self.accounting
        return SlurmPoll(jobs=jobs, forgotten=frozenset(newer.forgotten - jobs.keys()), error=newer.error,
                         accounting=accounting, host=newer.host)


@dataclass(frozen=True)
class Ran:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def why(self) -> str:
        """The first line that says why it failed."""
        for text in (self.stderr, self.stdout):
            line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
            if line:
                return line
        return f"exit status {self.returncode}"


Runner = Callable[[Sequence[str], float], Ran]


def run_command(argv: Sequence[str], timeout: float) -> Ran:
    """Run a command, never raising: a missing program is 127, a timeout 124."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, errors="replace")
    except FileNotFoundError:
        return Ran(tuple(argv), 127, "", f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return Ran(tuple(argv), 124, "", f"{argv[0]}: no answer within {timeout:g}s")
    except OSError as e:
        return Ran(tuple(argv), 126, "", f"{argv[0]}: {e.strerror or e}")
    return Ran(tuple(argv), done.returncode, done.stdout, done.stderr)


def is_local(host: Optional[str]) -> bool:
    """Whether Slurm is asked on this machine (Gym submits locally to None or its own hostname)."""
    if not host or host == "localhost":
        return True
    me = socket.gethostname()
    return host in (me, me.split(".")[0])


def on_host(argv: Sequence[str], host: Optional[str]) -> list[str]:
    """`argv` as run on `host`: itself here, else through ssh that never prompts."""
    if is_local(host):
        return list(argv)
    assert host is not None
    return ["ssh", *SSH_OPTIONS, host, shlex.join(argv)]


def squeue_command(names: Iterable[str]) -> list[str]:
    cmd = ["squeue", "--noheader", "--states=all", f"--format={SQUEUE_FORMAT}"]
    names = sorted(set(names))
    return cmd + [f"--name={','.join(names)}"] if names else cmd


def steps_command(job_ids: Iterable[str]) -> list[str]:
    """squeue's list of the running steps of these jobs: `12.0|vllm`, `12.1|gym`, `12.batch|batch`."""
    return ["squeue", "--steps", "--noheader", f"--jobs={','.join(job_ids)}", "--format=%i|%j"]


def sacct_command(job_ids: Iterable[str]) -> list[str]:
    return ["sacct", "-X", "-P", "-j", ",".join(job_ids), "-o", ",".join(SACCT_FIELDS)]


def scontrol_command(job_id: str) -> list[str]:
    return ["scontrol", "show", "job", "-o", job_id]


def poll(names: Iterable[str], work_dirs: Iterable[str], job_ids: Iterable[str] = (), *,
         host: Optional[str] = None, runner: Runner = run_command, final: Collection[str] = (),
         timeout: float = TIMEOUT, details: bool = True) -> SlurmPoll:
    """Ask Slurm about the jobs named `names` that run in `work_dirs`, and the jobs `job_ids`.

    `final`: ids whose ended state is already known in full; they are not asked about again.
    `details=False`: squeue's answer alone (no exit codes: no sacct or scontrol call)."""
    dirs = {d.rstrip("/") for d in work_dirs if d}
    wanted = set(job_ids)
    where = None if is_local(host) else host
    ran = runner(on_host(squeue_command(names), host), timeout)
    if ran.returncode != 0:
        return SlurmPoll(error=_failure("squeue", ran, host), host=where)
    jobs = {j.job_id: j for j in parse_squeue(ran.stdout)
            if j.job_id in wanted or j.work_dir.rstrip("/") in dirs}
    ask = sorted((({j for j, job in jobs.items() if job.ended}) | (wanted - jobs.keys())) - set(final)) \
        if details else []
    accounting: Optional[bool] = None
    if ask:
        accounting = _ask_sacct(ask, jobs, dirs, wanted, host, runner, timeout)
        if not accounting:
            _ask_scontrol([j for j in ask if j in jobs and jobs[j].exit_code is None], jobs, host, runner, timeout)
    forgotten = frozenset(wanted - jobs.keys() - set(final)) if details else frozenset()
    return SlurmPoll(jobs=jobs, forgotten=forgotten, accounting=accounting, host=where)


def _ask_sacct(ask: list[str], jobs: dict[str, SlurmJob], dirs: set[str], wanted: set[str],
               host: Optional[str], runner: Runner, timeout: float) -> bool:
    ran = runner(on_host(sacct_command(ask), host), timeout)
    if ran.returncode != 0:
        return False
    for job in parse_sacct(ran.stdout):
        if job.job_id in jobs:
            jobs[job.job_id] = jobs[job.job_id].merged(job)
        elif job.job_id in wanted or job.work_dir.rstrip("/") in dirs:
            jobs[job.job_id] = job
    return True


def _ask_scontrol(ask: list[str], jobs: dict[str, SlurmJob], host: Optional[str], runner: Runner,
                  timeout: float) -> None:
    for job_id in ask[:MAX_SCONTROL]:
        ran = runner(on_host(scontrol_command(job_id), host), timeout)
        if ran.returncode == 0:
            for job in parse_scontrol(ran.stdout):
                if job.job_id == job_id:
                    jobs[job_id] = jobs[job_id].merged(job)


def running_steps(job_ids: Sequence[str], *, host: Optional[str] = None, runner: Runner = run_command,
                  timeout: float = TIMEOUT) -> tuple[dict[str, dict[str, str]], str]:
    """({job id: {step: step name}}, error) for the steps squeue lists running now. A job that
    has none listed (not started, or ended) is absent; `error` says why squeue could not tell."""
    if not job_ids:
        return {}, ""
    ran = runner(on_host(steps_command(job_ids), host), timeout)
    if ran.returncode != 0:
        return {}, _failure("squeue", ran, host)
    return parse_steps(ran.stdout), ""


def _failure(tool: str, ran: Ran, host: Optional[str]) -> str:
    if not is_local(host) and ran.argv[:1] == ("ssh",) and ran.returncode == 255:
        return f"cannot reach {host} over SSH: {ran.why()}"
    if ran.returncode == 127:
        return f"no `{tool}` here (no Slurm client on this machine)" if is_local(host) else \
            f"no `{tool}` on {host}"
    return f"`{tool}` failed: {ran.why()}"


# --- parsers ---

def parse_squeue(text: str, fields_: Sequence[str] = SQUEUE_HEADER) -> list[SlurmJob]:
    """squeue `|`-separated output: with its header line (any field order), else in `fields_` order."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and lines[0].split("|")[0].strip() == "JOBID":
        fields_, lines = tuple(f.strip() for f in lines[0].split("|")), lines[1:]
    out = []
    for line in lines:
        values = line.split("|", len(fields_) - 1)
        row = dict(zip(fields_, values, strict=False))    # a short line: its missing fields read as unset
        if not row.get("JOBID", "").strip():
            continue
        out.append(_squeue_job(row))
    return out


def _squeue_job(row: dict[str, str]) -> SlurmJob:
    get = lambda key: slurmtime.clean(row.get(key, ""))  # noqa: E731
    limit = row.get("TIME_LIMIT", "")
    return SlurmJob(
        job_id=get("JOBID"), name=get("NAME"), state=_state(get("STATE")), reason=get("REASON"),
        elapsed=slurmtime.duration(get("TIME")), time_limit=slurmtime.duration(limit),
        unlimited=slurmtime.unlimited(limit), nodes=get("NODELIST"), node_count=get("NODES"), cpus=get("CPUS"),
        dependency=get("DEPENDENCY"), submit_time=get("SUBMIT_TIME"), start_time=get("START_TIME"),
        work_dir=get("WORK_DIR"), source="squeue")


def parse_steps(text: str) -> dict[str, dict[str, str]]:
    """`squeue --steps --format=%i|%j` lines: `12.1|gym` -> {"12": {"1": "gym"}} (`batch`, `extern` kept)."""
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        step_id, _, name = line.strip().partition("|")
        job_id, dot, step = step_id.partition(".")
        if dot and job_id and step:
            out.setdefault(job_id, {})[step] = name.strip()
    return out


def parse_scontrol(text: str) -> list[SlurmJob]:
    """`scontrol show job -o` output: one job a line of Key=Value pairs."""
    out = []
    for line in text.splitlines():
        pairs = _key_values(line)
        if "JobId" not in pairs:
            continue
        get = _field_reader(pairs)
        code, signal = _exit_code(get("ExitCode"))
        limit = pairs.get("TimeLimit", "")
        out.append(SlurmJob(
            job_id=get("JobId"), name=get("JobName"), state=_state(get("JobState")), reason=get("Reason"),
            elapsed=slurmtime.duration(get("RunTime")), time_limit=slurmtime.duration(limit),
            unlimited=slurmtime.unlimited(limit), nodes=get("NodeList"), node_count=get("NumNodes"),
            cpus=get("NumCPUs"), dependency=get("Dependency"), submit_time=get("SubmitTime"),
            start_time=get("StartTime"), end_time=get("EndTime"), work_dir=get("WorkDir"),
            exit_code=code, signal=signal, command=get("Command"), source="scontrol"))
    return out


def _field_reader(fields: Mapping[str, str]) -> Callable[[str], str]:
    """A record's fields by name, Slurm's not-set spellings read as ""."""
    return lambda key: slurmtime.clean(fields.get(key, ""))


def parse_sacct(text: str) -> list[SlurmJob]:
    """`sacct -P` output with its header line; a job's steps (`17.batch`, `17.0`) are left out."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or "|" not in lines[0]:
        return []
    header = [h.strip() for h in lines[0].split("|")]
    out = []
    for line in lines[1:]:
        row = dict(zip(header, line.split("|"), strict=False))    # a short line: its missing fields read as unset
        job_id = row.get("JobID", "").strip()
        if not job_id or "." in job_id:
            continue
        get = _field_reader(row)
        code, signal = _exit_code(get("ExitCode"))
        elapsed = get("ElapsedRaw")
        limit = row.get("Timelimit", "")
        out.append(SlurmJob(
            job_id=job_id, name=get("JobName"), state=_state(get("State")), reason=get("Reason"),
            elapsed=int(elapsed) if elapsed.isdigit() else slurmtime.duration(get("Elapsed")),
            time_limit=slurmtime.duration(limit), unlimited=slurmtime.unlimited(limit),
            nodes=get("NodeList"), submit_time=get("Submit"), start_time=get("Start"), end_time=get("End"),
            work_dir=get("WorkDir"), exit_code=code, signal=signal, source="sacct"))
    return out


def _state(text: str) -> str:
    """`CANCELLED by 0` -> CANCELLED; `CANCELLED+` (sacct's mark for more) -> CANCELLED."""
    return text.split()[0].rstrip("+") if text.strip() else ""


def _exit_code(text: str) -> tuple[Optional[int], Optional[int]]:
    code, _, signal = text.partition(":")
    return (int(code) if code.isdigit() else None, int(signal) if signal.isdigit() else None)


def _key_values(line: str) -> dict[str, str]:
    """Key=Value pairs of one scontrol line; a value runs to the next ` Key=` (values may hold spaces)."""
    out: dict[str, str] = {}
    key = ""
    for token in line.strip().split(" "):
        name, sep, value = token.partition("=")
        if sep and name and (name[0].isalpha() and all(c.isalnum() or c in "/:_" for c in name)):
            key = name
            out[key] = value
        elif key:
            out[key] += " " + token
    return out


def poll_submission(sub: Submission, job_ids: Mapping[str, Iterable[str]] | None = None, *,
                    job_names: Mapping[str, str] | None = None, runner: Runner = run_command,
                    final: Collection[str] = (), timeout: float = TIMEOUT, details: bool = True) -> SlurmPoll:
    """One poll for every benchmark of `sub`: `job_ids` per benchmark (the links its files name;
    the record's first jobs are added), `job_names` per benchmark (job.sh's `--job-name`, else
    Gym's `gym-<benchmark>`). Slurm is asked where the record says it was submitted from."""
    if sub.executor != "slurm":
        return SlurmPoll(error=f"submitted with the {sub.executor!r} executor, not Slurm")
    job_ids, job_names = job_ids or {}, job_names or {}
    ids = {i for b in sub.benchmarks for i in (b.first_job_id,) if i}
    ids.update(i for name in job_ids for i in job_ids[name])
    names = [job_names.get(b.name) or f"gym-{b.name}" for b in sub.benchmarks if b.first_job_id or b.local_dir]
    if not names:
        return SlurmPoll(error="no benchmark of it was queued", host=sub.hostname)
    return poll(names, [b.job_dir for b in sub.benchmarks], ids, host=sub.hostname, runner=runner,
                final=final, timeout=timeout, details=details)
