"""A submitted run's Slurm job (`gym eval submit`): the lines of the job's own files (its batch
log, its service steps' and driver's logs, the chain file: core/cluster/files.py) as facts, and
Slurm's answers, folded into `RunState.job` (core/cluster/job.py, pure) and its one-line
conclusion whenever either changes; and what the job means for the rest of the run:

- its service steps (`# service:` in job.sh: vLLM and the like, started by the job before Gym) are
  servers of kind `service`, in the state their health loop left them;
- the job's state stands in for the process check (Gym runs on a compute node, not here): while
  Slurm says it runs, or a link is queued to go on with it, Gym may be alive; once the chain's
  last link ended, its processes are gone (its missing trials are then missing).
"""

from __future__ import annotations

from datetime import datetime
from typing import Optional, Sequence

from ..cluster import steplog
from ..cluster.conclusion import conclude, deciding_link
from ..cluster.facts import Fact
from ..cluster.files import JobFile
from ..cluster.job import fold, job_ids_in
from ..cluster.jobscript import JobScript
from ..cluster.model import (
    FROM_SLURM,
    P_ENDED,
    P_QUEUED,
    P_RUNNING,
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
from ..cluster.record import Benchmark
from ..cluster.slurmcli import SlurmPoll
from ..model import EXITED, FAILED, K_SERVICE, PENDING, READY, STARTING, Evidence
from ..servers import set_state
from ..tail import decode
from .writer import Part

_SERVER_STATE = {SV_NOT_STARTED: PENDING, SV_STARTING: STARTING, SV_HEALTHY: READY, SV_DIED: FAILED,
                 SV_NEVER_HEALTHY: FAILED, SV_ENDED: EXITED}


class JobLines(Part):
    def __init__(self, w) -> None:
        super().__init__(w)
        self.bench: Optional[Benchmark] = None
        self.script: Optional[JobScript] = None
        self.files: Sequence[JobFile] = ()
        self.refused_at: Optional[Evidence] = None
        self.facts: set[Fact] = set()
        self.poll: Optional[SlurmPoll] = None
        self.asked_at: Optional[datetime] = None
        self.dirty = False
        self.folded_rows = -1               # the rollouts' lines when the job was last folded

    def known(self, bench: Benchmark, script: Optional[JobScript], files: Sequence[JobFile],
              refused_at: Optional[Evidence]) -> None:
        if (bench, script, list(files), refused_at) != (self.bench, self.script, list(self.files), self.refused_at):
            self.bench, self.script, self.files, self.refused_at = bench, script, tuple(files), refused_at
            self.dirty = True
        for spec in script.services if script else ():     # named first: the board lists them above Gym's
            if spec.name not in self.state.servers:
                s = self.w.server(spec.name)
                s.kind, s.port = K_SERVICE, spec.port

    def line(self, file: JobFile, lineno: int, text: str) -> None:
        for fact in file.facts(lineno, text):
            if fact not in self.facts:
                self.facts.add(fact)
                self.dirty = True

    def block(self, file: JobFile, first: int, block: bytes) -> None:
        """Lines `first`.. of one of the job's files (whole lines, each ending with a newline)."""
        if not steplog.may_hold_facts(file.step, block):
            return
        for lineno, raw in enumerate(block.split(b"\n")[:-1], first):
            self.line(file, lineno, decode(raw))

    def answer(self, poll: SlurmPoll, asked_at: Optional[datetime]) -> None:
        """Slurm's answer about the submission's jobs (the whole submission's: the fold keeps this
        benchmark's); the newest knowledge kept (`SlurmPoll.merged`)."""
        self.poll = poll if self.poll is None else self.poll.merged(poll)
        self.asked_at = asked_at
        self.dirty = True

    def job_ids(self) -> set[str]:
        """Every Slurm job of the chain its files name so far (its links' files are read next)."""
        ids = job_ids_in(self.facts)
        if self.bench is not None and self.bench.first_job_id:
            ids.add(self.bench.first_job_id)
        return ids

    def settle(self, now: Optional[float]) -> None:
        """Fold the job again when its facts, Slurm's answer or the rows written changed; then
        write what it means for the run's servers and processes (`now`: settle's time, None for
        what was there when the run was first read)."""
        if self.bench is None or not (self.dirty or self.w.rollout_lines != self.folded_rows):
            return
        self.dirty, self.folded_rows = False, self.w.rollout_lines
        job = fold(self.bench, self.script, self.facts, self.poll, files=self.files,
                   rows_total=self.w.rollout_lines, refused_at=self.refused_at)
        self.state.job, self.state.job_conclusion = job, conclude(job, self.asked_at)
        self.changes.run = True
        if job.links:
            link = shown_link(job)
            for svc in link.services:
                self._service(svc, link, now)
        else:
            why = "sbatch refused the job" if job.sbatch_error else "no Slurm job is known for it"
            for s in self.state.servers.values():
                if s.kind == K_SERVICE:
                    set_state(s, PENDING, now, f"not started: {why}")
        self._liveness(job)

    def _service(self, svc: ServiceStep, link: Link, now: Optional[float]) -> None:
        s = self.w.server(svc.name)
        s.kind = K_SERVICE
        s.port, s.url = svc.port, svc.listening or svc.url or None
        s.log_file = svc.log or None
        s.ready_evidence = svc.healthy
        phase = _phase(svc, link)
        if svc.state in (SV_DIED, SV_NEVER_HEALTHY):
            s.failure = svc.cause or svc.evidence
            s.failure_reason = _failure_words(svc)
        else:
            s.failure, s.failure_reason = None, ""
        if svc.evidence is not None:
            s.last_line, s.last_line_at = svc.evidence.text, svc.evidence
        set_state(s, _SERVER_STATE[svc.state], now, phase)

    def _liveness(self, job: Job) -> None:
        """Whether Gym's processes in the job can be alive: the job's state stands in for the
        process check. Files decide (their silence) where Slurm did not say the job runs."""
        p, c, a = self.state.parent, self.state.collector, self.state.activity
        phase = self.state.job_conclusion.phase if self.state.job_conclusion else ""
        link = deciding_link(job) if job.links else None
        if phase == P_ENDED or (not job.links and job.sbatch_error):
            alive, seen = False, False
        elif phase == P_QUEUED or (phase == P_RUNNING and link is not None and link.source == FROM_SLURM):
            alive, seen = None, True        # in Slurm's hands: its silence says nothing
        else:
            alive, seen = None, False
        if (p.alive, c.alive, a.processes_seen) != (alive, alive, seen):
            self.changes.run = True
        p.alive = c.alive = alive
        a.processes_seen = seen


def shown_link(job: Job) -> Link:
    """The link whose service steps the run shows: the deciding one, or the link that did the work
    a link ended in its prologue speaks for."""
    link = deciding_link(job)
    if link.prologue_only:
        worked = [ln for ln in job.links[:job.links.index(link)] if ln.started and not ln.prologue_only]
        if worked:
            return worked[-1]
    return link


def _phase(svc: ServiceStep, link: Link) -> str:
    if svc.state == SV_STARTING and svc.evidence is not None:
        tries = f" (up to {svc.attempts} attempts" + (f", {svc.interval}s apart)" if svc.interval else ")") \
            if svc.attempts else ""
        return f"waiting for its health check{tries}: {svc.url}" if svc.url else f"waiting for its health check{tries}"
    if svc.state == SV_NOT_STARTED and not svc.detail:
        return f"not started: job {link.job_id} has not started"
    if svc.state == SV_HEALTHY:
        return "healthy: it answered its health check"
    return svc.detail or svc.state.replace("_", " ")


def _failure_words(svc: ServiceStep) -> str:
    cause = svc.cause
    if cause is not None and cause != svc.evidence and cause.text.strip():
        return f"{svc.detail}: {cause.text.strip()}"
    return svc.detail
