"""The fold: a benchmark's facts (its files' lines) and Slurm's answer, into its `Job`.

Pure and idempotent: facts are deduplicated and put in file and line order first, so reading the
files in any order or chunks, or twice, gives the same model. Slurm's answer is the latest one
(`SlurmPoll.merged()` keeps what an ended job's answers said); a link Slurm cannot tell about (it
could not be asked, or has forgotten the job) gets a state inferred from its files, and says so.
"""

from __future__ import annotations

import heapq
import re
from collections import defaultdict
from itertools import pairwise
from typing import Iterable, Optional, Sequence

from ..model import Evidence
from . import slurmtime
from .facts import (
    A_EXIT_DONE,
    A_RETRY,
    A_STOP_CANCELLED,
    ChainEntry,
    ChainStopped,
    CollectionFinished,
    Fact,
    FollowUpFailed,
    FollowUpQueued,
    HealthDied,
    HealthGaveUp,
    HealthReady,
    HealthWait,
    Listening,
    OutOfMemory,
    PreviousJob,
    ResumedRows,
    SlurmError,
    SlurmKill,
    StepAborted,
    StepErrorLine,
    StepFact,
    TaskEnded,
)
from .files import DRIVER, SERVICE, JobFile
from .jobscript import JobScript, expand
from .model import (
    FROM_FILES,
    FROM_SLURM,
    SV_DIED,
    SV_ENDED,
    SV_HEALTHY,
    SV_NEVER_HEALTHY,
    SV_NOT_STARTED,
    SV_STARTING,
    Job,
    Link,
    ServiceStep,
)
from .record import Benchmark, job_id_key
from .slurmcli import SlurmJob, SlurmPoll
from .steplog import DRIVER as DRIVER_STEP
from .words import ENDED_STATES, QUEUED_STATES, RUNNING_STATES

_DEPENDENCY_RE = re.compile(r"after\w*:(\d+)")
_COMMAND_PREV_RE = re.compile(r"\S*job\.sh\s+(\d+)\s*$")
# srun's words for a task that died of a signal.
_SIGNAL_WORDS = {"Segmentation fault": 11, "Killed": 9, "Aborted": 6, "Bus error": 7, "Floating point exception": 8,
                 "Illegal instruction": 4, "Terminated": 15, "Hangup": 1, "Interrupt": 2, "Quit": 3}
_KILL_STATES = {"TIME LIMIT": "TIMEOUT", "PREEMPTION": "PREEMPTED", "NODE FAILURE": "NODE_FAIL",
                "JOB REQUEUE": "REQUEUED"}


def fold(bench: Benchmark, script: Optional[JobScript], facts: Iterable[Fact], slurm: Optional[SlurmPoll] = None,
         *, files: Sequence[JobFile] = (), rows_total: Optional[int] = None,
         refused_at: Optional[Evidence] = None) -> Job:
    """The Job of `bench`, from every fact read of its files and Slurm's latest answer (None: not asked).

    `files`: its `job_files()`, for the names of the links' logs; `rows_total`: the rows now in its
    rollouts file, to tell how many the last link wrote; `refused_at`: the record's line holding
    sbatch's refusal (`record.refusal_line()`)."""
    ordered = sorted(set(facts), key=_fact_order)
    job = Job(benchmark=bench.name, job_dir=bench.job_dir, sbatch_error=bench.sbatch_error, refused_at=refused_at,
              time_limit=script.time_limit if script else None, resumable=bool(script and script.resumable),
              max_retries=script.max_retries if script else None,
              rollouts=script.driver.rollouts if script and script.driver else "")
    if script:
        job.notes.extend(script.notes)
    if slurm is not None:
        job.slurm_error, job.accounting = slurm.error, slurm.accounting
        job.slurm_asked = not slurm.error
    by_job: dict[str, list[Fact]] = defaultdict(list)
    for fact in ordered:
        by_job[fact.job_id].append(fact)
    ids_in_files = _ids_in(bench, ordered)
    told = _slurm_jobs(bench, slurm, ids_in_files)
    for job_id in _chain_order(ids_in_files | told.keys(), _edges(ordered, told)):
        forgotten = bool(slurm and not slurm.error and job_id in slurm.forgotten and job_id not in told)
        job.links.append(_link(job_id, by_job.get(job_id, []), script, told.get(job_id), forgotten, files))
    _settle_chain(job.links)
    _rows(job.links, rows_total)
    return job


def job_ids_in(facts: Iterable[Fact]) -> set[str]:
    """Every Slurm job id the facts name (their own, successors queued, predecessors read)."""
    ids: set[str] = set()
    for f in facts:
        ids.add(f.job_id)
        if isinstance(f, FollowUpQueued):
            ids.add(f.next_id)
        elif isinstance(f, PreviousJob):
            ids.add(f.previous_id)
    return {i for i in ids if i}


def _fact_order(f: Fact) -> tuple[str, int, str]:
    return (f.ev.file, f.ev.line, type(f).__name__)


def _ids_in(bench: Benchmark, facts: Sequence[Fact]) -> set[str]:
    ids = job_ids_in(facts)
    if bench.first_job_id:
        ids.add(bench.first_job_id)
    return ids


def _slurm_jobs(bench: Benchmark, slurm: Optional[SlurmPoll], ids: set[str]) -> dict[str, SlurmJob]:
    """Slurm's jobs that are this benchmark's: run in its job dir, or named by its files."""
    if slurm is None:
        return {}
    home = bench.job_dir.rstrip("/")
    return {j.job_id: j for j in slurm.jobs.values()
            if (j.work_dir and j.work_dir.rstrip("/") == home) or (not j.work_dir and j.job_id in ids)}


def _edges(facts: Sequence[Fact], told: dict[str, SlurmJob]) -> set[tuple[str, str]]:
    """(link, the link after it) pairs, from every place that tells."""
    edges: set[tuple[str, str]] = set()
    entries = sorted((f for f in facts if isinstance(f, ChainEntry)), key=lambda f: f.position)
    edges.update((a.job_id, b.job_id) for a, b in pairwise(entries) if a.job_id != b.job_id)
    for f in facts:
        if isinstance(f, FollowUpQueued):
            edges.add((f.job_id, f.next_id))
        elif isinstance(f, PreviousJob):
            edges.add((f.previous_id, f.job_id))
    for j in told.values():
        prev = _DEPENDENCY_RE.search(j.dependency) or _COMMAND_PREV_RE.search(j.command)
        if prev:
            edges.add((prev.group(1), j.job_id))
    return edges


def _chain_order(ids: set[str], edges: set[tuple[str, str]]) -> list[str]:
    """Links before their successors; ties (and anything a cycle leaves) in submission order."""
    edges = {(a, b) for a, b in edges if a in ids and b in ids}
    incoming: dict[str, int] = {i: 0 for i in ids}
    after: dict[str, list[str]] = defaultdict(list)
    for a, b in edges:
        incoming[b] += 1
        after[a].append(b)
    ready = [(job_id_key(i), i) for i, n in incoming.items() if n == 0]
    heapq.heapify(ready)
    out: list[str] = []
    while ready:
        _, i = heapq.heappop(ready)
        out.append(i)
        for b in after[i]:
            incoming[b] -= 1
            if incoming[b] == 0:
                heapq.heappush(ready, (job_id_key(b), b))
    out += sorted(ids - set(out), key=job_id_key)
    return out


def _link(job_id: str, facts: list[Fact], script: Optional[JobScript], told: Optional[SlurmJob],
          forgotten: bool, files: Sequence[JobFile]) -> Link:
    link = Link(job_id=job_id, forgotten=forgotten)
    link.services = _services(job_id, script, files)
    link.driver_log = _log_name(job_id, DRIVER_STEP, script, files)
    if told is not None:
        _apply_slurm(link, told)
    reading = _Reading(link)
    for fact in facts:
        reading.read(fact)
    reading.finish()
    if link.source != FROM_SLURM:
        _infer(link, reading, script)
    _settle_services(link)
    _settle_cause(link, reading)
    return link


def _services(job_id: str, script: Optional[JobScript], files: Sequence[JobFile]) -> list[ServiceStep]:
    out = []
    for spec in script.services if script else ():
        health = spec.health
        out.append(ServiceStep(name=spec.name, port=spec.port, url=health.url if health else "",
                               attempts=health.attempts if health else None,
                               interval=health.interval if health else None,
                               log=_log_name(job_id, spec.name, script, files)))
    return out


def _log_name(job_id: str, step: str, script: Optional[JobScript], files: Sequence[JobFile]) -> str:
    kind = DRIVER if step == DRIVER_STEP else SERVICE
    named = next((f.name for f in files if f.kind == kind and f.job_id == job_id and f.step == step), "")
    if named or script is None:
        return named
    spec = script.service(step)
    template = spec.output if spec else (script.driver.output if script.driver else "")
    return expand(template, job_id, script.job_name) if template else ""


def _apply_slurm(link: Link, told: SlurmJob) -> None:
    link.state, link.source, link.reason = told.state, FROM_SLURM, told.reason
    link.exit_code, link.signal = told.exit_code, told.signal
    link.nodes, link.elapsed, link.time_limit = told.nodes, told.elapsed, told.time_limit
    link.submit_time, link.start_time, link.end_time = told.submit_time, told.start_time, told.end_time
    link.dependency = told.dependency
    link.started = told.state in RUNNING_STATES or bool(told.elapsed) or (
        told.state in ENDED_STATES and bool(told.nodes))


class _Reading:
    """One link's facts read in line order: what its batch log and its steps' logs say."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.failed_task: Optional[TaskEnded] = None      # a task that failed, not yet put on a service
        self.unattributed: list[TaskEnded] = []            # failed tasks no health message claimed
        self.job_kill: Optional[SlurmKill] = None
        self.time_limit_kill: Optional[SlurmKill] = None
        self.oom: Optional[OutOfMemory] = None
        self.stopped: Optional[ChainStopped] = None
        self.previous: Optional[PreviousJob] = None
        self.errors: dict[str, list[Fact]] = defaultdict(list)   # per step: lines that say why it failed
        self.batch_lines = False
        self.step_lines = False

    def read(self, fact: Fact) -> None:
        link = self.link
        if isinstance(fact, StepFact):
            self.step_lines = True
            self._step(fact)
        elif isinstance(fact, ChainEntry):
            link.started = True
        elif origin := getattr(fact, "origin", ""):
            self.step_lines = True
            self._slurm_line(fact, origin)
        else:
            self.batch_lines = True
            self._batch(fact)

    def _batch(self, fact: Fact) -> None:
        link = self.link
        if isinstance(fact, HealthWait):
            self._service_state(fact.service, SV_STARTING, fact.ev, "")
        elif isinstance(fact, HealthReady):
            self._service_state(fact.service, SV_HEALTHY, fact.ev, "")
        elif isinstance(fact, HealthDied):
            self._died(fact)
        elif isinstance(fact, HealthGaveUp):
            self._gave_up(fact)
        elif isinstance(fact, TaskEnded):
            if fact.how.startswith("Terminated"):
                link.normal_end = True
            elif fact.exit_code != 0:
                self.failed_task = fact
                self.unattributed.append(fact)
        elif isinstance(fact, StepAborted):
            link.normal_end = True
        elif isinstance(fact, FollowUpQueued):
            link.followup = fact.next_id
        elif isinstance(fact, FollowUpFailed):
            link.action = "; ".join(filter(None, (link.action, "could not queue its follow-up: the chain ends with it")))
        elif isinstance(fact, PreviousJob):
            self._previous(fact)
        elif isinstance(fact, ChainStopped):
            self.stopped = fact
            link.stopped_chain = link.prologue_only = True
            link.action = _stop_words(fact)
        else:
            self._slurm_line(fact, "")

    def _step(self, fact: StepFact) -> None:
        if isinstance(fact, Listening):
            svc = self.link.service(fact.step)
            if svc is not None:
                svc.listening = fact.url
        elif isinstance(fact, CollectionFinished):
            self.link.collection_finished = fact.ev
        elif isinstance(fact, ResumedRows):
            self.link.rows_done_before = fact.rows_done
        elif isinstance(fact, StepErrorLine):
            self.errors[fact.step].append(fact)

    def _slurm_line(self, fact: Fact, step: str) -> None:
        if isinstance(fact, SlurmKill):
            if fact.entity == "JOB":
                self.job_kill = fact
            elif fact.outcome == "CANCELLED" and not fact.due:
                self.link.normal_end = True
            if fact.due == "TIME LIMIT":
                self.time_limit_kill = self.time_limit_kill or fact
        elif isinstance(fact, OutOfMemory):
            self.oom = self.oom or fact
            self.errors[step].append(fact)
        elif isinstance(fact, SlurmError):
            self.errors[step].append(fact)

    def _service_state(self, name: str, state: str, ev: Evidence, detail: str) -> Optional[ServiceStep]:
        svc = self.link.service(name)
        if svc is None:                       # a service job.sh does not name (or job.sh unread)
            svc = ServiceStep(name=name)
            self.link.services.append(svc)
        svc.state, svc.evidence, svc.detail = state, ev, detail
        if state == SV_HEALTHY:
            svc.healthy = ev
        self.failed_task = None
        return svc

    def _died(self, fact: HealthDied) -> None:
        task = self.failed_task
        svc = self._service_state(fact.service, SV_DIED, fact.ev, "died during startup")
        if task is not None and svc is not None:
            self.unattributed.remove(task)
            svc.exit_code = task.exit_code
            svc.cause = task.ev
            svc.detail = f"died during startup: {_task_words(task)}"

    def _gave_up(self, fact: HealthGaveUp) -> None:
        svc = self.link.service(fact.service)
        waited = svc.interval * fact.attempts if svc and svc.interval else None
        detail = f"never healthy: {fact.attempts} of {fact.attempts} attempts" + (
            f" over {slurmtime.show_duration(waited)}" if waited else "")
        self._service_state(fact.service, SV_NEVER_HEALTHY, fact.ev, detail)

    def _previous(self, fact: PreviousJob) -> None:
        link = self.link
        self.previous = fact
        link.previous, link.said_of_previous, link.previous_state = fact.previous_id, fact.ev, fact.state
        state = fact.state or "state unknown"
        if fact.action == A_RETRY:
            link.action = f"resumed job {fact.previous_id} ({state}): infra retry {fact.retry}/{fact.max_retries}"
        elif fact.action == A_EXIT_DONE:
            link.action = f"nothing to do: job {fact.previous_id} completed"
            link.prologue_only = True
        elif fact.action == A_STOP_CANCELLED:
            link.action = f"stopped the chain: job {fact.previous_id} was cancelled"
            link.stopped_chain = link.prologue_only = True
        else:
            link.action = f"resumed job {fact.previous_id} ({state})"

    def finish(self) -> None:
        """Step logs, read after the batch log: put their failure lines on their services."""
        link = self.link
        for svc in link.services:
            best = _best_error(self.errors.get(svc.name, []))
            if best is not None and svc.state in (SV_DIED, SV_NEVER_HEALTHY):
                svc.cause = best.ev
            svc.out_of_memory = any(isinstance(f, OutOfMemory) for f in self.errors.get(svc.name, []))
        if self.batch_lines or self.step_lines:
            link.started = True


def _best_error(facts: list[Fact]) -> Optional[Fact]:
    """The line that best says why a step failed: Slurm's exec or container error, an OOM, else the
    last exception line (a traceback ends with it), else the last error line."""
    for kinds in ((SlurmError,), (OutOfMemory,)):
        found = [f for f in facts if isinstance(f, kinds)]
        if found:
            return found[0]
    lines = [f for f in facts if isinstance(f, StepErrorLine)]
    exceptions = [f for f in lines if f.marker == "exception_line"]
    if exceptions:
        return exceptions[-1]
    return lines[-1] if lines else None


def _task_words(task: TaskEnded) -> str:
    return f"exit code {task.exit_code}" if task.exit_code is not None else task.how.lower()


def _stop_words(fact: ChainStopped) -> str:
    if fact.why == "retry_limit":
        return f"stopped the chain: infra retry limit ({fact.limit}) reached after {fact.state}"
    return f"stopped the chain: accumulated walltime reached its cap ({fact.limit})"


def _infer(link: Link, reading: _Reading, script: Optional[JobScript]) -> None:
    """The link's state from its files alone (Slurm could not tell)."""
    link.source = FROM_FILES
    if script and script.time_limit and link.time_limit is None:
        link.time_limit = script.time_limit
    state, code, signal, ev = _inferred_end(link, reading, script)
    if state:
        link.state, link.exit_code, link.signal = state, code, signal
        if ev is not None:
            link.evidence.append(ev)
    elif link.started:
        link.state = "RUNNING"
    else:
        link.state, link.source = "", ""


def _inferred_end(link: Link, r: _Reading, script: Optional[JobScript]
                  ) -> tuple[str, Optional[int], Optional[int], Optional[Evidence]]:
    if r.job_kill is not None:
        kill = r.job_kill
        if kill.outcome == "CANCELLED":
            return _KILL_STATES.get(kill.due, "CANCELLED"), None, None, kill.ev
        return "FAILED", None, None, kill.ev
    if r.time_limit_kill is not None:
        return "TIMEOUT", None, None, r.time_limit_kill.ev
    if r.oom is not None and r.oom.kernel and r.oom.origin in ("", DRIVER_STEP):
        # The batch script's or the driver's own memory: the job's work died of it.
        return "OUT_OF_MEMORY", None, None, r.oom.ev
    if r.stopped is not None:
        return ("FAILED", 1, 0, r.stopped.ev) if r.stopped.why == "retry_limit" else ("COMPLETED", 0, 0, r.stopped.ev)
    if r.previous is not None and r.previous.action in (A_EXIT_DONE, A_STOP_CANCELLED):
        return "COMPLETED", 0, 0, r.previous.ev
    dead = next((s for s in link.services if s.state in (SV_DIED, SV_NEVER_HEALTHY)), None)
    if dead is not None:
        return "FAILED", 1, 0, dead.evidence
    if r.unattributed:
        task = r.unattributed[-1]
        if task.how.startswith("Out Of Memory"):
            return "OUT_OF_MEMORY", None, None, task.ev
        return "FAILED", task.exit_code, signal_of(task.how), task.ev
    if link.normal_end or (script is not None and not script.services and link.collection_finished):
        return "COMPLETED", 0, 0, link.collection_finished
    return "", None, None, None


def _settle_services(link: Link) -> None:
    ended = link.state in ENDED_STATES
    for svc in link.services:
        if link.prologue_only:                # the prologue exits before any service is launched
            svc.state, svc.detail = SV_NOT_STARTED, "not launched: the job ended in its resume prologue"
        elif not link.started:
            svc.state = SV_NOT_STARTED
            if link.state == "CANCELLED" or link.not_needed:
                svc.detail = "the job never ran"
        elif svc.state == SV_NOT_STARTED:
            svc.state = SV_ENDED if ended else SV_STARTING
            svc.detail = "ended with the job, never checked" if ended else "launched; its health check has not begun"
        elif ended and svc.state == SV_HEALTHY:
            svc.state, svc.detail = SV_ENDED, "ended with the job"
        elif ended and svc.state == SV_STARTING:
            svc.state, svc.detail = SV_ENDED, "ended with the job before it became healthy"


def _settle_cause(link: Link, r: _Reading) -> None:
    """The one line to read first about how the link ended, and its words."""
    dead = next((s for s in link.services if s.state in (SV_DIED, SV_NEVER_HEALTHY)), None)
    if r.stopped is not None:
        link.cause, link.cause_words = r.stopped.ev, link.action
    elif dead is not None:
        line = f": {dead.cause.text.strip()}" if dead.cause and dead.cause != dead.evidence else ""
        link.cause, link.cause_words = dead.cause or dead.evidence, f"{dead.name} {dead.detail}{line}"
    elif r.job_kill is not None or r.time_limit_kill is not None:
        kill = r.job_kill or r.time_limit_kill
        assert kill is not None
        link.cause, link.cause_words = kill.ev, kill.ev.text.strip()
    elif r.oom is not None:
        link.cause, link.cause_words = r.oom.ev, f"out of memory: {r.oom.ev.text.strip()}"
    elif r.unattributed and link.state not in QUEUED_STATES | RUNNING_STATES:
        task = r.unattributed[-1]
        link.cause, link.cause_words = task.ev, f"a job step ended: {task.how}"
    elif (errors := r.errors.get(DRIVER_STEP)) and (best := _best_error(errors)) is not None:
        link.cause, link.cause_words = best.ev, f"the driver: {best.ev.text.strip()}"


def _settle_chain(links: list[Link]) -> None:
    """A successor cancelled because the link before it succeeded was never needed: not a failure."""
    for prev, link in pairwise(links):
        if link.previous is None and link.job_id == prev.followup:
            link.previous = prev.job_id
        if link.previous == prev.job_id and prev.source == FROM_FILES and link.previous_state in ENDED_STATES:
            _as_its_successor_read_it(prev, link)
        # (sacct's reason for it is only `Dependency`: a successor that waits for its predecessor to
        # fail, cancelled before it started once that predecessor completed, was not needed either)
        cancelled_unneeded = link.state == "CANCELLED" and (link.reason == "DependencyNeverSatisfied" or (
            not link.started and prev.state == "COMPLETED"))
        if cancelled_unneeded or (not link.started and not link.state and prev.state == "COMPLETED"):
            link.not_needed = True
            if not link.state:
                link.state, link.reason, link.source = "CANCELLED", "DependencyNeverSatisfied", FROM_FILES
            for svc in link.services:
                svc.detail = "the job never ran"
        elif not link.started and not link.state and prev.state in RUNNING_STATES | QUEUED_STATES:
            link.state, link.reason, link.source = "PENDING", "Dependency", FROM_FILES


def _as_its_successor_read_it(prev: Link, link: Link) -> None:
    """A link whose state came from its own files, when its successor's prologue read another
    from sacct: sacct's word (a time limit leaves no line of its own in the batch log when the job
    is killed before slurmstepd writes it)."""
    if prev.state == link.previous_state:
        return
    prev.state = link.previous_state
    prev.exit_code = prev.signal = None
    ev = link.said_of_previous
    if ev is not None:
        prev.evidence.append(ev)
        if prev.state != "COMPLETED":
            prev.cause, prev.cause_words = ev, ev.text.strip()


def _rows(links: list[Link], rows_total: Optional[int]) -> None:
    """Which link wrote which rows: each resumed link says how many were done before it."""
    marked = [ln for ln in links if ln.rows_done_before is not None]
    for link, nxt in pairwise(marked):
        assert link.rows_done_before is not None and nxt.rows_done_before is not None
        link.rows_written = max(0, nxt.rows_done_before - link.rows_done_before)
    if marked and rows_total is not None:
        last = marked[-1]
        assert last.rows_done_before is not None
        last.rows_written = max(0, rows_total - last.rows_done_before)


def signal_of(words: str) -> Optional[int]:
    """The signal srun's words name (`Segmentation fault (core dumped)` -> 11)."""
    return next((n for w, n in _SIGNAL_WORDS.items() if words.startswith(w)), None)

