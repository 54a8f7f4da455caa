"""`gymwatch stop SUBMISSION`: end the Slurm jobs of one `gym eval submit`, gracefully where it can.

In order, each step one Slurm command for the whole submission (here, or over SSH to the host
the record names):

1. `squeue`: the submission's jobs, a resume chain's queued next link included (found by job
   name and work dir, as `slurmcli` finds them), and `squeue --steps` for the running ones.
2. `scancel ID...`: every queued job, and every running job whose driver has not started
   (its services are still coming up: there is nothing to stop gracefully). Queued jobs go
   first: a chain's next link waits on `afternotok`, so it would start as soon as the running
   link ends on the interrupt.
3. `scancel --signal=INT JOB.STEP...`: the driver step of every running job. Gym's `gym eval
   run` takes SIGINT as Ctrl-C: it stops collecting, keeps the rows written and shuts its servers
   down; then job.sh ends, and Slurm ends the service steps, as at any job's end. (SIGTERM would
   kill the driver at once.) A job whose job.sh is not on this machine gets the signal on every step.
4. Wait up to the grace period for those jobs to end (a successor queued meanwhile is cancelled),
   then `scancel` the ones still running.
5. Wait for Slurm to finish the jobs off (COMPLETING), then one last poll (with `sacct` for the
   exit codes) says what Slurm reports now.

A job that ends on the interrupt ends as job.sh's exit status makes it (FAILED: `gym eval run`
exits non-zero when its collection is interrupted); Slurm says CANCELLED of the jobs `scancel`
ended. Either way the report names what gymwatch did to each job.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from ..core.cluster import jobscript, slurmcli
from ..core.cluster.record import JOB_SCRIPT, Benchmark, Submission, job_id_key
from ..core.cluster.slurmcli import Runner, SlurmJob, SlurmPoll, on_host, run_command
from ..core.cluster.words import QUEUED_STATES, reason, state_words

PACE = 2.0         # seconds between squeue calls while waiting
SETTLE = 30.0      # seconds at most for Slurm to finish off the cancelled jobs (its KillWait)

INTERRUPTED, CANCELLED = "interrupted", "cancelled"


class StopError(Exception):
    """Slurm could not be asked or told: one line saying why."""


@dataclass
class Stopped:
    """What `stop_submission` did and what Slurm said after."""

    sub: Submission
    before: SlurmPoll
    after: SlurmPoll
    done: dict[str, list[str]] = field(default_factory=dict)   # job id -> INTERRUPTED / CANCELLED, in order
    waited: float = 0.0                                         # seconds the interrupted jobs were given

    @property
    def nothing_to_cancel(self) -> bool:
        return not self.done

    @property
    def left(self) -> list[SlurmJob]:
        return live(self.after)

    @property
    def ok(self) -> bool:
        return not self.left


@dataclass(frozen=True)
class Clock:
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], float] = time.monotonic


def live(poll: SlurmPoll) -> list[SlurmJob]:
    return sorted((j for j in poll.jobs.values() if not j.ended), key=lambda j: job_id_key(j.job_id))


def stop_submission(sub: Submission, grace: float, *, say: Callable[[str], None] = print,
                    runner: Runner = run_command, pace: float = PACE, settle: float = SETTLE,
                    clock: Clock = Clock()) -> Stopped:
    """Cancel every job of `sub` still queued or running; `grace`: seconds the interrupted drivers
    get to stop collecting and shut their servers down. Raises StopError when Slurm cannot be asked."""
    slurm = _Slurm(sub, runner, say)
    before = slurm.poll()
    result = Stopped(sub, before, before)
    jobs = live(before)
    if not jobs:
        return result
    where = f" on {sub.hostname}" if before.host else ""
    say(f"stopping {sub.gym_job_id}{where}: " + ", ".join(f"job {j.job_id} {j.state}" for j in jobs))
    running = [j for j in jobs if j.state == "RUNNING"]
    steps = slurm.steps([j.job_id for j in running])
    drivers = _driver_steps(sub)
    cancel = [j for j in jobs if j.state not in ("RUNNING", "COMPLETING")]
    interrupt: list[tuple[SlurmJob, str]] = []
    for job in running:
        bench = _benchmark_of(job, sub)
        step = drivers.get(bench.name) if bench else None
        if step is None:
            interrupt.append((job, job.job_id))          # job.sh not here: every step gets the signal
        elif step in steps.get(job.job_id, {}):
            interrupt.append((job, f"{job.job_id}.{step}"))
        else:
            cancel.append(job)                            # its driver has not started: nothing to stop gracefully
    slurm.scancel([j.job_id for j in cancel], result, _why(cancel))
    ids = {j.job_id for j, _ in interrupt}
    if interrupt:
        slurm.scancel([t for _, t in interrupt], result, "", signal="INT")
        say(f"  waiting up to {grace:g}s for {_ids(ids)} to stop collecting and end")
        t0 = clock.now()
        slurm.wait(ids, grace, result, pace, clock)
        result.waited = clock.now() - t0
        still = [j.job_id for j in live(slurm.poll(details=False)) if j.job_id in ids and j.state != "COMPLETING"]
        slurm.scancel(still, result, f"still running after {grace:g}s")
    slurm.wait(set(result.done), settle, result, pace, clock, until_gone=True)
    result.after = slurm.poll()
    return result


class _Slurm:
    """Slurm asked and told about one submission, through one runner (here or over SSH)."""

    def __init__(self, sub: Submission, runner: Runner, say: Callable[[str], None]):
        self.sub, self.runner, self.say = sub, runner, say
        self.names = _job_names(sub)

    def poll(self, details: bool = True) -> SlurmPoll:
        """One squeue call (and with `details`, sacct or scontrol for the ended jobs' exit codes)."""
        got = slurmcli.poll_submission(self.sub, job_names=self.names, runner=self.runner, details=details)
        if got.error:
            raise StopError(got.error)
        return got

    def steps(self, job_ids: list[str]) -> dict[str, dict[str, str]]:
        steps, error = slurmcli.running_steps(job_ids, host=self.sub.hostname, runner=self.runner)
        if error:
            raise StopError(error)
        return steps

    def scancel(self, targets: list[str], result: Stopped, why: str, signal: str = "") -> None:
        if not targets:
            return
        argv = ["scancel", *([f"--signal={signal}"] if signal else []), *targets]
        ran = self.runner(on_host(argv, self.sub.hostname), slurmcli.TIMEOUT)
        if ran.returncode == 255 and ran.argv[:1] == ("ssh",):
            raise StopError(f"cannot reach {self.sub.hostname} over SSH: {ran.why()}")
        if ran.returncode == 127:
            raise StopError(f"no `scancel` on {self.sub.hostname}" if ran.argv[:1] == ("ssh",)
                            else "no `scancel` here (no Slurm client on this machine)")
        verb = "sent SIGINT to the driver of" if signal else "cancelled"
        self.say(f"  {shlex.join(argv)}: {verb} {_ids(t.split('.')[0] for t in targets)}"
                 + (f" ({why})" if why else ""))
        # scancel names each job it could not signal (already ending, unknown); it did the others.
        for line in (ran.stderr + ran.stdout).splitlines():
            if line.strip():
                self.say(f"  {line.strip()}")
        for target in targets:
            result.done.setdefault(target.split(".")[0], []).append(INTERRUPTED if signal else CANCELLED)

    def wait(self, ids: set[str], limit: float, result: Stopped, pace: float, clock: Clock,
             until_gone: bool = False) -> None:
        """squeue every `pace` s until none of `ids` runs (`until_gone`: nor is COMPLETING) or
        `limit` passes; a job of the submission queued meanwhile (a chain's next link) is cancelled."""
        deadline = clock.now() + limit
        while True:
            jobs = live(self.poll(details=False))
            fresh = [j for j in jobs if j.job_id not in result.done and j.state in QUEUED_STATES]
            self.scancel([j.job_id for j in fresh], result, "queued meanwhile")
            busy = [j for j in jobs if j.job_id in ids and (until_gone or j.state != "COMPLETING")]
            if not busy or clock.now() >= deadline:
                return
            clock.sleep(pace)


def _job_names(sub: Submission) -> dict[str, str]:
    out = {}
    for bench in sub.benchmarks:
        script = _script(bench)
        if script is not None and script.job_name:
            out[bench.name] = script.job_name
    return out


def _driver_steps(sub: Submission) -> dict[str, str]:
    """Per benchmark, the step number of its driver, from its job.sh (when this machine has it)."""
    out = {}
    for bench in sub.benchmarks:
        script = _script(bench)
        if script is not None and script.driver is not None and script.driver.step is not None:
            out[bench.name] = str(script.driver.step)
    return out


def _script(bench: Benchmark) -> Optional[jobscript.JobScript]:
    if bench.local_dir is None or not (bench.local_dir / JOB_SCRIPT).is_file():
        return None
    return jobscript.read(bench.local_dir / JOB_SCRIPT)


def _benchmark_of(job: SlurmJob, sub: Submission) -> Optional[Benchmark]:
    for bench in sub.benchmarks:
        if job.work_dir and job.work_dir.rstrip("/") == bench.job_dir.rstrip("/"):
            return bench
    return next((b for b in sub.benchmarks if b.first_job_id == job.job_id), None)


def _why(jobs: list[SlurmJob]) -> str:
    """Why each job is cancelled outright, in words ("4: ..." for each when there are several)."""
    words = []
    for job in jobs:
        if job.state == "RUNNING":
            said = "its services are still starting"
        elif "afternotok" in job.dependency:
            said = "the resume chain's next link"
        elif job.state == "PENDING" and job.reason:
            said = reason(job.reason).words
        else:
            said = state_words(job.state)
        words.append(said if len(jobs) == 1 else f"{job.job_id}: {said}")
    return "; ".join(words)


def _ids(ids: Iterable[str]) -> str:
    ids = sorted(set(ids), key=job_id_key)
    return ("job " if len(ids) == 1 else "jobs ") + ", ".join(ids)


def describe(result: Stopped) -> list[str]:
    """Per benchmark, what Slurm says of each of its jobs now, and what gymwatch did to it."""
    lines = []
    by_bench: dict[str, list[SlurmJob]] = {}
    for job in sorted(result.after.jobs.values(), key=lambda j: job_id_key(j.job_id)):
        bench = _benchmark_of(job, result.sub)
        by_bench.setdefault(bench.name if bench else job.name, []).append(job)
    for bench in result.sub.benchmarks:
        if bench.first_job_id is None and bench.name not in by_bench:
            lines.append(f"  {bench.name}: never queued (sbatch refused it)")
    for name, jobs in by_bench.items():
        for job in jobs:
            lines.append(f"  {name}: job {job.job_id} {job.state or 'unknown'}{_detail(job, result)}")
    return lines


def _detail(job: SlurmJob, result: Stopped) -> str:
    parts = []
    if job.reason:
        parts.append(job.reason)
    if job.exit_code is not None and (job.exit_code or job.signal):
        parts.append(f"exit code {job.exit_code}" + (f", signal {job.signal}" if job.signal else ""))
    did = result.done.get(job.job_id, [])
    if did == [INTERRUPTED]:
        parts.append("ended after gymwatch's SIGINT to its driver" if job.ended else
                     "sent SIGINT, not ended yet")
    elif did:
        first = "SIGINT to its driver, then cancelled by gymwatch" if did[0] == INTERRUPTED else "cancelled by gymwatch"
        parts.append(first if job.ended else first + ", not ended yet")
    elif job.state == "COMPLETING":
        parts.append("already ending")
    elif not job.ended:
        parts.append("left alone")
    return f" ({'; '.join(parts)})" if parts else ""
